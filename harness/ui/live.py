"""The live view's source: a running local cluster, polled through its admin APIs.

`ClusterPoller.poll()` builds one view state (docs/ui.md "The view state") from what the CLI
reads too: DIR/cluster.json and /proc for each process (running, paused, gone), each
controller's /quorum/status, each broker's /partitions (its replica cores' LEO, HW, role and,
on a leader, every follower's fetch position), each node's /nemesis/links, and the active
controller's metadata image (/cluster, /topics/{topic}: registrations, leaders, ISR, ELR, the
topic's replication.mode), read with `consistency=local` so a poll never waits on a read barrier.

`LiveFeed` polls a few times a second in a worker thread, turns each new state into timeline
events (harness/ui/timeline.py), keeps the recent history, and hands states and events to the
page's open streams (harness/ui/server.py).

Rules:
- Nodes are asked in parallel, each with a short timeout, and a SIGSTOPped node (state T in
  /proc) is not asked at all: one hung node must not stall the view of the others.
- A node that is paused or down shows what it last reported (its log does not change while it is
  stopped; `role` says "paused" or "down"), as the simulator's replay does.
- Follower lag is the partition leader's view (Kafka's Replica state on the leader). Its
  `lag_ms` compares the core's `last_caught_up_time_ms` (the node's event-loop clock, which is
  CLOCK_MONOTONIC ms for asyncio and uvloop alike) with this process's time.monotonic(): the
  launcher runs every node on this host, so both read the same clock.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

import structlog

from harness.admin.client import AdminClient, AdminError
from harness.launcher import cluster as cl
from harness.ui.timeline import Event, State, changes

log = structlog.get_logger()
POLL_TIMEOUT_S = 0.5
HISTORY_EVENTS = 2000


def process_state(node: cl.NodeEntry) -> tuple[bool, bool]:
    """(running, paused) of the node's recorded PID (paused: stopped by SIGSTOP, state T)."""
    if not cl.is_our_process(node.pid, node.config_file):
        return False, False
    try:
        stat = Path(f"/proc/{node.pid}/stat").read_text()
    except OSError:
        return False, False
    return True, stat.rsplit(")", 1)[1].split()[0] == "T"


class ClusterPoller:
    """Builds view states of the cluster in `data_dir` (blocking; one poll at a time)."""

    def __init__(self, data_dir: Path, timeout_s: float = POLL_TIMEOUT_S) -> None:
        self.data_dir = data_dir
        self.timeout_s = timeout_s
        self.started = time.monotonic()
        self._clients: dict[tuple[str, int], AdminClient] = {}
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="kraftlab-ui-poll")
        self._last: dict[int, dict[str, Any]] = {}  # node id -> its last answers
        self._image: dict[str, Any] = {"cluster": None, "topics": []}
        self.cluster_id = ""

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        for client in self._clients.values():
            client.close()

    def _client(self, node: cl.NodeEntry) -> AdminClient:
        key = (node.host, node.admin_port)
        if key not in self._clients:
            self._clients[key] = AdminClient(node.host, node.admin_port, self.timeout_s)
        return self._clients[key]

    def _get(self, node: cl.NodeEntry, path: str) -> Any:
        try:
            return self._client(node).get_json(path)
        except (AdminError, OSError, ValueError):
            return None

    def _probe(self, node: cl.NodeEntry) -> dict[str, Any]:
        answers: dict[str, Any] = {"links": self._get(node, "/nemesis/links")}
        if node.role == "controller":
            answers["quorum"] = self._get(node, "/quorum/status")
        else:
            answers["partitions"] = self._get(node, "/partitions")
        return answers

    def poll(self) -> State:
        cluster = cl.ClusterFile.load(self.data_dir)
        self.cluster_id = cluster.cluster_id
        procs = {n.id: process_state(n) for n in cluster.nodes}
        asked = {n.id: self._pool.submit(self._probe, n) for n in cluster.nodes
                 if procs[n.id][0] and not procs[n.id][1]}
        for node_id, future in asked.items():
            answers = future.result()
            last = self._last.setdefault(node_id, {})
            last.update({k: v for k, v in answers.items() if v is not None})
            last["answered"] = any(v is not None for v in answers.values())
        now_mono_ms = int(time.monotonic() * 1000)
        controllers = [self._controller(n, procs[n.id]) for n in cluster.controllers]
        self._read_image(cluster, controllers)
        state: State = {
            "time_ms": now_mono_ms - int(self.started * 1000),
            "wall_ms": int(time.time() * 1000),
            "cluster_id": cluster.cluster_id,
            "controllers": controllers,
            "brokers": self._brokers(cluster, procs),
            "partitions": self._partitions(cluster, procs, now_mono_ms),
            "links": self._links(cluster, procs),
            "clients_cut": sorted(n.id for n in cluster.nodes if procs[n.id][0]
                                  and (self._last.get(n.id, {}).get("links") or {})
                                  .get("drop_clients")),
            "anomalies": [],
        }
        return state

    # --- the metadata quorum -----------------------------------------------------------------

    def _controller(self, node: cl.NodeEntry, proc: tuple[bool, bool]) -> dict[str, Any]:
        up, paused = proc
        last = self._last.get(node.id, {}) if up else {}
        q = last.get("quorum") or {}
        if not up:
            role = "down"
        elif paused or last.get("answered"):
            role = q.get("role", "unknown")  # a paused node: what it said before it stopped
        else:
            role = "unknown"  # running but not answering (starting, or cut off from clients)
        return {"id": node.id, "up": up, "paused": paused, "role": role,
                "epoch": q.get("leader_epoch"), "leader_id": q.get("leader_id"),
                "voted_id": q.get("voted_id"), "high_watermark": q.get("high_watermark"),
                "log_end_offset": q.get("log_end_offset")}

    def _read_image(self, cluster: cl.ClusterFile, controllers: list[dict[str, Any]]) -> None:
        """The metadata image from the active controller (else any answering controller)."""
        leaders = [c["id"] for c in controllers if c["role"] == "leader" and not c["paused"]]
        others = [c["id"] for c in controllers if c["up"] and not c["paused"]
                  and c["id"] not in leaders]
        for node_id in leaders + others:
            node = cluster.node(node_id)
            view = self._get(node, "/cluster?consistency=local")
            names = self._get(node, "/topics?consistency=local")
            if not isinstance(view, dict) or not isinstance(names, list):
                continue
            topics = []
            for name in names:
                described = self._get(node, f"/topics/{quote(name, safe='')}?consistency=local")
                if isinstance(described, dict):
                    topics.append(described)
            self._image = {"cluster": view, "topics": topics}
            return

    # --- brokers and partitions --------------------------------------------------------------

    def _brokers(self, cluster: cl.ClusterFile,
                 procs: dict[int, tuple[bool, bool]]) -> list[dict[str, Any]]:
        registered = {b["id"]: b for b in (self._image["cluster"] or {}).get("brokers", [])}
        out = []
        for node in cluster.brokers:
            up, paused = procs[node.id]
            reg = registered.get(node.id)
            out.append({"id": node.id, "up": up, "paused": paused, "registered": reg is not None,
                        "fenced": reg["fenced"] if reg else True,
                        "epoch": reg["epoch"] if reg else None,
                        "shutdown": bool(reg and reg.get("in_controlled_shutdown"))})
        return out

    def _partitions(self, cluster: cl.ClusterFile, procs: dict[int, tuple[bool, bool]],
                    now_mono_ms: int) -> list[dict[str, Any]]:
        rows: dict[tuple[str, int, int], dict[str, Any]] = {}
        for node in cluster.brokers:
            for row in self._last.get(node.id, {}).get("partitions") or []:
                rows[(row["topic"], row["partition"], node.id)] = row
        out = []
        for topic in self._image["topics"]:
            mode = topic.get("configs", {}).get("replication.mode", "isr")
            for p in topic["partitions"]:
                logs = []
                for r in p["replicas"]:
                    up, paused = procs.get(r, (False, False))
                    row = rows.get((topic["name"], p["partition"], r))
                    logs.append(_replica_log(r, row, up, paused))
                _fill_lag(logs, rows, topic["name"], p["partition"], now_mono_ms)
                out.append({"topic": topic["name"], "partition": p["partition"], "mode": mode,
                            "leader": p["leader"], "leader_epoch": p["leader_epoch"],
                            "isr": p["isr"], "elr": p.get("elr", []),
                            "replicas": p["replicas"], "committed_end": None, "logs": logs})
        return out

    def _links(self, cluster: cl.ClusterFile,
               procs: dict[int, tuple[bool, bool]]) -> list[list[int]]:
        pairs: set[tuple[int, int]] = set()
        for node in cluster.nodes:
            if not procs[node.id][0]:
                continue  # a restarted node comes back healed: filters live in memory
            for other in (self._last.get(node.id, {}).get("links") or {}).get("drop", []):
                pairs.add((min(node.id, other), max(node.id, other)))
        return [list(p) for p in sorted(pairs)]


def _replica_log(replica: int, row: dict[str, Any] | None, up: bool,
                 paused: bool) -> dict[str, Any]:
    row = row or {}
    role = "down" if not up else "paused" if paused else row.get("role", "unknown")
    return {"id": replica, "role": role, "log_start": row.get("log_start_offset", 0),
            "leo": row.get("log_end_offset", 0), "hw": row.get("high_watermark", 0),
            "leader_epoch": row.get("leader_epoch"), "fetched_to": None,
            "lag_offsets": None, "lag_ms": None, "entries": None}


def _fill_lag(logs: list[dict[str, Any]], rows: dict[tuple[str, int, int], dict[str, Any]],
              topic: str, partition: int, now_mono_ms: int) -> None:
    """Followers as the partition leader sees them (its /partitions `followers`)."""
    leader = next((lg for lg in logs if lg["role"] == "leader"), None)
    if leader is None:
        return
    row = rows.get((topic, partition, leader["id"])) or {}
    leader["lag_offsets"], leader["lag_ms"] = 0, 0
    followers = {f["replica_id"]: f for f in row.get("followers", [])}
    for lg in logs:
        f = followers.get(lg["id"])
        if lg is leader or f is None or f["log_end_offset"] < 0:
            continue
        lag = max(0, leader["leo"] - f["log_end_offset"])
        lg["fetched_to"] = f["log_end_offset"]
        lg["lag_offsets"] = lag
        lg["lag_ms"] = 0 if lag == 0 else max(0, now_mono_ms - f["last_caught_up_time_ms"])


class LiveFeed:
    """Polls in the background; keeps the latest state and the timeline; feeds the streams."""

    def __init__(self, poller: ClusterPoller, interval_s: float = 0.25) -> None:
        self.poller = poller
        self.interval_s = interval_s
        self.state: State | None = None
        self.events: collections.deque[Event] = collections.deque(maxlen=HISTORY_EVENTS)
        self._subscribers: set[asyncio.Queue[dict[str, Any]]] = set()
        self._task: asyncio.Task[None] | None = None
        self.poll_error: str | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.poller.close()

    def subscribe(self) -> asyncio.Queue[dict[str, Any]]:
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=64)
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[dict[str, Any]]) -> None:
        self._subscribers.discard(queue)

    def note(self, kind: str, text: str) -> None:
        """An event the poller cannot see (an action taken from the page)."""
        time_ms = int((time.monotonic() - self.poller.started) * 1000)
        self._publish({"events": [{"time_ms": time_ms, "kind": kind, "text": text}]})

    def _publish(self, message: dict[str, Any]) -> None:
        self.events.extend(message.get("events", []))
        for queue in list(self._subscribers):
            if queue.full():  # a stalled page: drop its oldest message, never block the feed
                queue.get_nowait()
            queue.put_nowait(message)

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                state = await asyncio.to_thread(self.poller.poll)
                self.poll_error = None
            except Exception as exc:  # the feed's edge: say it on the page, keep polling
                self.poll_error = f"{type(exc).__name__}: {exc}"
                log.warning("ui.poll_failed", error=self.poll_error)
                self._publish({"error": self.poll_error})
                await asyncio.sleep(self.interval_s)
                continue
            events = changes(self.state, state)
            self.state = state
            self._publish({"state": state, "events": events})
            await asyncio.sleep(max(0.0, self.interval_s - (time.monotonic() - started)))

    def hello(self) -> dict[str, Any]:
        """The first message of a stream: the latest state and the recent timeline."""
        return {"state": self.state, "events": list(self.events), "reset": True,
                "error": self.poll_error}

