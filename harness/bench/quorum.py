"""Metadata quorum commit latency and throughput: 3 voters on loopback, fsync on, 100-byte values.

Method: a fresh cluster is started from this process (the same launcher as `kraftlab cluster up`),
the bench waits for an agreed leader, then measures against the LEADER over two client paths
(`--client http|native|both`); a write returns once its record is committed on a majority (fsynced
on each) and applied to the leader's image:
- http: the admin API, `PUT /kv/{key}` with a 100-byte value, HTTP/1.1 keep-alive, one write in
  flight per connection, from harness/bench/http_load.py (a wrk-style Protocol client: answers
  checked, Content-Length framing, no per-request task or session);
- native: KvRequest frames on the leader's RPC port (harness/net/client.py), pipelined.
Phases per path:
- sequential: one client, one write at a time, `--seq-writes` writes after `--warmup`;
  p50/p99/max of the client-observed latency;
- throughput: `--proposers` concurrent writers (HTTP: connections) for `--duration` seconds after
  a warm-up; committed writes per second and p50/p99 latency under that load.
CPU per commit (utime+stime of the node processes / commits) is reported too, and the load
generator's own (this process's CPU / commits): they stay meaningful when other work shares the
machine. The client runs on the same 2 cores as the three controllers, on the nodes' event loop
(uvloop where installed), so its CPU per request is part of the ceiling.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, cast

from harness.bench import profile
from harness.bench.http_load import KvPutLoad, LoadResult
from harness.client import run as client_run
from harness.launcher import cluster as cl
from harness.net.client import KvResponse, NativeKvClient

VALUE = "x" * 100


def cpu_seconds(pid: int | None) -> float:
    """utime + stime of a process (from /proc), to report CPU cost per commit: a figure that
    stays meaningful when other work shares the 2 cores."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cluster_cpu(cluster: cl.ClusterFile) -> dict[int, float]:
    return {n.id: cpu_seconds(n.pid) for n in cluster.nodes}


def cpu_per_commit(before: dict[int, float], after: dict[int, float], leader: int,
                   commits: int) -> dict[str, float]:
    leader_ms = (after[leader] - before[leader]) * 1000 / max(1, commits)
    others = [(after[i] - before[i]) * 1000 / max(1, commits) for i in after if i != leader]
    return {"leader_cpu_ms_per_commit": round(leader_ms, 3),
            "follower_cpu_ms_per_commit": round(sum(others) / max(1, len(others)), 3)}


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency_summary(latencies: list[float]) -> dict[str, Any]:
    return {
        "p50_ms": round(statistics.median(latencies), 3) if latencies else None,
        "p99_ms": round(percentile(latencies, 0.99), 3) if latencies else None,
        "max_ms": round(max(latencies), 3) if latencies else None,
        "mean_ms": round(statistics.fmean(latencies), 3) if latencies else None,
    }


def run_loop(main: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    """The nodes' event loop (uvloop where installed) for the load generator too."""
    return cast(dict[str, Any], client_run(main))


async def http_sequential(node: cl.NodeEntry, writes: int, warmup: int) -> dict[str, Any]:
    load = KvPutLoad(node.host, node.admin_port, VALUE, prefix="seq", keys_per_connection=64)
    await load.connect(1)
    try:
        await load.run(writes=warmup, record=False)
        result = await load.run(writes=writes)
    finally:
        load.close()
    return {"writes": result.commits, **latency_summary(result.latencies_ms),
            "errors": sum(result.errors.values()), "error_kinds": dict(result.errors)}


async def http_concurrent(node: cl.NodeEntry, proposers: int, duration_s: float,
                          meter: CpuMeter) -> dict[str, Any]:
    load = KvPutLoad(node.host, node.admin_port, VALUE)
    await load.connect(proposers)
    try:
        return await warmed_phase(
            lambda seconds, record: load.run(duration_s=seconds, record=record),
            proposers, duration_s, meter)
    finally:
        load.close()


async def warmed_phase(run: Callable[[float, bool], Awaitable[Any]], proposers: int,
                       duration_s: float, meter: CpuMeter) -> dict[str, Any]:
    """A throughput phase of either client path: `run(seconds, record)` drives the load (its
    result has commits, latencies_ms and errors by kind); a warm-up of a fifth of the phase (at
    most 1 s) first, then the measured run with the nodes' and the client's CPU around it."""
    warm = await run(min(1.0, duration_s / 5), False)
    meter.start()
    start = time.perf_counter()
    result = await run(duration_s, True)
    elapsed = time.perf_counter() - start
    cpu = meter.stop(result.commits)
    out = throughput_result(proposers, elapsed, result.latencies_ms,
                            sum(result.errors.values()), warm.commits, cpu)
    out["warmup_errors"] = sum(warm.errors.values())
    out["error_kinds"] = dict(result.errors)
    return out


def throughput_result(proposers: int, elapsed_s: float, latencies: list[float], errors: int,
                      warmup_commits: int, cpu: dict[str, float]) -> dict[str, Any]:
    summary = latency_summary(latencies)
    return {
        "proposers": proposers,
        "duration_s": round(elapsed_s, 2),
        "commits": len(latencies),
        "warmup_commits": warmup_commits,
        "commits_per_s": round(len(latencies) / elapsed_s),
        "p50_ms": summary["p50_ms"],
        "p99_ms": summary["p99_ms"],
        "errors": errors,
        **cpu,
    }


async def native_sequential(node: cl.NodeEntry, cluster_id: str, writes: int,
                            warmup: int) -> dict[str, Any]:
    client = NativeKvClient()
    await client.connect(node.host, node.rpc_port, cluster_id)
    for i in range(warmup):
        await client.call("put", f"warm-{i % 64}", VALUE)
    latencies = []
    for i in range(writes):
        t0 = time.perf_counter()
        await client.call("put", f"seq-{i % 64}", VALUE)
        latencies.append((time.perf_counter() - t0) * 1000)
    client.close()
    return {"writes": writes, **latency_summary(latencies)}


def native_load(client: NativeKvClient, writers: int, duration_s: float,
                record: bool) -> asyncio.Future[LoadResult]:
    """`writers` chains of puts on the client's one pipelined connection for `duration_s`: each
    chain sends its next write from the done callback of its last, as the HTTP load does per
    connection (no coroutine per request). A write counts when answered NONE; other answers are
    counted by error name; a lost connection ends every chain."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[LoadResult] = loop.create_future()
    result = LoadResult()
    stop_at = time.perf_counter() + duration_s
    running = writers

    def finish() -> None:
        nonlocal running
        running -= 1
        if running == 0:
            done.set_result(result)

    def send(w: int, n: int) -> None:
        if time.perf_counter() >= stop_at:
            finish()
            return
        sent_at = time.perf_counter()
        try:
            future = client.submit("put", f"tput-{w}-{n % 16}", VALUE)
        except ConnectionResetError:
            result.errors["connection lost"] += 1
            finish()
            return
        future.add_done_callback(lambda f: answered(w, n, sent_at, f))

    def answered(w: int, n: int, sent_at: float, future: asyncio.Future[KvResponse]) -> None:
        if future.cancelled() or future.exception() is not None:
            result.errors["connection lost"] += 1
            finish()
            return
        response = future.result()
        if response.error != "NONE" or response.version is None:
            result.errors[response.error] += 1
        else:
            result.commits += 1
            if record:
                result.latencies_ms.append((time.perf_counter() - sent_at) * 1000)
        send(w, n + 1)

    for w in range(writers):
        send(w, 0)
    if writers == 0:
        done.set_result(result)
    return done


async def native_concurrent(node: cl.NodeEntry, cluster_id: str, proposers: int,
                            duration_s: float, meter: CpuMeter) -> dict[str, Any]:
    client = NativeKvClient()
    await client.connect(node.host, node.rpc_port, cluster_id)
    try:
        return await warmed_phase(
            lambda seconds, record: native_load(client, proposers, seconds, record=record),
            proposers, duration_s, meter)
    finally:
        client.close()


class CpuMeter:
    """CPU seconds of the three nodes and of this process (the load generator) between `start`
    and `stop`, as ms per commit: the client's share is part of the ceiling on 2 shared cores."""

    def __init__(self, cluster: cl.ClusterFile, leader_id: int) -> None:
        self.cluster = cluster
        self.leader_id = leader_id
        self.nodes0: dict[int, float] = {}
        self.client0 = 0.0

    def start(self) -> None:
        self.nodes0 = cluster_cpu(self.cluster)
        self.client0 = time.process_time()

    def stop(self, commits: int) -> dict[str, float]:
        client_ms = (time.process_time() - self.client0) * 1000 / max(1, commits)
        out = cpu_per_commit(self.nodes0, cluster_cpu(self.cluster), self.leader_id, commits)
        out["client_cpu_ms_per_commit"] = round(client_ms, 3)
        return out


def start_profilers(cluster: cl.ClusterFile, leader_id: int, args: argparse.Namespace,
                    subdir: str) -> profile.Profilers | None:
    """py-spy on every node and on this process (the load generator) for one phase."""
    if not getattr(args, "profile", None):
        return None
    pids = {f"{'leader' if n.id == leader_id else 'follower'}-{n.id}": n.pid
            for n in cluster.nodes if n.pid is not None}
    pids["client"] = os.getpid()
    profilers = profile.start(Path(args.profile) / subdir, pids, args.syscalls)
    time.sleep(0.5)  # let the samplers attach
    return profilers


def measure(cluster: cl.ClusterFile, leader_id: int, path: str,
            args: argparse.Namespace) -> dict[str, Any]:
    """Sequential then concurrent phases over one client path, with CPU per commit (nodes and
    this process); with `args.profile`, py-spy samples both phases (DIR/PATH/sequential,
    DIR/PATH/throughput)."""
    leader = cluster.node(leader_id)
    meter = CpuMeter(cluster, leader_id)
    profilers = start_profilers(cluster, leader_id, args, f"{path}/sequential")
    meter.start()
    if path == "http":
        seq = run_loop(http_sequential(leader, args.seq_writes, args.warmup))
    else:
        seq = run_loop(native_sequential(leader, cluster.cluster_id, args.seq_writes,
                                         args.warmup))
    seq.update(meter.stop(args.seq_writes + args.warmup))
    if profilers is not None:
        profilers.stop()
        seq["profile"] = profile_report(profilers, args.seq_writes + args.warmup, args.json)
    profilers = start_profilers(cluster, leader_id, args, f"{path}/throughput")
    if path == "http":
        tput = run_loop(http_concurrent(leader, args.proposers, args.duration, meter))
    else:
        tput = run_loop(native_concurrent(leader, cluster.cluster_id, args.proposers,
                                          args.duration, meter))
    if profilers is not None:
        profilers.stop()
        tput["profile"] = profile_report(profilers, tput["commits"] + tput["warmup_commits"],
                                         args.json)
    if not args.json:
        print(f"[{path}] sequential: {seq['writes']} writes, p50 {seq['p50_ms']} ms, "
              f"p99 {seq['p99_ms']} ms, max {seq['max_ms']} ms; CPU per commit: leader "
              f"{seq['leader_cpu_ms_per_commit']} ms, follower "
              f"{seq['follower_cpu_ms_per_commit']} ms, client "
              f"{seq['client_cpu_ms_per_commit']} ms", flush=True)
        print(f"[{path}] throughput: {tput['commits_per_s']} commits/s with {tput['proposers']} "
              f"proposers (p50 {tput['p50_ms']} ms, p99 {tput['p99_ms']} ms, "
              f"{tput['errors']} errors); CPU per commit: leader "
              f"{tput['leader_cpu_ms_per_commit']} ms, follower "
              f"{tput['follower_cpu_ms_per_commit']} ms, client "
              f"{tput['client_cpu_ms_per_commit']} ms", flush=True)
    return {"sequential": seq, "throughput": tput}


def profile_report(profilers: profile.Profilers, commits: int, quiet: bool) -> dict[str, Any]:
    """Per node: CPU ms per commit by function (py-spy) and system calls per commit (strace)."""
    report: dict[str, Any] = {"dir": str(profilers.out_dir)}
    for name, path in profilers.files.items():
        node, kind = name.rsplit(".", 1)
        entry = report.setdefault(node, {})
        if kind == "pyspy":
            entry["cpu_ms_per_commit"] = profile.summarize(path, commits)
        else:
            entry["syscalls_per_commit"] = profile.syscall_counts(path, commits)
    if not quiet:
        for node, entry in report.items():
            if node == "dir":
                continue
            print(f"  profile {node}:")
            for fn, ms in entry.get("cpu_ms_per_commit", {}).get("self", [])[:12]:
                print(f"    {ms:7.4f} ms/commit  {fn}")
            if entry.get("syscalls_per_commit"):
                print(f"    syscalls/commit: {entry['syscalls_per_commit']}")
    return report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--controllers", type=int, default=3)
    parser.add_argument("--seq-writes", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--proposers", type=int, default=64)
    parser.add_argument("--duration", type=float, default=5.0, help="throughput phase, seconds")
    parser.add_argument("--client", choices=["http", "native", "both"], default="both",
                        help="client path: admin HTTP API, native RPC frames, or both (default)")
    parser.add_argument("--data-dir", help="fresh cluster directory (default: a temp dir)")
    parser.add_argument("--config", action="append", metavar="KEY=VALUE",
                        help="node config override (e.g. kraftlab.log.fsync=0)")
    parser.add_argument("--profile", metavar="DIR",
                        help="py-spy every node during the sequential phase (raw stacks in DIR, "
                             "CPU ms per commit by function printed; harness/bench/profile.py)")
    parser.add_argument("--syscalls", action="store_true",
                        help="with --profile: strace -c the nodes too (system calls per commit; "
                             "slows them, so the phase's latencies are not meaningful then)")


def run(args: argparse.Namespace) -> int:
    base = Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="kraftlab-bench-"))
    overrides = cl.parse_overrides(args.config)
    cluster = cl.create_cluster(base, args.controllers, overrides)
    base = base.resolve()
    try:
        for node in cluster.nodes:
            cl.start_node(cluster, base, node)
        leader_id = cl.wait_for_leader(cluster, [n.id for n in cluster.nodes], 30)
        paths = ["http", "native"] if args.client == "both" else [args.client]
        results = {path: measure(cluster, leader_id, path, args) for path in paths}
    finally:
        for node in cluster.nodes:
            cl.stop_node(node, force=True, timeout_s=5)
            node.pid = None
        cluster.save(base)
    result = {
        "bench": "quorum",
        "controllers": args.controllers,
        "fsync": overrides.get("kraftlab.log.fsync", "1") != "0",
        "value_bytes": len(VALUE),
        "client_paths": {
            "http": "admin HTTP API (PUT /kv/{key}) to the leader, keep-alive",
            "native": "msgpack frames on the leader's RPC port, pipelined on one connection",
        },
        **results,
    }
    if args.json:
        print(json.dumps(result))
    return 0
