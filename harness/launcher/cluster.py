"""Minimal local launcher: controller and broker processes on 127.0.0.1 and the `cluster.json`
state file. Controllers are ids 1..C (the Raft voters); brokers are ids 101.. (Raft observers that
register with the active controller, KIP-631).

`cluster.json` (docs/api.md) is the one source of truth about a local cluster: its id, and per node
the ports, PID, data dir and log file. It is rewritten atomically whenever a PID changes, so a
reader never sees half a file. Processes are started detached (`start_new_session=True`) and
outlive the command that started them; they are only ever signalled by their recorded PID, and only
after checking that the PID still runs *our* node (its command line names its config file), so a
recycled PID is never killed.

Configuration: cluster-wide overrides go into every node's properties file, per-node overrides
(`broker.101.rack=a`, validated by harness/cli/config.py) into that node's file only; both are
recorded in cluster.json (`overrides`, and `overrides` per node) so `kraftlab config show` can say
where each effective value came from. `kraftlab.bind.host` (default 127.0.0.1) is the address
every listener binds.

Security: `create_cluster` writes a fresh admin bearer token to DIR/admin-token with 0600
permissions (created with that mode, never world-readable even briefly); node configs name the
file, not the token. `ClusterFile.load` registers the token with harness/admin/client.py for every
node's admin address, so every client built from cluster.json sends it without being told.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from harness.admin.client import AdminClient, AdminError, register_token
from harness.runtime.config import LOOPBACK_HOST, Endpoint, NodeConfig, validate_overrides

DEFAULT_DATA_DIR = "./kraftlab-data"
HOST = LOOPBACK_HOST
# Launcher settings (not node properties): the address every listener of every node binds.
BIND_HOST_KEY = "kraftlab.bind.host"
LAUNCHER_KEYS: dict[str, str] = {BIND_HOST_KEY: HOST}
TOKEN_FILE = "admin-token"
T = TypeVar("T")


class ClusterError(RuntimeError):
    """A cluster operation could not be done (message says why and what to do)."""


def default_data_dir() -> Path:
    return Path(os.environ.get("KRAFTLAB_DATA_DIR", DEFAULT_DATA_DIR))


def random_cluster_id() -> str:
    """A Kafka-style cluster id: a random UUID in URL-safe base64 without padding, never one
    that starts with '-' (1 in 64 would): a command line reads it as an option (kafka-storage
    format --cluster-id -X... answers with its usage), which is why Kafka's own
    Uuid.randomUuid (clients/src/main/java/org/apache/kafka/common/Uuid.java) draws again."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def free_ports(count: int, host: str = HOST) -> list[int]:
    """Ports the kernel reports free on `host` (all sockets held open until all are chosen)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class NodeEntry:
    id: int
    role: str
    host: str
    rpc_port: int
    admin_port: int
    pid: int | None
    data_dir: str
    log_file: str
    config_file: str = ""
    # The broker's Kafka wire-protocol listener (harness/kafka); None for controllers.
    kafka_port: int | None = None
    # This node's own overrides (`--config broker.101.rack=a` -> {"broker.rack": "a"}).
    overrides: dict[str, str] = field(default_factory=dict)
    # A controller of `cluster up` (in every node's controller.quorum.voters, the bootstrap
    # voter set), or one added later by `kraftlab quorum add-controller` (KIP-853): that one
    # starts as an observer with its own listener, and joins the voters through the log.
    bootstrap_voter: bool = True
    # The network namespace the node runs in (harness/launcher/netns.py); None: the machine's.
    netns: str | None = None

    @property
    def admin_url(self) -> str:
        return f"http://{self.host}:{self.admin_port}"


@dataclass
class ClusterFile:
    cluster_id: str
    nodes: list[NodeEntry] = field(default_factory=list)
    # Cluster-wide `--config` overrides given at `cluster up` (launcher keys included).
    overrides: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def path_in(data_dir: Path) -> Path:
        return data_dir / "cluster.json"

    @staticmethod
    def token_path(data_dir: Path) -> Path:
        return data_dir / TOKEN_FILE

    @classmethod
    def load(cls, data_dir: Path) -> ClusterFile:
        path = cls.path_in(data_dir)
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            raise ClusterError(
                f"no cluster in {data_dir} ({path} not found); start one with `kraftlab cluster up`"
            ) from None
        cluster = cls(doc["cluster_id"], [NodeEntry(**n) for n in doc["nodes"]],
                      doc.get("overrides", {}))
        token = read_token(data_dir)
        if token is not None:
            for node in cluster.nodes:
                register_token(node.host, node.admin_port, token)
        return cluster

    def save(self, data_dir: Path) -> None:
        write_state(self.path_in(data_dir), asdict(self))

    def node(self, node_id: int) -> NodeEntry:
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise ClusterError(f"no node {node_id}; nodes are {[n.id for n in self.nodes]}")

    def clients(self, timeout_s: float = 2.0) -> dict[int, AdminClient]:
        return {n.id: AdminClient(n.host, n.admin_port, timeout_s) for n in self.nodes}

    @property
    def controllers(self) -> list[NodeEntry]:
        return [n for n in self.nodes if n.role == "controller"]

    @property
    def brokers(self) -> list[NodeEntry]:
        return [n for n in self.nodes if n.role == "broker"]


def write_token(data_dir: Path) -> Path:
    """A fresh admin bearer token in DIR/admin-token, mode 0600 from creation on."""
    path = ClusterFile.token_path(data_dir)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_urlsafe(32) + "\n")
    return path


def read_token(data_dir: Path) -> str | None:
    try:
        return ClusterFile.token_path(data_dir).read_text().strip() or None
    except (FileNotFoundError, NotADirectoryError):
        return None


def write_state(path: Path, doc: dict[str, Any]) -> None:
    """Replace a state file (cluster.json, the Kafka peer's peer.json) atomically: a reader
    sees the old document or the new one, never half of one."""
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, path)


def is_our_process(pid: int | None, config_file: str, program: bytes = b"harness.node") -> bool:
    """True iff `pid` is alive (not a zombie) and runs `program` (a kraftlab node; the Kafka peer
    kit passes Kafka's main class) with this config file."""
    if not pid:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    if state in ("Z", "X"):
        return False
    return program in cmdline and config_file.encode() in cmdline


# Popen objects of nodes started by this process, so they are reaped (no zombies) when killed.
_children: dict[int, subprocess.Popen[bytes]] = {}


def spawn_node(node: NodeEntry) -> int:
    """Start one node process detached from this one; returns its PID."""
    log = open(node.log_file, "ab")  # noqa: SIM115 - handed to the child
    try:
        # `ip netns exec` execs the node in place: the PID and command line stay the node's.
        prefix = ["ip", "netns", "exec", node.netns] if node.netns else []
        proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "harness.node", "--config", node.config_file],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            cwd=node.data_dir,
        )
    finally:
        log.close()
    _children[proc.pid] = proc
    return proc.pid


def reap(pid: int) -> None:
    proc = _children.get(pid)
    if proc is not None and proc.poll() is not None:
        del _children[pid]


def signal_node(node: NodeEntry, sig: signal.Signals) -> bool:
    """Send `sig` to the node's recorded PID if it is still our node. False if not running."""
    if not is_our_process(node.pid, node.config_file):
        return False
    assert node.pid is not None
    os.kill(node.pid, sig)
    return True


def wait_dead(node: NodeEntry, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if node.pid is not None:
            reap(node.pid)
        if not is_our_process(node.pid, node.config_file):
            return True
        time.sleep(0.01)
    return False


def write_node_config(
    node: NodeEntry, cluster: ClusterFile, overrides: dict[str, str], token_file: Path | None = None
) -> None:
    """The node's properties: the layout, then cluster-wide overrides, then its own (last wins)."""
    is_broker = node.role == "broker"
    own_listener = is_broker or not node.bootstrap_voter
    config = NodeConfig(
        node_id=node.id,
        cluster_id=cluster.cluster_id,
        voters={n.id: Endpoint(n.host, n.rpc_port) for n in cluster.controllers
                if n.bootstrap_voter},
        admin_listeners={n.id: Endpoint(n.host, n.admin_port) for n in cluster.nodes},
        metadata_log_dir=Path(node.data_dir),
        process_roles=node.role,
        listener=Endpoint(node.host, node.rpc_port) if own_listener else None,
        kafka_listener=(Endpoint(node.host, node.kafka_port)
                        if is_broker and node.kafka_port else None),
        admin_token_file=token_file,
    )
    text = config.to_properties()
    merged = {k: v for k, v in overrides.items() if k not in LAUNCHER_KEYS}
    merged.update(node.overrides)
    for key, value in merged.items():
        text = "\n".join(
            line for line in text.splitlines() if not line.startswith(key + "=")
        ) + f"\n{key}={value}\n"
    Path(node.config_file).write_text(text)


FIRST_BROKER_ID = 101


def layout_of(controllers: int, brokers: int) -> list[tuple[int, str]]:
    """(node id, role) of every node a `cluster up` lays out: controllers 1.., brokers 101.."""
    return [(i + 1, "controller") for i in range(controllers)] + [
        (FIRST_BROKER_ID + i, "broker") for i in range(brokers)]


def create_cluster(
    data_dir: Path, controllers: int, overrides: dict[str, str], brokers: int = 0,
    *, node_overrides: dict[int, dict[str, str]] | None = None,
    hosts: dict[int, str] | None = None, netns: dict[int, str] | None = None,
) -> ClusterFile:
    """Lay out a new cluster (ids, ports, dirs, configs, admin token) without starting anything.
    `overrides` are cluster-wide (node keys and launcher keys); `node_overrides` node id ->
    properties for that node only (validated by harness/cli/config.py `plan_overrides`).
    `hosts` and `netns`: per node, the address it binds and the network namespace it runs in
    (harness/launcher/netns.py lays them out); ports are then drawn on loopback, only to be
    distinct, as every node has its own network stack."""
    if controllers < 1:
        raise ClusterError("--controllers must be at least 1")
    if not 0 <= brokers <= 99:
        raise ClusterError("--brokers must be between 0 and 99")
    validate_overrides({k: v for k, v in overrides.items() if k not in LAUNCHER_KEYS})
    layout = layout_of(controllers, brokers)
    unknown = sorted(set(node_overrides or {}) - {i for i, _ in layout})
    if unknown:
        raise ClusterError(f"overrides for unknown nodes {unknown}")
    host = overrides.get(BIND_HOST_KEY, HOST)
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    ports = free_ports(3 * (controllers + brokers), HOST if hosts else host)
    cluster = ClusterFile(random_cluster_id(), overrides=dict(overrides))
    token_file = write_token(data_dir)
    for i, (node_id, role) in enumerate(layout):
        node_dir = data_dir / f"{role}-{node_id}"
        node_dir.mkdir(parents=True, exist_ok=True)
        cluster.nodes.append(
            NodeEntry(
                id=node_id,
                role=role,
                host=(hosts or {}).get(node_id, host),
                rpc_port=ports[3 * i],
                admin_port=ports[3 * i + 1],
                kafka_port=ports[3 * i + 2] if role == "broker" else None,
                pid=None,
                data_dir=str(node_dir),
                log_file=str(node_dir / "node.log"),
                config_file=str(node_dir / f"{role}.properties"),
                overrides=dict((node_overrides or {}).get(node_id, {})),
                netns=(netns or {}).get(node_id),
            )
        )
    for node in cluster.nodes:
        write_node_config(node, cluster, overrides, token_file)
    cluster.save(data_dir)
    token = read_token(data_dir)
    assert token is not None
    for node in cluster.nodes:
        register_token(node.host, node.admin_port, token)
    return cluster


def add_controller(cluster: ClusterFile, data_dir: Path, node_id: int) -> NodeEntry:
    """Lay out and start one more controller (KIP-853 add-controller): new ports and directory,
    the cluster's overrides, the bootstrap voters in its controller.quorum.voters. It runs as an
    observer until the leader adds it to the voters."""
    if any(n.id == node_id for n in cluster.nodes):
        raise ClusterError(f"node {node_id} already exists")
    host = cluster.overrides.get(BIND_HOST_KEY, HOST)
    rpc_port, admin_port = free_ports(2, host)
    node_dir = data_dir / f"controller-{node_id}"
    node_dir.mkdir(parents=True, exist_ok=True)
    node = NodeEntry(
        id=node_id, role="controller", host=host, rpc_port=rpc_port, admin_port=admin_port,
        pid=None, data_dir=str(node_dir), log_file=str(node_dir / "node.log"),
        config_file=str(node_dir / "controller.properties"), bootstrap_voter=False,
    )
    cluster.nodes.append(node)
    token_path = ClusterFile.token_path(data_dir)
    write_node_config(node, cluster, cluster.overrides,
                      token_path if token_path.exists() else None)
    token = read_token(data_dir)
    if token is not None:
        register_token(node.host, node.admin_port, token)
    start_node(cluster, data_dir, node)  # saves cluster.json with the new node and its PID
    return node


def parse_overrides(items: list[str] | None) -> dict[str, str]:
    """`--config KEY=VALUE` arguments as a dict (whitespace around key and value stripped)."""
    out: dict[str, str] = {}
    for item in items or []:
        if "=" not in item:
            raise ClusterError(f"--config expects key=value, got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip()] = value.strip()
    return out


def leader_client(cluster: ClusterFile) -> AdminClient:
    """An admin client of the active controller some answering controller names."""
    views = quorum_view(cluster)
    for view in views.values():
        if view and view.get("leader_id") is not None:
            node = cluster.node(view["leader_id"])
            return AdminClient(node.host, node.admin_port)
    answering = [i for i, v in views.items() if v is not None]
    raise ClusterError(
        f"LEADER_NOT_AVAILABLE: no controller knows a leader (answering: {answering})"
    )


def running_nodes(cluster: ClusterFile) -> list[NodeEntry]:
    return [n for n in cluster.nodes if is_our_process(n.pid, n.config_file)]


def start_node(cluster: ClusterFile, data_dir: Path, node: NodeEntry) -> None:
    if is_our_process(node.pid, node.config_file):
        raise ClusterError(f"node {node.id} is already running (pid {node.pid})")
    node.pid = spawn_node(node)
    cluster.save(data_dir)


def quorum_view(cluster: ClusterFile, timeout_s: float = 1.0) -> dict[int, dict[str, Any] | None]:
    """Each node's /quorum/status, or None if it does not answer."""
    out: dict[int, dict[str, Any] | None] = {}
    for node_id, client in cluster.clients(timeout_s).items():
        try:
            out[node_id] = client.get_json("/quorum/status")
        except (AdminError, OSError):
            out[node_id] = None
    return out


def agreed_leader(views: dict[int, dict[str, Any] | None], node_ids: list[int]) -> int | None:
    """The leader every listed node names in the same epoch, or None."""
    leaders = set()
    for node_id in node_ids:
        view = views.get(node_id)
        if view is None or view.get("leader_id") is None:
            return None
        leaders.add((view["leader_id"], view["leader_epoch"]))
    if len(leaders) != 1:
        return None
    leader: int = next(iter(leaders))[0]
    return leader


def wait_for_leader(
    cluster: ClusterFile,
    node_ids: list[int],
    timeout_s: float,
    progress: Callable[[str], None] | None = None,
) -> int:
    """Poll until every node in `node_ids` names the same leader; returns its id."""

    def step() -> tuple[int | None, str]:
        views = quorum_view(cluster, timeout_s=0.5)
        leader = agreed_leader(views, node_ids)
        up = sum(1 for i in node_ids if views.get(i) is not None)
        named = sorted({v["leader_id"] for v in views.values() if v and v.get("leader_id")})
        return leader, (f"waiting for a leader: {up}/{len(node_ids)} nodes answering, "
                        f"leaders named {named}")  # fmt: skip

    return _poll(cluster.nodes, "node", node_ids, timeout_s, progress, step, "no agreed leader")


def _poll(nodes: list[NodeEntry], kind: str, ids: list[int], timeout_s: float,
          progress: Callable[[str], None] | None, step: Callable[[], tuple[T | None, str]],
          failed: str) -> T:  # fmt: skip
    """Call `step` every 50 ms until it gives a result (not None); its words on the way go to
    `progress` when they change. A listed node's process that exited, or the timeout, raises
    ClusterError."""
    deadline = time.monotonic() + timeout_s
    last = ""
    while True:
        for node in nodes:
            proc = _children.get(node.pid) if node.pid is not None else None
            if proc is not None and proc.poll() is not None and node.id in ids:
                raise ClusterError(
                    f"{kind} {node.id} exited with code {proc.returncode}; see {node.log_file}"
                )
        result, msg = step()
        if result is not None:
            return result
        if progress is not None and msg != last:
            progress(msg)
            last = msg
        if time.monotonic() > deadline:
            raise ClusterError(f"{failed} after {timeout_s:.0f} s ({msg})")
        time.sleep(0.05)


def stop_node(node: NodeEntry, *, force: bool, timeout_s: float = 10.0) -> bool:
    """SIGTERM (graceful: the node resigns and exits) or SIGKILL. True once it is gone."""
    if not signal_node(node, signal.SIGKILL if force else signal.SIGTERM):
        return True
    if not force:
        signal_node(node, signal.SIGCONT)  # a paused node handles SIGTERM only once resumed
    return wait_dead(node, timeout_s)


def broker_view(cluster: ClusterFile, timeout_s: float = 1.0) -> dict[str, Any] | None:
    """GET /cluster from the first node that answers (linearizable: via the active controller)."""
    for node in cluster.controllers + cluster.brokers:
        client = AdminClient(node.host, node.admin_port, timeout_s)
        try:
            view = client.get_json("/cluster")
        except (AdminError, OSError):
            continue
        finally:
            client.close()
        if isinstance(view, dict):
            return view
    return None


def broker_epochs(cluster: ClusterFile, timeout_s: float) -> dict[int, int]:
    """The broker epoch of every registered broker, as the active controller knows them; polls
    while no node answers (a controller election), ClusterError after `timeout_s`."""
    def step() -> tuple[dict[str, Any] | None, str]:
        return broker_view(cluster), "waiting for a node to answer GET /cluster"

    view = _poll(cluster.nodes, "node", [], timeout_s, None, step, "no broker view")
    return {b["id"]: b["epoch"] for b in view.get("brokers", [])}


def wait_for_brokers(
    cluster: ClusterFile,
    broker_ids: list[int],
    timeout_s: float,
    progress: Callable[[str], None] | None = None,
    newer_than: Mapping[int, int] | None = None,
) -> dict[str, Any]:
    """Poll /cluster until every broker in `broker_ids` is registered and unfenced.

    `newer_than` maps a broker id to the broker epoch of a registration that does not count: a
    broker restarted after kill -9 must be waited for by its new registration, because the old
    one stays unfenced until its session times out (KIP-631: the controller refuses the new
    incarnation with DUPLICATE_BROKER_REGISTRATION meanwhile) and is fenced after that."""
    stale = dict(newer_than or {})

    def step() -> tuple[dict[str, Any] | None, str]:
        view = broker_view(cluster)
        brokers = {b["id"]: b for b in (view or {}).get("brokers", [])
                   if b["epoch"] > stale.get(b["id"], -1)}  # fmt: skip
        registered = [i for i in broker_ids if i in brokers]
        unfenced = [i for i in registered if not brokers[i]["fenced"]]
        ready = view is not None and len(unfenced) == len(broker_ids)
        return view if ready else None, (
            f"waiting for brokers: {len(registered)}/{len(broker_ids)} registered, "
            f"{len(unfenced)}/{len(broker_ids)} unfenced")  # fmt: skip

    return _poll(cluster.brokers, "broker", broker_ids, timeout_s, progress, step,
                 "brokers not ready")  # fmt: skip
