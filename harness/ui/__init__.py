"""`kraftlab ui`: a live web view of a running local cluster, and the same view over a recorded
simulated run (docs/ui.md).

Modules: timeline.py (what changed between two view states; pure), live.py (the view state of a
running cluster, polled through the admin API), actions.py (the page's buttons: launcher and
admin calls, as the CLI makes them), server.py (aiohttp: the page, its stream, its buttons),
static/ (the page: plain HTML, CSS and JavaScript, no build step).

Dependencies point one way: this package uses harness.admin's client and auth, the launcher and
the nemesis' grudges; nothing in harness.runtime or harness.sim imports it (a recording reaches
it as a JSON document, harness/sim/runs/recording.py).
"""
