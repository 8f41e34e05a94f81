"""`kraftlab jepsen soak`: one cluster, many Jepsen runs in a row, every nemesis in rotation, and
the nodes' memory sampled throughout (docs/jepsen.md "Soak").

Sequence (`soak`), bounded by `duration_s` plus one run's own bounds:
1. bring up 3 controllers and 3 brokers once (the queue workload's timings, runner.QUEUE_OVERRIDES,
   under the runner's DEFAULT_OVERRIDES), in network namespaces with `net="netns"`;
2. start the memory sampler: every `sample_s`, the resident set (VmRSS, /proc/PID/status) of
   every node process named in cluster.json (a restarted node is sampled under its new PID);
3. run segments until the deadline: segment i is a `jepsen run` (runner.run) on that cluster with
   ROTATION[i % len(ROTATION)] (workload, nemesis group), its own seed, its own kv keys (prefix
   `s<i>-k`) or queue topic (`soak-<i>`, deleted after the segment), safe settings (linearizable
   reads; acks=all, RF 3, min.insync.replicas 2, no unclean election); a segment's fault phase
   is `segment_s`, cut so the last one ends by the deadline;
4. bring the cluster down, delete the namespaces, and write DIR/soak.json (every segment's
   verdict, anomalies and the faults applied by name; the memory figures), DIR/memory.csv and
   DIR/memory.png (RSS of every node over time, segments shaded by workload).

Memory verdict (`memory_report`): per node, the RSS at the start of the measured window (after
`warmup_s`, the median of its first samples there) and at its end (the median of the last ones);
growth = end - start. `max_growth_mb` is the bound the soak asserts on every node. A process
restarted by a fault climbs to its steady RSS in its first seconds: its samples count once it is
PROCESS_WARMUP_S old, so a restart is compared at steady state, not mid-climb; the window's
restarts are reported beside the figures. A node with fewer than 2 x EDGE_SAMPLES such samples
in the window is not judged and is listed in `unjudged` (a short soak whose faults restart it
late); the bound holds if every judged node, at least one, grew less.
Exit: 0 every segment valid and memory within the bound; 1 an anomaly or memory beyond the bound;
2 a segment unknown (nothing invalid); 3 the soak could not be done.
"""

from __future__ import annotations

import contextlib
import csv
import json
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.admin.client import AdminError
from harness.check.history import NEMESIS, load_history
from harness.jepsen import runner
from harness.jepsen.nemesis import parse_nemesis
from harness.jepsen.runner import RunError, RunOptions
from harness.jepsen.workload_kv import KvOptions
from harness.jepsen.workload_queue import QueueOptions
from harness.launcher import cluster as cl
from harness.launcher import netns
from harness.launcher.netns import Netns

# (workload, nemesis group); together every fault of harness/jepsen/nemesis.py FAULTS.
ROTATION: tuple[tuple[str, str], ...] = (
    ("kv", "partition"),
    ("queue", "broker"),
    ("kv", "process"),
    ("queue", "clock"),
    ("kv", "clock"),
    ("queue", "all"),
    ("queue", "crash"),  # last, so the earlier segments are as they were: adds random brokers
)
RUN_OVERHEAD_S = 20.0  # a run's setup, heal, recovery, final phase and check, on a loaded machine
MIN_SEGMENT_S = 10.0
EDGE_SAMPLES = 5  # samples whose median is a node's RSS at either end of the window
# A process's RSS climbs for its first seconds (imports, buffers) up to its steady level: a
# node restarted by a fault is measured once its process is this old.
PROCESS_WARMUP_S = 10.0


@dataclass(frozen=True)
class SoakOptions:
    out_dir: Path
    duration_s: float = 600.0
    segment_s: float = 50.0
    seed: int = 0
    net: str = "loopback"
    sample_s: float = 2.0
    warmup_s: float = 120.0
    max_growth_mb: float = 30.0
    progress: Callable[[str], None] | None = None


@dataclass
class Segment:
    index: int
    workload: str
    nemesis: str
    out_dir: str
    started_s: float
    ended_s: float = 0.0
    verdict: str = "error"
    exit_code: int = runner.EXIT_ERROR
    anomalies: dict[str, Any] = field(default_factory=dict)
    faults: dict[str, int] = field(default_factory=dict)  # fault name -> times applied
    ops: int = 0
    error: str | None = None


@dataclass(frozen=True)
class SoakResult:
    exit_code: int
    results: dict[str, Any]
    out_dir: Path


def _say(options: SoakOptions, message: str) -> None:
    if options.progress is not None:
        options.progress(message)


# ---------------------------------------------------------------------------------- memory


def rss_kb(pid: int) -> int | None:
    """The process's resident set size (VmRSS), or None if it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


class MemorySampler:
    """A thread sampling every node's RSS every `interval_s` (PIDs re-read from cluster.json)."""

    def __init__(self, data_dir: Path, interval_s: float, started: float) -> None:
        self.data_dir = data_dir
        self.interval_s = interval_s
        self.started = started
        self.samples: list[tuple[float, int, int, int]] = []  # (t_s, node, pid, rss_kb)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)

    def start(self) -> MemorySampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def sample(self) -> None:
        try:
            nodes = cl.ClusterFile.load(self.data_dir).nodes
        except (cl.ClusterError, OSError, ValueError):
            return  # being rewritten: the next tick reads it
        t = round(time.monotonic() - self.started, 3)
        for node in nodes:
            if cl.is_our_process(node.pid, node.config_file):
                assert node.pid is not None
                kb = rss_kb(node.pid)
                if kb is not None:
                    self.samples.append((t, node.id, node.pid, kb))

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)  # the sampling period


def memory_report(samples: list[tuple[float, int, int, int]], warmup_s: float,
                  max_growth_mb: float) -> dict[str, Any]:
    """Per node: RSS (MB) at the start and end of the window after `warmup_s`, growth, peak,
    restarts inside the window; `within_bound` iff every node grew less than max_growth_mb.
    A sample counts once its process is PROCESS_WARMUP_S old (first seen by the sampler; the
    processes of the first sampling round started before it and count at once)."""
    born: dict[int, float] = {}
    for t, _, pid, _ in samples:
        born.setdefault(pid, t)
    first_round = min(born.values(), default=0.0)

    def mature(t: float, pid: int) -> bool:
        return born[pid] == first_round or t - born[pid] >= PROCESS_WARMUP_S

    nodes: dict[str, Any] = {}
    for node in sorted({s[1] for s in samples}):
        in_window = [s for s in samples if s[1] == node and s[0] >= warmup_s]
        window = [s for s in in_window if mature(s[0], s[2])]
        if len(window) < 2 * EDGE_SAMPLES:
            nodes[str(node)] = {"samples": len(window)}
            continue
        first = statistics.median(s[3] for s in window[:EDGE_SAMPLES]) / 1024
        last = statistics.median(s[3] for s in window[-EDGE_SAMPLES:]) / 1024
        nodes[str(node)] = {
            "samples": len(window), "start_mb": round(first, 1), "end_mb": round(last, 1),
            "growth_mb": round(last - first, 1),
            "peak_mb": round(max(s[3] for s in window) / 1024, 1),
            "restarts": len({s[2] for s in in_window}) - 1,
        }
    growths = [n["growth_mb"] for n in nodes.values() if "growth_mb" in n]
    window_s = (max(s[0] for s in samples) - warmup_s) if samples else 0.0
    return {"warmup_s": warmup_s, "window_s": round(max(0.0, window_s), 1),
            "max_growth_mb_bound": max_growth_mb, "nodes": nodes,
            "max_growth_mb": max(growths) if growths else None,
            # nodes with too few samples of a process past its climb (restarted late, again
            # and again) cannot be judged: named, not counted either way
            "unjudged": [n for n, v in nodes.items() if "growth_mb" not in v],
            "within_bound": bool(growths) and max(growths) < max_growth_mb}


def write_memory(samples: list[tuple[float, int, int, int]], segments: list[Segment],
                 report: dict[str, Any], out_dir: Path) -> None:
    with (out_dir / "memory.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["t_s", "node", "pid", "rss_kb"])
        writer.writerows(samples)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5))
    colors = {"kv": "#dde8f5", "queue": "#f5eadd"}
    for seg in segments:
        ax.axvspan(seg.started_s, seg.ended_s, color=colors.get(seg.workload, "#eee"), lw=0)
        ax.text((seg.started_s + seg.ended_s) / 2, 0.99, f"{seg.workload}\n{seg.nemesis}",
                transform=ax.get_xaxis_transform(), ha="center", va="top", fontsize=7)
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, node in enumerate(sorted({s[1] for s in samples})):
        role = "controller" if node < cl.FIRST_BROKER_ID else "broker"
        pids = sorted({s[2] for s in samples if s[1] == node},
                      key=lambda pid: min(s[0] for s in samples if s[2] == pid))
        for j, pid in enumerate(pids):  # one line per process: a restart starts a new one
            points = [(s[0], s[3] / 1024) for s in samples if s[1] == node and s[2] == pid]
            ax.plot([p[0] for p in points], [p[1] for p in points], lw=1.2,
                    color=palette[i % len(palette)], label=f"{role} {node}" if j == 0 else None)
    ax.axvline(report["warmup_s"], color="grey", ls="--", lw=1)
    ax.set_xlabel("seconds since the cluster started")
    ax.set_ylabel("RSS (MB)")
    growth = report.get("max_growth_mb")
    ax.set_title(f"Node memory during the soak: max growth after {report['warmup_s']:.0f} s "
                 f"= {growth} MB (bound {report['max_growth_mb_bound']} MB)")
    ax.set_ylim(bottom=0)
    ax.legend(loc="lower right", fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out_dir / "memory.png", dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------------- segments


def faults_applied(history: Path) -> dict[str, int]:
    """Fault name -> how many times a segment's nemesis applied it (its history)."""
    counts: dict[str, int] = {}
    for op in load_history(history):
        value = op.value if isinstance(op.value, dict) else {}
        applied = op.f.startswith("start-") and op.f != "start-skipped" and "result" in value
        if op.process == NEMESIS and applied:
            counts[value["fault"]] = counts.get(value["fault"], 0) + 1
    return counts


def segment_options(options: SoakOptions, index: int, time_limit_s: float,
                    data_dir: Path) -> RunOptions:
    workload, nemesis = ROTATION[index % len(ROTATION)]
    return RunOptions(
        out_dir=options.out_dir / f"{index:02d}-{workload}-{nemesis}",
        workload=workload, nemesis=nemesis, time_limit_s=time_limit_s,
        seed=options.seed * 1000 + index, data_dir=data_dir,
        kv=KvOptions(key_prefix=f"s{index}-k"),
        queue=QueueOptions(topic=f"soak-{index}"),
        overrides=dict(runner.DEFAULT_OVERRIDES), progress=options.progress,
    )


def run_segment(options: SoakOptions, index: int, time_limit_s: float, data_dir: Path,
                net: Netns | None, started: float) -> Segment:
    run_options = segment_options(options, index, time_limit_s, data_dir)
    seg = Segment(index, run_options.workload, run_options.nemesis, run_options.out_dir.name,
                  round(time.monotonic() - started, 3))
    _say(options, f"soak segment {index}: {seg.workload} under {seg.nemesis} "
         f"for {time_limit_s:.0f} s")
    try:
        result = runner.run(run_options, net=net)
        seg.verdict, seg.exit_code = result.verdict, result.exit_code
        seg.anomalies = result.results.get("anomalies", {})
        seg.ops = result.results["summary"]["ops"]
        seg.faults = faults_applied(run_options.out_dir / "history.jsonl")
    except RunError as exc:
        seg.error = str(exc)
    if seg.workload == "queue":  # its topic goes: the next segments start from the same image
        with contextlib.suppress(cl.ClusterError, AdminError, OSError):
            client = cl.leader_client(cl.ClusterFile.load(data_dir))
            client.request("DELETE", f"/topics/{run_options.queue.topic}")
    seg.ended_s = round(time.monotonic() - started, 3)
    _say(options, f"soak segment {index}: {seg.verdict.upper()} ({seg.ops} ops, faults "
         f"{seg.faults}, anomalies {sorted(seg.anomalies) or 'none'})")
    return seg


# ------------------------------------------------------------------------------------ the soak


def soak(options: SoakOptions) -> SoakResult:
    if options.duration_s < MIN_SEGMENT_S + RUN_OVERHEAD_S:
        raise RunError(f"--duration must be at least {MIN_SEGMENT_S + RUN_OVERHEAD_S:.0f} s")
    for _, nemesis in ROTATION:
        parse_nemesis(nemesis)
    out_dir = options.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    data_dir = (out_dir / "cluster").resolve()
    if cl.ClusterFile.path_in(data_dir).exists():
        raise RunError(f"{data_dir} already holds a cluster: give a new --out")
    bring_up_options = RunOptions(out_dir=out_dir, workload="queue", progress=options.progress,
                                  overrides=dict(runner.DEFAULT_OVERRIDES), net=options.net)
    net = runner.make_net(bring_up_options, data_dir)
    segments: list[Segment] = []
    sampler: MemorySampler | None = None
    started = time.monotonic()
    try:
        with net.entered() if net is not None else contextlib.nullcontext():
            runner.bring_up(bring_up_options, data_dir, net)
            started = time.monotonic()
            deadline = started + options.duration_s
            sampler = MemorySampler(data_dir, options.sample_s, started).start()
            index = 0
            while (remaining := deadline - time.monotonic()) >= MIN_SEGMENT_S + RUN_OVERHEAD_S:
                limit = min(options.segment_s, remaining - RUN_OVERHEAD_S)
                segments.append(run_segment(options, index, limit, data_dir, net, started))
                index += 1
    except (cl.ClusterError, OSError, netns.NetnsError) as exc:
        raise RunError(f"soak failed: {exc}") from exc
    finally:
        if sampler is not None:
            sampler.stop()
        if cl.ClusterFile.path_in(data_dir).exists():
            stuck = runner.bring_down(data_dir)
            if stuck:
                _say(options, f"WARNING: nodes {stuck} did not stop")
        if net is not None:
            net.teardown()
    samples = sampler.samples if sampler is not None else []
    report = memory_report(samples, options.warmup_s, options.max_growth_mb)
    write_memory(samples, segments, report, out_dir)
    return finish(options, segments, report, time.monotonic() - started)


def anomaly_count(found: Any) -> int:
    """How many anomalies one checker entry reports (queue: {"count": n}; kv: a list)."""
    if isinstance(found, dict) and isinstance(found.get("count"), int):
        return int(found["count"])
    return len(found) if isinstance(found, list) else 1


def finish(options: SoakOptions, segments: list[Segment], memory: dict[str, Any],
           elapsed_s: float) -> SoakResult:
    verdicts = [s.verdict for s in segments]
    anomalies = sum(anomaly_count(v) for s in segments for v in s.anomalies.values())
    faults: dict[str, int] = {}
    for s in segments:
        for name, count in s.faults.items():
            faults[name] = faults.get(name, 0) + count
    if "invalid" in verdicts or not memory["within_bound"]:
        code = runner.EXIT_INVALID
    elif all(v == "valid" for v in verdicts) and segments:
        code = runner.EXIT_VALID
    else:
        code = runner.EXIT_UNKNOWN
    results = {
        "duration_s": options.duration_s, "elapsed_s": round(elapsed_s, 1),
        "net": options.net, "seed": options.seed,
        "segments": [asdict(s) for s in segments],
        "verdicts": {v: verdicts.count(v) for v in sorted(set(verdicts))},
        "anomalies": anomalies, "faults_applied": dict(sorted(faults.items())),
        "memory": memory,
        "files": {"memory_png": "memory.png", "memory_csv": "memory.csv"},
    }
    (options.out_dir / "soak.json").write_text(json.dumps(results, indent=2) + "\n")
    return SoakResult(code, results, options.out_dir)
