"""A real Apache Kafka KRaft cluster on loopback: lay out, format, start, watch, stop.

Layouts (`create(..., layout=...)`):
- "combined" (the default): nodes 1..N, each `process.roles=broker,controller`, N JVMs;
- "split": controllers 1..C (`process.roles=controller`) and brokers 101.. (`broker`), as
  kraftlab's own launcher numbers them (harness/launcher/cluster.py), so a fault aimed at
  "broker 102" or "controller 1" means the same node on both systems.
The controllers are static voters (`controller.quorum.voters`), formatted with one cluster id
by Kafka's StorageTool. Every listener binds 127.0.0.1 on ports the kernel reports free.

In network namespaces (`create(..., net=Netns)`, harness/launcher/netns.py; `kraftlab jepsen run
--system kafka --net netns`): each node's JVM starts inside its own namespace (`ip netns exec
NAME java ...`, which execs in place: the recorded PID is the JVM's), and its listeners (the
broker's PLAINTEXT, the controller's CONTROLLER) bind and advertise the namespace's address, so
do the voters in `controller.quorum.voters`; ports are still drawn on loopback, only to be
distinct. peer.json records each node's namespace and the layout (`net`), so `status` reaches
the nodes from the clients' namespace and `down` deletes the namespaces once every JVM stopped.
Whatever talks to such a peer (the readiness wait, `view`) enters the clients' namespace for
the call (`reach`); a thread already there stays there.

Sizing for a 2-core machine (JVM_OPTS, SERVER_DEFAULTS; docs/kafka-peer.md says why each):
a 512 MiB heap, G1 as Kafka's own scripts start it (kafka-run-class.sh), two parallel GC
threads and one concurrent, two JIT compiler threads; 2 network and 2 I/O threads per broker
(Kafka: 3 and 8), one replica fetcher, 2 background threads (10), a small log cleaner, and 10
`__consumer_offsets` partitions (50) as kraftlab's test clusters. Anything else is Kafka's
default unless `overrides` says otherwise: the same `key=value` settings a kraftlab cluster
takes (session, heartbeat, lag time, election and fetch timeouts carry Kafka's names in both),
so both systems run one configuration; keys only kraftlab knows (`kraftlab.*`, a topic's
`replication.mode`) are left out and listed in `peer.json` as `ignored`.

`peer.json` in the data dir is the peer's state file (as kraftlab's `cluster.json`): per node
its roles, ports, PID, config and log files. Processes start detached and are only ever
signalled by their recorded PID after checking it still runs *this* node (its command line
names `kafka.Kafka` and its config file): `down` stops only what `up` started.

Ready (`wait_ready`): every broker's own log says it was unfenced since this start
(BrokerLifecycleManager: "The broker has been unfenced"), every broker's Metadata lists every
broker (a KRaft broker lists only unfenced brokers: KRaftMetadataCache), and DescribeQuorum
(forwarded by a broker to the active controller) names a leader among the voters. A node whose
JVM exits while it is waited for fails the wait at once with the tail of its log.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.kafka.wire import Wire
from harness.launcher.cluster import free_ports, is_our_process, random_cluster_id, write_state
from harness.launcher.netns import Netns
from harness.peers.kafka import faketime
from harness.peers.kafka.install import Install, require
from harness.peers.lazyfs import mount as lazy

SYSTEM = "apache-kafka"
STATE_FILE = "peer.json"
HOST = "127.0.0.1"
LAYOUTS = ("combined", "split")
FIRST_BROKER_ID = 101
PROGRAM = b"kafka.Kafka"  # the main class on a node's command line

JVM_OPTS = (
    "-Xms512m", "-Xmx512m",
    # Kafka's own start flags (bin/kafka-run-class.sh KAFKA_JVM_PERFORMANCE_OPTS) ...
    "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    # ... and thread counts for 2 cores shared by three JVMs and the clients
    "-XX:ParallelGCThreads=2", "-XX:ConcGCThreads=1", "-XX:CICompilerCount=2",
    "-Djava.awt.headless=true",
)
SERVER_DEFAULTS = {
    "num.network.threads": "2",
    "num.io.threads": "2",
    "num.replica.fetchers": "1",
    "background.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": str(8 * 2**20),
    "offsets.topic.num.partitions": "10",
}
LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = org.apache.kafka
logger.kafka.level = INFO
"""
UNFENCED_LINE = "The broker has been unfenced"
FORMAT_TIMEOUT_S = 120.0
POLL_S = 0.1


class PeerError(RuntimeError):
    """The peer cluster could not be laid out, started, reached or stopped."""


@dataclass
class PeerNode:
    id: int
    roles: list[str]  # "broker", "controller"
    host: str
    kafka_port: int | None  # the PLAINTEXT listener (brokers)
    controller_port: int | None  # the CONTROLLER listener (controllers)
    data_dir: str
    config_file: str
    log_file: str
    pid: int | None = None
    # Where this incarnation's log began: readiness reads only what it wrote.
    log_offset: int = 0
    # The network namespace the JVM runs in (harness/launcher/netns.py); None: the machine's.
    netns: str | None = None
    # The lazy file system's daemon over its log dir (PeerFile.lazyfs; harness/peers/lazyfs).
    lazyfs_pid: int | None = None

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.kafka_port}"

    @property
    def log_dir(self) -> Path:
        """Its `log.dirs`: the partition logs and checkpoints (harness/peers/kafka/logs.py)."""
        return Path(self.data_dir) / "data"


@dataclass
class PeerFile:
    cluster_id: str
    layout: str
    version: str
    nodes: list[PeerNode] = field(default_factory=list)
    overrides: dict[str, str] = field(default_factory=dict)
    ignored: dict[str, str] = field(default_factory=dict)
    system: str = SYSTEM
    # The namespaces' layout (Netns.describe) when the nodes run in them; None: loopback.
    net: dict[str, Any] | None = None
    # Every JVM starts with libfaketime preloaded, its clock steerable (faketime.py).
    faketime: bool = False
    # Every broker's log dir is on the lazy file system (harness/peers/lazyfs): what it did
    # not fsync is lost at a power loss (`power_loss`), as kraftlab's brokers lose it with
    # kraftlab.log.unflushed.in.process=1.
    lazyfs: bool = False

    def netns(self) -> Netns | None:
        """The peer's namespaces (Netns.adopt), None on loopback."""
        return None if self.net is None else Netns.adopt(self.net)

    @staticmethod
    def path_in(data_dir: Path) -> Path:
        return data_dir / STATE_FILE

    @classmethod
    def load(cls, data_dir: Path) -> PeerFile:
        path = cls.path_in(data_dir)
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            raise PeerError(f"no Apache Kafka peer in {data_dir} ({path} not found); start one "
                            "with `kraftlab peer kafka up`") from None
        nodes = [PeerNode(**n) for n in doc.pop("nodes")]
        return cls(nodes=nodes, **doc)

    def save(self, data_dir: Path) -> None:
        write_state(self.path_in(data_dir), asdict(self))

    def node(self, node_id: int) -> PeerNode:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise PeerError(f"no node {node_id}; nodes are {[n.id for n in self.nodes]}")

    @property
    def brokers(self) -> list[PeerNode]:
        return [n for n in self.nodes if n.is_broker]

    @property
    def controllers(self) -> list[PeerNode]:
        return [n for n in self.nodes if n.is_controller]

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.brokers)


def split_overrides(overrides: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(what Kafka takes, what only kraftlab knows)."""
    kept, ignored = {}, {}
    for key, value in overrides.items():
        if key.startswith("kraftlab.") or key == "replication.mode":
            ignored[key] = value
        else:
            kept[key] = value
    return kept, ignored


def _properties(node: PeerNode, voters: str, brokers: int,
                overrides: Mapping[str, str]) -> dict[str, str]:
    listeners, protocol_map = [], ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"]
    if node.is_broker:
        listeners.append(f"PLAINTEXT://{node.host}:{node.kafka_port}")
    if node.is_controller:
        listeners.append(f"CONTROLLER://{node.host}:{node.controller_port}")
    props = {
        "process.roles": ",".join(node.roles),
        "node.id": str(node.id),
        "controller.quorum.voters": voters,
        "controller.listener.names": "CONTROLLER",
        "listeners": ",".join(listeners),
        "listener.security.protocol.map": ",".join(protocol_map),
        "log.dirs": str(node.log_dir),
        # internal topics sized to the brokers there are (Kafka's defaults need 3)
        "offsets.topic.replication.factor": str(min(3, brokers)),
        "transaction.state.log.replication.factor": str(min(3, brokers)),
        "transaction.state.log.min.isr": str(min(2, brokers)),
        "share.coordinator.state.topic.replication.factor": str(min(3, brokers)),
        "share.coordinator.state.topic.min.isr": str(min(2, brokers)),
        **SERVER_DEFAULTS,
    }
    if node.is_broker:
        props["advertised.listeners"] = f"PLAINTEXT://{node.host}:{node.kafka_port}"
        props["inter.broker.listener.name"] = "PLAINTEXT"
    props.update(overrides)
    return props


def layout_of(layout: str, controllers: int, brokers: int) -> list[tuple[int, list[str]]]:
    """[(node id, roles)] of a layout (combined: `controllers` nodes with both roles)."""
    if layout == "combined":
        return [(i, ["broker", "controller"]) for i in range(1, controllers + 1)]
    if layout == "split":
        return ([(i, ["controller"]) for i in range(1, controllers + 1)]
                + [(FIRST_BROKER_ID + i, ["broker"]) for i in range(brokers)])
    raise PeerError(f"unknown layout {layout!r}; use one of {', '.join(LAYOUTS)}")


def lay_out(data_dir: Path, version: str, *, layout: str = "combined", controllers: int = 3,
            brokers: int = 3, overrides: Mapping[str, str] | None = None,
            net: Netns | None = None) -> PeerFile:
    """Every node's directory, config and log config (no Kafka needed, nothing formatted):
    on 127.0.0.1, or in `net`'s namespaces on their addresses (module docstring)."""
    if controllers < 1 or (layout == "split" and brokers < 1):
        raise PeerError("a peer needs at least one controller and one broker")
    roles = layout_of(layout, controllers, brokers)
    if net is not None and sorted(net.node_ids) != sorted(i for i, _ in roles):
        raise PeerError(f"the namespaces are laid out for nodes {list(net.node_ids)}, the "
                        f"peer has {[i for i, _ in roles]}")
    data_dir.mkdir(parents=True, exist_ok=True)
    if PeerFile.path_in(data_dir).exists():
        raise PeerError(f"{data_dir} already holds a peer ({STATE_FILE}); `down` it and give "
                        "an empty --data-dir")
    kept, ignored = split_overrides(overrides or {})
    ports = iter(free_ports(2 * len(roles), HOST))
    nodes = []
    for node_id, node_roles in roles:
        home = data_dir / f"node-{node_id}"
        home.mkdir()
        nodes.append(PeerNode(
            id=node_id, roles=node_roles, host=HOST if net is None else net.address(node_id),
            kafka_port=next(ports) if "broker" in node_roles else None,
            controller_port=next(ports) if "controller" in node_roles else None,
            data_dir=str(home), config_file=str(home / "server.properties"),
            log_file=str(home / "server.log"),
            netns=None if net is None else net.name(node_id)))
    voters = ",".join(f"{n.id}@{n.host}:{n.controller_port}" for n in nodes if n.is_controller)
    n_brokers = sum(1 for n in nodes if n.is_broker)
    for node in nodes:
        props = _properties(node, voters, n_brokers, kept)
        Path(node.config_file).write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (Path(node.data_dir) / "log4j2.properties").write_text(LOG4J2.format(log=node.log_file))
    return PeerFile(random_cluster_id(), layout, version, nodes, dict(overrides or {}),
                    ignored, net=None if net is None else net.describe())


def create(data_dir: Path, *, layout: str = "combined", controllers: int = 3, brokers: int = 3,
           overrides: Mapping[str, str] | None = None, install: Install | None = None,
           progress: Callable[[str], None] = lambda _m: None,
           net: Netns | None = None) -> PeerFile:
    """Write every node's config (`lay_out`) and format its storage; nothing is started."""
    install = install or require()
    peer = lay_out(data_dir, install.version, layout=layout, controllers=controllers,
                   brokers=brokers, overrides=overrides, net=net)
    nodes = peer.nodes
    progress(f"formatting {len(nodes)} nodes ({layout}) with cluster id {peer.cluster_id}")
    with ThreadPoolExecutor(len(nodes)) as pool:
        for done in pool.map(lambda n: _format(install, peer.cluster_id, n), nodes):
            if done.returncode != 0:
                raise PeerError(f"kafka-storage format failed (exit {done.returncode}): "
                                f"{(done.stdout + done.stderr).strip()[-800:]}")
    peer.save(data_dir)
    return peer


def _java(install: Install, node: PeerNode, main: str, *args: str,
          heap: tuple[str, ...] = ()) -> list[str]:
    log4j = Path(node.data_dir) / "log4j2.properties"
    return [install.java, *heap, f"-Dlog4j2.configurationFile={log4j}", "-cp",
            install.classpath, main, *args]


def _format(install: Install, cluster_id: str, node: PeerNode) -> subprocess.CompletedProcess[str]:
    cmd = _java(install, node, "kafka.tools.StorageTool", "format", "--cluster-id", cluster_id,
                "--config", node.config_file, heap=("-Xmx256m", "-XX:TieredStopAtLevel=1"))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=FORMAT_TIMEOUT_S,
                          cwd=node.data_dir)


# Popen objects of the nodes this process started, so a kill leaves no zombie behind.
_children: dict[int, subprocess.Popen[bytes]] = {}


def running(node: PeerNode) -> bool:
    if node.pid is not None and node.pid in _children and _children[node.pid].poll() is not None:
        del _children[node.pid]
    return is_our_process(node.pid, node.config_file, PROGRAM)


def node_command(install: Install, node: PeerNode) -> list[str]:
    """The node's JVM command line; in its namespace through `ip netns exec`, which execs
    the JVM in place (same PID, same command line: `running` recognises it)."""
    prefix = ["ip", "netns", "exec", node.netns] if node.netns else []
    return [*prefix, *_java(install, node, "kafka.Kafka", node.config_file, heap=JVM_OPTS)]


def start_node(peer: PeerFile, data_dir: Path, node: PeerNode,
               install: Install | None = None) -> None:
    """Start one node's JVM detached (no-op if it runs); its PID goes into peer.json."""
    if running(node):
        return
    install = install or require(peer.version)
    log = Path(node.log_file)
    node.log_offset = log.stat().st_size if log.exists() else 0
    if peer.lazyfs and node.is_broker and not lazy.is_daemon(node.lazyfs_pid, node.log_dir):
        try:
            node.lazyfs_pid = lazy.mount(node.log_dir)
        except lazy.LazyFSError as exc:
            raise PeerError(str(exc)) from exc
    env = None
    if peer.faketime:
        try:
            env = {**os.environ, **faketime.prepare(Path(node.data_dir))}
        except faketime.FaketimeError as exc:
            raise PeerError(str(exc)) from exc
    stdout = open(Path(node.data_dir) / "stdout.log", "ab")  # noqa: SIM115 - the child's
    try:
        proc = subprocess.Popen(
            node_command(install, node),
            stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.STDOUT,
            start_new_session=True, cwd=node.data_dir, env=env)
    finally:
        stdout.close()
    _children[proc.pid] = proc
    node.pid = proc.pid
    peer.save(data_dir)


def power_loss(peer: PeerFile, data_dir: Path, node: PeerNode, *, save: bool = True) -> str:
    """The node loses power: its JVM killed (kill -9), then its lazy file system's page cache
    (harness/peers/lazyfs/mount.py `power_loss`), so its log dir holds only what the broker
    fsynced. A peer without the lazy file system refuses (a kill -9 keeps the page cache).
    `save=False`: the caller saves peer.json (several nodes losing power at once, in threads,
    must not write it at the same time)."""
    if not peer.lazyfs:
        raise PeerError("this peer's log dirs are not on the lazy file system: `peer kafka "
                        "down`, then `peer kafka up --lazyfs`")
    gone = stop_node(node, force=True, timeout_s=5.0)
    if not gone:
        return "survived SIGKILL"
    node.pid = None
    lost = node.is_broker and lazy.power_loss(node.log_dir, node.lazyfs_pid)
    node.lazyfs_pid = None
    if save:
        peer.save(data_dir)
    return "killed, unflushed writes lost" if lost else "killed"


def _unmount(node: PeerNode) -> None:
    """A clean unmount of the node's lazy file system (its JVM stopped): every write synced."""
    if node.lazyfs_pid is not None or lazy.is_mounted(node.log_dir):
        try:
            lazy.unmount(node.log_dir, node.lazyfs_pid)
        except lazy.LazyFSError as exc:
            raise PeerError(str(exc)) from exc
        node.lazyfs_pid = None


def signal_node(node: PeerNode, sig: signal.Signals) -> bool:
    """Send `sig` to the node's recorded PID if it still runs this node. False if not."""
    if not running(node):
        return False
    assert node.pid is not None
    os.kill(node.pid, sig)
    return True


def wait_dead(node: PeerNode, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not running(node):
            return True
        time.sleep(0.02)  # poll interval
    return not running(node)


def stop_node(node: PeerNode, *, force: bool, timeout_s: float = 20.0) -> bool:
    """SIGTERM (Kafka's controlled shutdown) or SIGKILL; True once the JVM is gone."""
    if not signal_node(node, signal.SIGKILL if force else signal.SIGTERM):
        return True
    if not force:
        signal_node(node, signal.SIGCONT)  # a paused JVM handles SIGTERM only once resumed
    return wait_dead(node, timeout_s)


def log_tail(node: PeerNode, lines: int = 15) -> str:
    out = []
    for path in (Path(node.data_dir) / "stdout.log", Path(node.log_file)):
        if path.exists():
            out += path.read_text(errors="replace").splitlines()[-lines:]
    return "\n".join(out[-lines:])


def _since_start(node: PeerNode) -> str:
    path = Path(node.log_file)
    if not path.exists():
        return ""
    with path.open("rb") as f:
        f.seek(node.log_offset)
        return f.read().decode(errors="replace")


@contextmanager
def reach(peer: PeerFile) -> Iterator[None]:
    """This thread in the peer's clients' namespace for the block (module docstring); as it
    is on loopback, or when the namespaces are gone (every connection then fails)."""
    net = peer.netns()
    with net.entered() if net is not None and net.exists() else nullcontext():
        yield


def view(peer: PeerFile, timeout_s: float = 1.0) -> dict[str, Any]:
    """What the cluster says now: per broker the brokers its Metadata lists (None: no answer),
    and the quorum as DescribeQuorum gives it (None: no broker answered)."""
    with reach(peer):
        return _view(peer, timeout_s)


def _view(peer: PeerFile, timeout_s: float) -> dict[str, Any]:
    seen: dict[int, list[int] | None] = {}
    quorum: dict[str, Any] | None = None
    for node in peer.brokers:
        try:
            with Wire(node.kafka_port or 0, timeout_s, node.host) as w:
                seen[node.id] = sorted(b.node_id for b in w.metadata([]).brokers)
                if quorum is None:
                    quorum = _quorum(w.describe_quorum())
        except (OSError, ConnectionError, ValueError):
            seen[node.id] = None
    return {"brokers_seen": seen, "quorum": quorum}


def _quorum(answer: Any) -> dict[str, Any] | None:
    if answer.error_code != 0 or not answer.topics or not answer.topics[0].partitions:
        return None
    p = answer.topics[0].partitions[0]
    if p.error_code != 0:
        return None

    def replica(r: Any) -> dict[str, Any]:
        return {"id": r.replica_id, "log_end_offset": r.log_end_offset,
                "lag": p.high_watermark - r.log_end_offset}

    return {"leader_id": p.leader_id, "leader_epoch": p.leader_epoch,
            "high_watermark": p.high_watermark,
            "voters": [replica(r) for r in p.current_voters],
            "observers": [replica(r) for r in p.observers]}


def wait_ready(peer: PeerFile, timeout_s: float = 90.0, node_ids: list[int] | None = None,
               progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Poll until the quorum has a leader and every broker is unfenced (module docstring);
    `node_ids`: the nodes started since the last ready cluster, whose own logs must say they
    were unfenced. Raises PeerError when a waited-for JVM exits or at the timeout."""
    waited = [peer.node(i) for i in (node_ids if node_ids is not None else
                                     [n.id for n in peer.nodes])]
    brokers = sorted(n.id for n in peer.brokers)
    voters = {n.id for n in peer.controllers}
    deadline = time.monotonic() + timeout_s
    last = ""
    while True:
        for node in waited:
            proc = _children.get(node.pid) if node.pid is not None else None
            if proc is not None and proc.poll() is not None:
                raise PeerError(f"node {node.id} exited with code {proc.returncode}; its log "
                                f"({node.log_file}) ends:\n{log_tail(node)}")
        unfenced_self = [n.id for n in waited if n.is_broker and UNFENCED_LINE in
                         _since_start(n)]
        state = view(peer)
        quorum = state["quorum"]
        agreeing = [i for i, seen in state["brokers_seen"].items() if seen == brokers]
        leader = quorum["leader_id"] if quorum else None
        ready = (leader in voters and len(agreeing) == len(brokers)
                 and len(unfenced_self) == sum(1 for n in waited if n.is_broker))
        if ready:
            return state
        msg = (f"waiting for Apache Kafka: quorum leader {leader if leader is not None else '-'}"
               f", brokers listing all brokers {len(agreeing)}/{len(brokers)}, started brokers "
               f"unfenced {len(unfenced_self)}/{sum(1 for n in waited if n.is_broker)}")
        if msg != last:
            progress(msg)
            last = msg
        if time.monotonic() > deadline:
            raise PeerError(f"Apache Kafka not ready after {timeout_s:.0f} s ({msg})")
        time.sleep(POLL_S)  # poll interval


def up(data_dir: Path, *, layout: str = "combined", controllers: int = 3, brokers: int = 3,
       overrides: Mapping[str, str] | None = None, timeout_s: float = 90.0,
       progress: Callable[[str], None] = lambda _m: None, net: Netns | None = None,
       faketime: bool = False, lazyfs: bool = False) -> PeerFile:
    """Lay out (or reuse a stopped) peer in data_dir, start every node, wait until ready.
    `net`: lay out a new peer in these namespaces (created by the caller). `faketime`: start
    every JVM with libfaketime preloaded, so the clock nemesis can skew it (faketime.py).
    `lazyfs`: every broker's log dir on the lazy file system, so a power loss loses what it
    did not fsync (harness/peers/lazyfs)."""
    install = require()
    if PeerFile.path_in(data_dir).exists():
        peer = PeerFile.load(data_dir)
        if net is not None:
            raise PeerError("a peer in network namespaces is laid out anew: give an empty "
                            "--data-dir")
        known = peer.netns()
        if known is not None and not known.exists():
            raise PeerError(f"the peer in {data_dir} ran in network namespaces {known.prefix}-* "
                            "that are gone: lay out a new one in an empty --data-dir")
    else:
        peer = create(data_dir, layout=layout, controllers=controllers, brokers=brokers,
                      overrides=overrides, install=install, progress=progress, net=net)
    started = [n.id for n in peer.nodes if not running(n)]
    if started and (peer.faketime, peer.lazyfs) != (faketime, lazyfs):
        if len(started) < len(peer.nodes):
            words = [f"{'with' if on else 'without'} {what}" for what, on in
                     (("libfaketime", peer.faketime), ("the lazy file system", peer.lazyfs))]
            raise PeerError(f"the peer in {data_dir} runs {' and '.join(words)}: stop it "
                            "first (`kraftlab peer kafka down`)")
        peer.faketime, peer.lazyfs = faketime, lazyfs
        peer.save(data_dir)
    for node in peer.nodes:
        start_node(peer, data_dir, node, install)
    try:
        wait_ready(peer, timeout_s, started, progress)
    except PeerError:
        down(data_dir, force=True)
        raise
    progress(f"Apache Kafka {peer.version} up in {data_dir}: {len(peer.nodes)} nodes "
             f"({peer.layout}), bootstrap {peer.bootstrap}")
    return peer


def down(data_dir: Path, *, force: bool = False, timeout_s: float = 20.0) -> list[int]:
    """Stop every node this peer started, by recorded PID: brokers-only nodes first (their
    controlled shutdown needs the controllers), then the rest; SIGKILL whatever outlives the
    SIGTERM's `timeout_s`. A peer in network namespaces: once every JVM stopped, its
    namespaces are deleted (by name; a namespace outlives no process of ours). Returns the ids
    that would not stop."""
    peer = PeerFile.load(data_dir)
    stuck = []
    unmount_errors: list[str] = []
    for wave in ([n for n in peer.nodes if not n.is_controller],
                 [n for n in peer.nodes if n.is_controller]):
        for node in wave:
            if not force:
                signal_node(node, signal.SIGTERM)
                signal_node(node, signal.SIGCONT)
        for node in wave:
            if not (not force and wait_dead(node, timeout_s)) and not stop_node(
                    node, force=True, timeout_s=10.0):
                stuck.append(node.id)
                continue
            node.pid = None
            try:
                _unmount(node)
            except PeerError as exc:  # the other nodes are still stopped and unmounted
                unmount_errors.append(f"node {node.id}: {exc}")
    peer.save(data_dir)
    if unmount_errors:
        raise PeerError("; ".join(unmount_errors))
    net = peer.netns()
    if net is not None and not stuck:
        left = net.teardown()
        if left:
            raise PeerError(f"network namespaces {left} could not be deleted")
    return stuck


def status(data_dir: Path) -> dict[str, Any]:
    """The state file's nodes with whether each runs, and what the cluster says."""
    peer = PeerFile.load(data_dir)
    state = view(peer) if any(running(n) for n in peer.brokers) else {
        "brokers_seen": {}, "quorum": None}
    brokers = sorted(n.id for n in peer.brokers)
    return {
        "system": peer.system, "version": peer.version, "cluster_id": peer.cluster_id,
        "layout": peer.layout, "bootstrap": peer.bootstrap,
        "nodes": [{"id": n.id, "roles": n.roles, "pid": n.pid, "running": running(n),
                   "kafka_port": n.kafka_port, "controller_port": n.controller_port,
                   "log_file": n.log_file} for n in peer.nodes],
        "quorum": state["quorum"],
        "brokers_seen": {str(k): v for k, v in state["brokers_seen"].items()},
        "ready": bool(state["quorum"] and state["quorum"]["leader_id"] in
                      {n.id for n in peer.controllers}
                      and all(v == brokers for v in state["brokers_seen"].values())
                      and len(state["brokers_seen"]) == len(brokers)),
        "overrides": peer.overrides, "ignored": peer.ignored,
        "net": peer.net,
    }
