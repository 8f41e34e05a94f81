"""The speed table in one run: our figures beside the machine's floors (and the peers' figures).

Sections, measured one after another (never in parallel: the machine has 2 cores):
- floors: append + fsync of 100 B (a growing file, as our logs), a preallocated file +
  fdatasync (as etcd's and ZooKeeper's WALs), and the loopback round trip of 100 B between two
  asyncio processes: what one sequential commit cannot go below;
- quorum: one fresh 3-controller cluster (harness/bench/quorum.py's phases): sequential commits
  native and HTTP (p50 / p99), the leader's CPU per sequential commit, commits/s with
  `--proposers` in flight on both paths, and the elections seen during all of it (there should be
  none);
- failover: `--fault pause` (SIGSTOP of the leader) on another fresh cluster, median of trials
  (harness/bench/failover.py);
- steady (with `--steady-s`): a loaded run of that many seconds at `--proposers` in flight,
  counting elections (the hung-leader probe must not ring falsely);
- produce: RF 3, acks=all, 100 B records, 1 partition, the native client and librdkafka through
  the Kafka listener, each on a fresh cluster (harness/bench/produce.py);
- append: the log's append against a raw write of the same bytes (harness/bench/log.py);
- kafka: kraftlab beside Apache Kafka itself (the peer kit, docs/kafka-peer.md), same shape,
  same client, same faults: produce acks=all/1, latency, consume, topic-create commit time,
  controller and partition leader failover (harness/bench/versus_kafka.py);
- further sections registered with `register_section`.

With `--peers DIR` the peers' own runner (`DIR/run_all.sh`: etcd, ZooKeeper, pysyncobj and their
floors, installed by `DIR/setup.sh`) runs afterwards and its results fill the peers' column; the
project does not ship or depend on those scripts. The load average is printed at the start and
the end: every figure here depends on it (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.bench import failover, quorum, versus_kafka
from harness.bench import log as log_bench
from harness.bench import produce as produce_bench
from harness.launcher import cluster as cl
from harness.net.client import ClientError, NativeKvClient

FLOOR_SAMPLES = 1000
RTT_SAMPLES = 5000
PAYLOAD = b"x" * 100


@dataclass(frozen=True, slots=True)
class Figure:
    """One row: what it is, our value, the peers' value in the same run, the aim."""

    key: str  # stable id (JSON, peers' lookup)
    label: str
    ours: str
    aim: str = ""
    peers: str = ""


@dataclass
class Run:
    args: argparse.Namespace
    figures: list[Figure] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)

    def say(self, text: str) -> None:
        if not self.args.json:
            print(text, flush=True)


Section = Callable[[Run], None]
SECTIONS: list[tuple[str, Section]] = []


def register_section(name: str, fn: Section) -> None:
    """Add a section (in registration order); e.g. the produce rows of the data plane."""
    SECTIONS.append((name, fn))


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50": round(statistics.median(ordered) * 1000, 3),
            "p99": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000, 3)}


# --- floors ----------------------------------------------------------------------------------

def fsync_floor(directory: Path, samples: int) -> dict[str, dict[str, float]]:
    """100 B appends + fsync to a growing file, and overwrites of a preallocated one + fdatasync,
    taking turns sample by sample so both see the same disk."""
    grow = os.open(directory / "grow.dat", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    pre = os.open(directory / "prealloc.dat", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(pre, 0, (samples + 64) * len(PAYLOAD))
        os.fsync(pre)
        a: list[float] = []
        b: list[float] = []
        for i in range(samples + 10):
            t0 = time.perf_counter()
            os.write(grow, PAYLOAD)
            os.fsync(grow)
            t1 = time.perf_counter()
            os.pwrite(pre, PAYLOAD, i * len(PAYLOAD))
            os.fdatasync(pre)
            t2 = time.perf_counter()
            if i >= 10:
                a.append(t1 - t0)
                b.append(t2 - t1)
    finally:
        os.close(grow)
        os.close(pre)
    return {"append_fsync": _ms(a), "prealloc_fdatasync": _ms(b)}


_ECHO = """
import asyncio, sys
async def echo(r, w):
    try:
        while True:
            w.write(await r.readexactly(100))
    except (asyncio.IncompleteReadError, ConnectionError):
        w.close()
async def main():
    srv = await asyncio.start_server(echo, "127.0.0.1", 0)
    print(srv.sockets[0].getsockname()[1], flush=True)
    await asyncio.sleep(120)  # bounded life even if the parent dies
asyncio.run(main())
"""


def loopback_rtt(samples: int) -> dict[str, float]:
    """asyncio ping-pong of 100 B with an echo server in another process (as the peers' floor)."""
    server = subprocess.Popen([sys.executable, "-c", _ECHO], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())

        async def pingpong() -> list[float]:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            out = []
            for i in range(samples + 200):
                t0 = time.perf_counter()
                writer.write(PAYLOAD)
                await reader.readexactly(len(PAYLOAD))
                if i >= 200:
                    out.append(time.perf_counter() - t0)
            writer.close()
            return out

        return _ms(asyncio.run(pingpong()))
    finally:
        server.kill()  # the process we started, by its handle
        server.wait()


def floors(run: Run) -> None:
    with tempfile.TemporaryDirectory(prefix="kraftlab-floor-", dir=run.args.data_dir) as d:
        disk = fsync_floor(Path(d), run.args.floor_samples)
    rtt = loopback_rtt(RTT_SAMPLES)
    run.raw["floors"] = {"fsync_100B_ms": disk, "loopback_rtt_100B_ms": rtt}
    a, b = disk["append_fsync"], disk["prealloc_fdatasync"]
    run.figures += [
        Figure("floor_fsync", "floor: append + fsync, 100 B, p50 / p99",
               f"{a['p50']:.2f} / {a['p99']:.2f} ms"),
        Figure("floor_fdatasync", "floor: preallocated + fdatasync, 100 B, p50 / p99",
               f"{b['p50']:.2f} / {b['p99']:.2f} ms"),
        Figure("floor_rtt", "floor: loopback round trip, asyncio, 100 B, p50 / p99",
               f"{rtt['p50']:.2f} / {rtt['p99']:.2f} ms"),
    ]
    run.say(f"[floors] {json.dumps(run.raw['floors'])}")


# --- the metadata quorum -------------------------------------------------------------------------

def _fresh_cluster(run: Run, name: str) -> tuple[cl.ClusterFile, Path]:
    parent = Path(run.args.data_dir) if run.args.data_dir else None
    base = Path(tempfile.mkdtemp(prefix=f"kraftlab-table-{name}-", dir=parent)).resolve()
    cluster = cl.create_cluster(base, 3, cl.parse_overrides(run.args.config))
    for node in cluster.nodes:
        cl.start_node(cluster, base, node)
    cl.wait_for_leader(cluster, [n.id for n in cluster.nodes], 30)
    return cluster, base


def _stop(cluster: cl.ClusterFile, base: Path) -> None:
    for node in cluster.nodes:
        if node.pid is not None:
            cl.signal_node(node, signal.SIGCONT)  # a paused node must die too
        cl.stop_node(node, force=True, timeout_s=5)
        node.pid = None
    cluster.save(base)


def _epochs(cluster: cl.ClusterFile) -> dict[int, int | None]:
    views = cl.quorum_view(cluster)
    return {i: (v or {}).get("leader_epoch") for i, v in views.items()}


def metadata_quorum(run: Run) -> None:
    args = run.args
    cluster, base = _fresh_cluster(run, "quorum")
    try:
        leader_id = cl.wait_for_leader(cluster, [n.id for n in cluster.nodes], 30)
        before = _epochs(cluster)
        phases = argparse.Namespace(seq_writes=args.seq_writes, warmup=args.warmup,
                                    proposers=args.proposers, duration=args.duration,
                                    json=True, profile=None, syscalls=False)  # fmt: skip
        results = {path: quorum.measure(cluster, leader_id, path, phases)
                   for path in ("native", "http")}  # fmt: skip
        after = _epochs(cluster)
    finally:
        _stop(cluster, base)
    epochs = {e for e in (*before.values(), *after.values()) if e is not None}
    elections = max(epochs) - min(epochs) if epochs else None
    run.raw["quorum"] = {**results, "epochs_before": before, "epochs_after": after,
                         "elections": elections}  # fmt: skip
    n, h = results["native"], results["http"]
    ns, hs = n["sequential"], h["sequential"]
    run.figures += [
        Figure("seq", "metadata commit, 1 writer, 100 B, p50 / p99",
               f"native {ns['p50_ms']:.2f} / {ns['p99_ms']:.2f} ms, "
               f"HTTP {hs['p50_ms']:.2f} / {hs['p99_ms']:.2f} ms",
               "p50 < 1.0 ms, p99 < 3 ms (native); HTTP within 0.3 ms of native"),
        Figure("leader_cpu", "leader CPU per sequential commit (native)",
               f"{ns['leader_cpu_ms_per_commit']:.3f} ms (followers "
               f"{ns['follower_cpu_ms_per_commit']:.3f})", "< 0.3 ms"),
        Figure("tput", f"commits/s, {args.proposers} in flight",
               f"native {n['throughput']['commits_per_s']:,}, "
               f"HTTP {h['throughput']['commits_per_s']:,}", "native > 15,000, HTTP > 6,000"),
        Figure("elections_quorum", "elections during the quorum phases", str(elections), "0"),
    ]
    run.say(f"[quorum] {json.dumps(run.raw['quorum'])}")


def failover_pause(run: Run) -> None:
    cluster, base = _fresh_cluster(run, "failover")
    samples = []
    try:
        for trial in range(run.args.failover_trials):
            sample = failover.measure_one_failover(cluster, base, f"table-{trial}", "pause")
            samples.append(sample.elapsed_ms)
            cl.signal_node(cluster.node(sample.killed), signal.SIGCONT)
            cl.wait_for_leader(cluster, [n.id for n in cluster.nodes], 30)
    finally:
        _stop(cluster, base)
    run.raw["failover_pause_ms"] = [round(s, 1) for s in samples]
    run.figures.append(Figure(
        "failover", "failover after SIGSTOP of the leader, median (trials)",
        f"{statistics.median(samples):.0f} ms ({', '.join(f'{s:.0f}' for s in samples)})",
        "< 0.5 s median, no spurious election in a loaded run"))
    run.say(f"[failover] pause: {run.raw['failover_pause_ms']}")


@dataclass
class _Leader:
    """The connection the loaded run's writers share, and the node it goes to."""

    client: NativeKvClient
    node_id: int


async def loaded(cluster: cl.ClusterFile, node: cl.NodeEntry, proposers: int,
                 duration_s: float) -> dict[str, Any]:
    """`proposers` native writers for `duration_s`, following the leader: an answer other than
    success (an election moved the leader) is counted, and the writers move to the node the
    answer names (or wait a little when it names none)."""
    state = _Leader(NativeKvClient(), node.id)
    await state.client.connect(node.host, node.rpc_port, cluster.cluster_id)
    counts = {"commits": 0, "errors": 0, "reconnects": 0}
    moving = asyncio.Lock()
    stop = time.perf_counter() + duration_s

    async def follow(hint: int | None, seen: NativeKvClient) -> None:
        async with moving:
            if state.client is not seen or hint is None or hint == state.node_id:
                return  # another writer moved already, or nowhere to go
            target = cluster.node(hint)
            fresh = NativeKvClient()
            await fresh.connect(target.host, target.rpc_port, cluster.cluster_id)
            seen.close()
            state.client, state.node_id = fresh, hint
            counts["reconnects"] += 1

    async def writer(w: int) -> None:
        n = 0
        while time.perf_counter() < stop:
            client = state.client
            try:
                await client.call("put", f"steady-{w}-{n % 16}", quorum.VALUE)
                counts["commits"] += 1
            except ClientError as exc:
                counts["errors"] += 1
                await follow(exc.response.leader_id, client)
                await asyncio.sleep(0.01)  # back off while there is no leader
            except (ConnectionResetError, OSError):
                counts["errors"] += 1
                await asyncio.sleep(0.01)
            n += 1

    start = time.perf_counter()
    await asyncio.gather(*(writer(w) for w in range(proposers)))
    elapsed = time.perf_counter() - start
    state.client.close()
    return {**counts, "duration_s": round(elapsed, 1),
            "commits_per_s": round(counts["commits"] / elapsed)}


def steady(run: Run) -> None:
    """A loaded run of --steady-s seconds: commits/s and the elections it saw."""
    if run.args.steady_s <= 0:
        return
    cluster, base = _fresh_cluster(run, "steady")
    try:
        leader_id = cl.wait_for_leader(cluster, [n.id for n in cluster.nodes], 30)
        before = _epochs(cluster)
        leader = cluster.node(leader_id)
        result = asyncio.run(loaded(cluster, leader, run.args.proposers, run.args.steady_s))
        after = _epochs(cluster)
    finally:
        _stop(cluster, base)
    epochs = {e for e in (*before.values(), *after.values()) if e is not None}
    elections = max(epochs) - min(epochs) if epochs else None
    run.raw["steady"] = {**result, "elections": elections}
    run.figures.append(Figure(
        "steady", f"loaded run, {run.args.steady_s:.0f} s at {run.args.proposers} in flight",
        f"{elections} elections, {result['commits']:,} commits "
        f"({result['commits_per_s']:,}/s), {result['errors']} errors", "0 elections"))
    run.say(f"[steady] {json.dumps(run.raw['steady'])}")


def data_plane(run: Run) -> None:
    """Produce, RF 3, acks=all, 100 B records, 1 partition: the native client and librdkafka
    (confluent-kafka) through the Kafka listener, each on a fresh 1-controller + 3-broker
    cluster (harness/bench/produce.py `measure`)."""
    records = run.args.produce_records
    rows: dict[str, Any] = {}
    for client in ("native", "confluent-kafka"):
        run.say(f"[produce] {client}: {records:,} records, RF 3, acks=all")
        rows[client] = produce_bench.measure(client, records=records, acks="all")
    run.raw["produce"] = rows
    run.figures.append(Figure(
        "produce", "produce, RF 3, acks=all, 100 B records, 1 partition",
        f"native client {rows['native']['records_per_s']:,} records/s; confluent-kafka "
        f"(librdkafka) through the Kafka listener {rows['confluent-kafka']['records_per_s']:,}",
        "librdkafka >= 600k records/s, native >= 500k"))
    run.say(f"[produce] {json.dumps(rows)}")


def log_append(run: Run) -> None:
    """Log append against a raw write of the same bytes (harness/bench/log.py `measure_append`),
    1,000-record and 1-record batches."""
    rows = {n: log_bench.measure_append(n) for n in (1000, 1)}
    run.raw["append"] = rows
    run.figures.append(Figure(
        "append", "log append / raw write of the same bytes, 1,000-record batches",
        f"{rows[1000]['append_to_raw_ratio']:.2f} (1-record batches "
        f"{rows[1]['append_to_raw_ratio']:.2f}); in CPU time "
        f"{rows[1000]['append_to_raw_ratio_cpu']:.2f} ({rows[1]['append_to_raw_ratio_cpu']:.2f})",
        ">= 0.85 (1-record batches >= 0.3)"))
    run.say(f"[append] {json.dumps(rows)}")


register_section("floors", floors)
register_section("quorum", metadata_quorum)
register_section("failover", failover_pause)
register_section("steady", steady)
register_section("produce", data_plane)
register_section("append", log_append)


def kafka_side_by_side(run: Run) -> None:
    """kraftlab and Apache Kafka (the peer kit) of the same shape, one after the other, every
    figure of harness/bench/versus_kafka.py on each; the same `--config` on both."""
    args = run.args
    overrides = cl.parse_overrides(args.config)
    results = {}
    for name, system in (("kraftlab", versus_kafka.kraftlab_system),
                         ("apache-kafka", versus_kafka.kafka_system)):
        run.say(f"[kafka] {name}: 3 controllers + 3 brokers")
        with system(overrides) as s:
            results[name] = versus_kafka.measure(
                s, records=args.kafka_records, latency_samples=args.kafka_latency_samples,
                create_samples=args.kafka_creates, trials=args.kafka_trials, say=run.say)
    run.raw["kafka"] = results
    run.figures += [Figure(key, label, ours, "", "") for key, label, ours in
                    versus_kafka.rows(results["kraftlab"], results["apache-kafka"])]
    run.say(f"[kafka] {json.dumps(results)}")


register_section("kafka", kafka_side_by_side)


# --- the peers ---------------------------------------------------------------------------------

def _lat(d: dict[str, Any] | None) -> str:
    return f"{d['p50']:.2f} / {d['p99']:.2f}" if d and d.get("n") else "-"


def _at(entries: list[dict[str, Any]], key: str, inflight: int) -> str:
    found = [e for e in entries if e.get(key) == inflight]
    return f"{found[0]['writes_per_s']:,.0f}" if found else "-"


def peer_cells(results: dict[str, Any]) -> dict[str, str]:
    """The peers' figures by row key, from the JSON files of their runner (by file stem)."""
    etcd, zk = results.get("etcd", {}), results.get("zookeeper", {})
    pso = results.get("pysyncobj_nobatch", {})
    cells = {
        "seq": "; ".join(filter(None, [
            etcd and f"etcd {_lat(etcd['seq_put_ms']['grpc_to_leader'])}",
            zk and f"ZooKeeper {_lat(zk['seq_ms']['to_leader']['set'])}",
            pso and f"pysyncobj (no fsync) {_lat(pso['seq_ms']['on_leader'])}"])),
        "tput": "; ".join(filter(None, [
            etcd and f"etcd {_at(etcd.get('tput_grpc_aio_to_leader', []), 'clients', 64)}",
            zk and f"ZooKeeper {_at(zk.get('tput_kazoo_async', []), 'outstanding', 64)}",
            pso and f"pysyncobj {_at(pso.get('tput_on_leader', []), 'inflight', 64)}"])),
        "failover": "; ".join(
            f"{name} (kill) {median:.0f} ms"
            for name, r in (("etcd", etcd), ("ZooKeeper", zk), ("pysyncobj", pso))
            if (median := (r.get("failover") or {}).get("median_first_ok_after_kill_ms")) is not None),
    }
    for name in ("baseline_1_start", "baseline_2_end"):
        base = results.get(name)
        if base:
            fs, rtt = base["fsync_100B_ms"], base["loopback_rtt_100B_ms"]
            tag = "start" if name.endswith("start") else "end"
            cells["floor_fsync"] = cells.get("floor_fsync", "") + f" {tag} {_lat(fs['append_fsync'])}"
            cells["floor_fdatasync"] = (cells.get("floor_fdatasync", "")
                                        + f" {tag} {_lat(fs['prealloc_fdatasync'])}")  # fmt: skip
            cells["floor_rtt"] = (cells.get("floor_rtt", "")
                                  + f" {tag} {_lat(rtt['asyncio_client_asyncio_server'])}")  # fmt: skip
    return {key: value.strip() for key, value in cells.items()}


def peers(run: Run) -> None:
    """Run DIR/run_all.sh (their own venv and tools) and put its figures beside ours."""
    directory = Path(run.args.peers)
    out = Path(tempfile.mkdtemp(prefix="kraftlab-peers-"))
    env = {**os.environ, "RESULTS_DIR": str(out)}
    if run.args.peers_quick:
        env["QUICK"] = "1"
    run.say(f"[peers] bash {directory / 'run_all.sh'} (results in {out})")
    done = subprocess.run(["bash", str(directory / "run_all.sh")], env=env, cwd=directory,
                          capture_output=True, text=True, check=False)  # fmt: skip
    results = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    run.raw["peers"] = {"returncode": done.returncode, "results": results,
                        "stderr_tail": done.stderr[-2000:]}  # fmt: skip
    if not results:
        run.say(f"[peers] no results (exit {done.returncode}): {done.stderr[-500:]}")
        return
    cells = peer_cells(results)
    run.figures = [Figure(f.key, f.label, f.ours, f.aim, cells.get(f.key, "").strip())
                   for f in run.figures]  # fmt: skip


# --- the verb ----------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seq-writes", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--proposers", type=int, default=64)
    parser.add_argument("--duration", type=float, default=5.0, help="each throughput phase, s")
    parser.add_argument("--failover-trials", type=int, default=5)
    parser.add_argument("--steady-s", type=float, default=0.0,
                        help="also a loaded run of this many seconds, counting elections")
    parser.add_argument("--floor-samples", type=int, default=FLOOR_SAMPLES)
    parser.add_argument("--produce-records", type=int, default=300_000,
                        help="records per produce run (default 300,000)")
    parser.add_argument("--kafka-records", type=int, default=300_000,
                        help="kafka section: records per produce run (default 300,000)")
    parser.add_argument("--kafka-latency-samples", type=int, default=1000)
    parser.add_argument("--kafka-creates", type=int, default=50)
    parser.add_argument("--kafka-trials", type=int, default=3, help="kafka section: trials of "
                        "each fault")
    parser.add_argument("--only", help="comma-separated sections (default all): "
                        + ",".join(name for name, _ in SECTIONS))
    parser.add_argument("--peers", metavar="DIR",
                        help="the peers' benchmark scripts (run_all.sh): run them afterwards")
    parser.add_argument("--peers-quick", action="store_true", help="QUICK=1 for the peers")
    parser.add_argument("--data-dir", help="parent directory for the clusters (default: temp)")
    parser.add_argument("--config", action="append", metavar="KEY=VALUE",
                        help="node config override for every cluster")


def markdown(figures: list[Figure], with_peers: bool) -> str:
    head = "| figure | kraftlab | peers, same run | aim |" if with_peers else "| figure | kraftlab | aim |"
    lines = [head, "|---|---|---|---|" if with_peers else "|---|---|---|"]
    for f in figures:
        cells = [f.label, f.ours, *([f.peers or "-"] if with_peers else []), f.aim]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    wanted = set(args.only.split(",")) if args.only else None
    table = Run(args)
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    load_start = os.getloadavg()
    for name, section in SECTIONS:
        if wanted is None or name in wanted:
            section(table)
    if args.peers:
        peers(table)
    load_end = os.getloadavg()
    meta = {
        "started": started,
        "ended": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "load_average_start": [round(x, 2) for x in load_start],
        "load_average_end": [round(x, 2) for x in load_end],
        "cpus": os.cpu_count(),
        "machine": platform.platform(),
        "command": "kraftlab bench table " + " ".join(shlex.quote(a) for a in sys.argv[3:]),
    }
    if args.json:
        figures = [vars_of(f) for f in table.figures]
        print(json.dumps({"bench": "table", **meta, "figures": figures, "raw": table.raw}))
        return 0
    print()
    print(markdown(table.figures, bool(args.peers)))
    print()
    print(f"{meta['command']}: {started} to {meta['ended']}, {meta['cpus']} CPUs, load average "
          f"{meta['load_average_start']} at the start, {meta['load_average_end']} at the end")
    return 0


def vars_of(figure: Figure) -> dict[str, str]:
    return {"key": figure.key, "label": figure.label, "ours": figure.ours, "aim": figure.aim,
            "peers": figure.peers}
