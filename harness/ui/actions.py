"""What the page's buttons do to a running local cluster: the same calls the CLI makes.

- Processes (`kraftlab cluster kill|pause|resume|restart`, `kraftlab nemesis start`): the
  launcher's PID-checked signals and start (harness/launcher/cluster.py); a kill or a start
  rewrites cluster.json, as the CLI does. `restart` stops gracefully (SIGTERM: a broker's
  controlled shutdown, a controller's resignation) and starts at once; it does not wait for the
  node to be healthy again: the view shows it coming back.
- Links (`kraftlab nemesis isolate|partition|heal`): one `/nemesis/links` filter per node, built
  from the same grudges as the nemesis (harness/jepsen/nemesis.py); a shape replaces the filters
  in force, cuts are symmetric, nodes named in no group form one more group.
- Produce (`kraftlab produce --acks`): `count` one-record batches to the partition's leader
  through its admin API, one after the other, each waiting for its acks.

Every function is blocking (the server runs it in a worker thread), takes the cluster directory,
and returns a one-line summary for the timeline; a refusal is an `ActionError` with a message a
person can act on. Process actions run one at a time (they rewrite cluster.json).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from harness.admin.client import AdminClient, AdminError
from harness.jepsen.nemesis import grudge_components
from harness.launcher import cluster as cl

PROCESS_ACTIONS = ("kill", "pause", "resume", "restart", "start")
MAX_BURST = 1000
ACKS = ("0", "1", "all")
_process_lock = threading.Lock()


class ActionError(Exception):
    """The action was refused or failed; the message says why."""


def process_action(data_dir: Path, node_id: int, action: str) -> str:
    if action not in PROCESS_ACTIONS:
        raise ActionError(f"unknown action {action!r}; actions are {', '.join(PROCESS_ACTIONS)}")
    with _process_lock:
        cluster = cl.ClusterFile.load(data_dir)
        try:
            node = cluster.node(node_id)
        except cl.ClusterError as exc:
            raise ActionError(str(exc)) from None
        name = f"{node.role} {node.id}"
        running = cl.is_our_process(node.pid, node.config_file)
        match action:
            case "kill":
                if not running:
                    raise ActionError(f"{name} is not running")
                pid = node.pid
                if not cl.stop_node(node, force=True, timeout_s=5.0):
                    raise ActionError(f"{name} (pid {pid}) survived SIGKILL")
                node.pid = None
                cluster.save(data_dir)
                return f"killed {name} (pid {pid}, SIGKILL)"
            case "pause" | "resume":
                sig = signal.SIGSTOP if action == "pause" else signal.SIGCONT
                if not cl.signal_node(node, sig):
                    raise ActionError(f"{name} is not running")
                return f"{action}d {name} (pid {node.pid}, {sig.name})"
            case "restart" | "start":
                if running and action == "start":
                    raise ActionError(f"{name} is already running (pid {node.pid})")
                if running and not cl.stop_node(node, force=False, timeout_s=15.0):
                    raise ActionError(f"{name} did not stop within 15 s; kill it instead")
                node.pid = None
                cl.start_node(cluster, data_dir, node)
                verb = "restarted" if running else "started"
                return f"{verb} {name} (pid {node.pid})"
    raise AssertionError(action)


def set_links(data_dir: Path, groups: Sequence[Sequence[int]] | None) -> str:
    """Cut the cluster into `groups` (plus one group of the unlisted nodes); None heals."""
    cluster = cl.ClusterFile.load(data_dir)
    nodes = [n.id for n in cluster.nodes]
    if groups is None:
        bodies: dict[int, dict[str, Any] | None] = {n: None for n in nodes}
        summary = "healed every node's links"
    else:
        sides = _sides(groups, nodes)
        grudge = grudge_components(nodes, *sides)
        bodies = {n: {"drop": sorted(grudge.get(n, ())), "drop_clients": False} for n in nodes}
        summary = "links cut: " + " | ".join(",".join(map(str, side)) for side in sides)
    failed = []
    for node in cluster.nodes:
        if not cl.is_our_process(node.pid, node.config_file):
            continue  # a node that is down comes back healed: filters live in memory
        body = bodies[node.id]
        client = AdminClient(node.host, node.admin_port, timeout_s=2.0)
        try:
            status, _ = client.request("DELETE" if body is None else "POST", "/nemesis/links",
                                       body)
            if status != 200:
                failed.append(f"{node.id} (HTTP {status})")
        except OSError as exc:
            failed.append(f"{node.id} ({type(exc).__name__})")
        finally:
            client.close()
    if failed:
        raise ActionError(f"{summary}, but not on {', '.join(failed)} (paused or unreachable)")
    return summary


def _sides(groups: Sequence[Sequence[int]], nodes: list[int]) -> list[list[int]]:
    seen: set[int] = set()
    sides = []
    for group in groups:
        side = []
        for node_id in group:
            if node_id not in nodes:
                raise ActionError(f"no node {node_id}; nodes are {sorted(nodes)}")
            if node_id in seen:
                raise ActionError(f"node {node_id} is in two groups")
            seen.add(node_id)
            side.append(node_id)
        if side:
            sides.append(side)
    rest = [n for n in nodes if n not in seen]
    if rest:
        sides.append(rest)
    if len(sides) < 2:
        raise ActionError("a cut needs two groups (or nodes left out of the one given)")
    return sides


def produce_burst(data_dir: Path, topic: str, partition: int, count: int, acks: str) -> str:
    """`count` records, one request each, to the partition leader; a summary of the answers."""
    if acks not in ACKS:
        raise ActionError(f"acks must be one of {', '.join(ACKS)}")
    if not 1 <= count <= MAX_BURST:
        raise ActionError(f"count must be 1..{MAX_BURST}")
    cluster = cl.ClusterFile.load(data_dir)
    leader = _partition_leader(cluster, topic, partition)
    node = cluster.node(leader)
    client = AdminClient(node.host, node.admin_port, timeout_s=35.0)
    path = (f"/topics/{quote(topic, safe='')}/partitions/{partition}/records?acks={acks}"
            f"&timeout_ms=5000")
    offsets: list[int] = []
    errors: dict[str, int] = {}
    try:
        for i in range(count):
            try:
                status, answer = client.request("POST", path,
                                                {"records": [{"value": f"ui-{i}"}]})
            except OSError as exc:
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                break  # the leader is gone: the rest would fail the same way
            if status == 200 and isinstance(answer, dict):
                offsets.append(int(answer.get("base_offset", -1)))
            else:
                name = answer.get("error") if isinstance(answer, dict) else f"HTTP {status}"
                errors[str(name)] = errors.get(str(name), 0) + 1
    finally:
        client.close()
    done = f"produced {len(offsets)}/{count} to {topic}-{partition} (acks={acks}, leader {leader})"
    if offsets and acks != "0":
        done += f", offsets {min(offsets)}-{max(offsets)}"
    if errors:
        done += "; errors: " + ", ".join(f"{k} x{v}" for k, v in sorted(errors.items()))
    return done


def _partition_leader(cluster: cl.ClusterFile, topic: str, partition: int) -> int:
    for node in cluster.controllers + cluster.brokers:
        if not cl.is_our_process(node.pid, node.config_file):
            continue
        client = AdminClient(node.host, node.admin_port, timeout_s=2.0)
        try:
            described = client.get_json(f"/topics/{quote(topic, safe='')}?consistency=local")
        except (AdminError, OSError):
            continue
        finally:
            client.close()
        for p in described.get("partitions", []):
            if p["partition"] == partition:
                if p["leader"] is None:
                    raise ActionError(f"{topic}-{partition} has no leader now")
                return int(p["leader"])
        raise ActionError(f"no partition {partition} in topic {topic}")
    raise ActionError("no node answered: is the cluster up?")
