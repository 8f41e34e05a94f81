"""A test cluster's private network of Linux network namespaces, so a partition is the kernel
dropping packets (nftables), not our transport choosing to (docs/jepsen.md "Real network
partitions").

Layout (`Netns.create`), every name carrying the run's random prefix (`kl` + 6 hex digits):
- `<prefix>-sw`: the switch, a namespace holding one Linux bridge;
- `<prefix>-n<id>`: one namespace per node, its `eth0` a veth pair to a bridge port, address
  `10.A.B.<i>/24` (a random private /24, only ever configured inside these namespaces), and `lo`;
- `<prefix>-cl`: the clients' namespace (address `.250`), where the run's own HTTP clients and
  nemesis talk from: the runner enters it for its thread (`Netns.entered`, setns(2)), so nothing
  is added to the machine's own network (no interface, no route, no rule outside the
  namespaces).
Nodes start inside their namespace (`ip netns exec NAME python -m harness.node ...`, the
launcher's `NodeEntry.netns`) and bind their namespace's address.

A cut (`cut`): node N drops, in its own namespace's nftables (table `inet kraftlab`, hooks
input and output), every packet to and from the listed peers' addresses (and the clients'
address when its clients are cut too). Grudges are symmetric (harness/jepsen/nemesis.py), so
each side drops both ways; TCP sees silence, as in a real partition, never a reset. `heal`
deletes the table.

Teardown (`teardown`): deletes exactly the namespaces this object created, by name, switch
first (its veth ends go with it); it runs from the runner's `finally` and from an atexit hook,
so a failed or interrupted run leaves nothing behind. Node processes must be stopped first (a
namespace lives on while a process runs in it).

A state file records the layout (`describe`) and a later process finds it again (`adopt`): the
Apache Kafka peer kit's peer.json does, so `kraftlab peer kafka status|down` reach and delete
the namespaces of a peer another process laid out (`keep` leaves them to it at exit).

Needs root, the `ip` tool (iproute2), `nft` (nftables; .ci/install installs it) and network
namespace support; `missing()` says which is absent, so runs and tests skip with that reason.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

CLONE_NEWNET = 0x40000000
NETNS_DIR = "/run/netns"
CLIENT_HOST = 250  # the clients' namespace's last octet
TABLE = "kraftlab"
CMD_TIMEOUT_S = 10.0


class NetnsError(RuntimeError):
    """A namespace command failed (the message names the command and what it printed)."""


def _run(*args: str, stdin: str | None = None) -> None:
    try:
        done = subprocess.run(args, input=stdin, capture_output=True, text=True,
                              timeout=CMD_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetnsError(f"{' '.join(args)}: {exc}") from exc
    if done.returncode != 0:
        raise NetnsError(f"{' '.join(args)}: {done.stderr.strip() or done.returncode}")


def missing() -> str | None:
    """Why namespaces cannot be used here (None: they can): root, ip, nft, kernel support."""
    if os.geteuid() != 0:
        return "real network partitions need root (network namespaces and nftables)"
    for tool, package in (("ip", "iproute2"), ("nft", "nftables")):
        if shutil.which(tool) is None:
            return f"real network partitions need `{tool}` ({package}; .ci/install installs it)"
    probe = f"kl{secrets.token_hex(3)}-probe"
    try:
        _run("ip", "netns", "add", probe)
    except NetnsError as exc:
        return f"network namespaces are not supported here: {exc}"
    try:
        _run("ip", "netns", "exec", probe, "nft", "list", "tables")
    except NetnsError as exc:
        return f"nftables does not work inside a namespace here: {exc}"
    finally:
        subprocess.run(("ip", "netns", "delete", probe), capture_output=True, check=False)
    return None


@dataclass
class Netns:
    """The namespaces of one run: created by `create`, removed by `teardown`."""

    node_ids: tuple[int, ...]
    prefix: str = field(default_factory=lambda: f"kl{secrets.token_hex(3)}")
    subnet: str = field(default_factory=lambda: f"10.{200 + secrets.randbelow(50)}."
                                                f"{secrets.randbelow(250)}")
    created: list[str] = field(default_factory=list)  # in creation order
    cut_nodes: set[int] = field(default_factory=set)

    @property
    def switch(self) -> str:
        return f"{self.prefix}-sw"

    @property
    def client(self) -> str:
        return f"{self.prefix}-cl"

    @property
    def client_address(self) -> str:
        return f"{self.subnet}.{CLIENT_HOST}"

    def name(self, node_id: int) -> str:
        return f"{self.prefix}-n{node_id}"

    def address(self, node_id: int) -> str:
        return f"{self.subnet}.{self.node_ids.index(node_id) + 1}"

    def hosts(self) -> dict[int, str]:
        return {n: self.address(n) for n in self.node_ids}

    def namespaces(self) -> dict[int, str]:
        return {n: self.name(n) for n in self.node_ids}

    def describe(self) -> dict[str, Any]:
        """What a state file records to find these namespaces again (`adopt`)."""
        return {"prefix": self.prefix, "subnet": self.subnet, "node_ids": list(self.node_ids)}

    @classmethod
    def adopt(cls, doc: dict[str, Any]) -> Netns:
        """The namespaces `describe` recorded (laid out by this or another process), able to
        enter, cut, heal and delete them: `teardown` deletes, by name, those that exist."""
        net = cls(tuple(int(n) for n in doc["node_ids"]), prefix=str(doc["prefix"]),
                  subnet=str(doc["subnet"]))
        net.created = [net.switch, *(net.name(n) for n in net.node_ids), net.client]
        return net

    def exists(self) -> bool:
        """The clients' namespace is there (so the nodes' may be reached)."""
        return os.path.exists(os.path.join(NETNS_DIR, self.client))

    def keep(self) -> None:
        """Leave the namespaces in place when this process exits (a peer left running); the
        process that `adopt`s them later deletes them."""
        atexit.unregister(self.teardown)

    # --- lifecycle ----------------------------------------------------------------------------

    def create(self) -> Netns:
        """The switch, one namespace per node and the clients' one; torn down on any failure."""
        if len(self.node_ids) >= CLIENT_HOST:
            raise NetnsError(f"at most {CLIENT_HOST - 1} nodes")
        atexit.register(self.teardown)
        try:
            self._add(self.switch)
            _run("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
            _run("ip", "-n", self.switch, "link", "set", "br0", "up")
            for i, node_id in enumerate(self.node_ids):
                self._attach(self.name(node_id), f"p{i}", self.address(node_id))
            self._attach(self.client, "pc", self.client_address)
        except BaseException:
            self.teardown()
            raise
        return self

    def _add(self, name: str) -> None:
        _run("ip", "netns", "add", name)
        self.created.append(name)

    def _attach(self, name: str, port: str, address: str) -> None:
        """Namespace `name` on bridge port `port` of the switch, `eth0` at `address`/24."""
        self._add(name)
        _run("ip", "-n", self.switch, "link", "add", port, "type", "veth",
             "peer", "name", "eth0", "netns", name)
        _run("ip", "-n", self.switch, "link", "set", port, "master", "br0")
        _run("ip", "-n", self.switch, "link", "set", port, "up")
        _run("ip", "-n", name, "addr", "add", f"{address}/24", "dev", "eth0")
        _run("ip", "-n", name, "link", "set", "eth0", "up")
        _run("ip", "-n", name, "link", "set", "lo", "up")

    def teardown(self) -> list[str]:
        """Delete every namespace this object created (by name); the ones that would not go."""
        stuck = []
        for name in list(self.created):
            done = subprocess.run(("ip", "netns", "delete", name), capture_output=True,
                                  check=False)
            if done.returncode == 0 or not os.path.exists(os.path.join(NETNS_DIR, name)):
                self.created.remove(name)
            else:
                stuck.append(name)
        atexit.unregister(self.teardown)
        return stuck

    # --- processes and clients ----------------------------------------------------------------

    def exec_prefix(self, node_id: int) -> list[str]:
        return ["ip", "netns", "exec", self.name(node_id)]

    @contextmanager
    def entered(self) -> Iterator[None]:
        """Run this thread (and the threads it starts) in the clients' namespace: every socket
        it opens meanwhile reaches the nodes through the switch. Back where it was at the end."""
        libc = ctypes.CDLL(None, use_errno=True)
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(os.path.join(NETNS_DIR, self.client), os.O_RDONLY)
        try:
            if libc.setns(target, CLONE_NEWNET) != 0:
                raise NetnsError(f"setns({self.client}): {os.strerror(ctypes.get_errno())}")
            try:
                yield
            finally:
                if libc.setns(own, CLONE_NEWNET) != 0:
                    raise NetnsError(f"setns back: {os.strerror(ctypes.get_errno())}")
        finally:
            os.close(own)
            os.close(target)

    # --- partitions ---------------------------------------------------------------------------

    def cut(self, node_id: int, peers: Iterable[int], clients: bool = False) -> None:
        """Node `node_id` drops all packets to and from `peers` (and the clients if asked)."""
        addresses = [self.address(p) for p in sorted(set(peers))]
        if clients:
            addresses.append(self.client_address)
        self.heal(node_id)
        if not addresses:
            return
        dropped = ", ".join(addresses)
        ruleset = (f"table inet {TABLE} {{\n"
                   f" chain out {{ type filter hook output priority 0; policy accept;"
                   f" ip daddr {{ {dropped} }} drop; }}\n"
                   f" chain in {{ type filter hook input priority 0; policy accept;"
                   f" ip saddr {{ {dropped} }} drop; }}\n}}\n")
        _run("ip", "netns", "exec", self.name(node_id), "nft", "-f", "-", stdin=ruleset)
        self.cut_nodes.add(node_id)

    def heal(self, node_id: int) -> None:
        """Node `node_id` drops nothing any more."""
        done = subprocess.run(("ip", "netns", "exec", self.name(node_id), "nft", "delete",
                               "table", "inet", TABLE), capture_output=True, text=True,
                              timeout=CMD_TIMEOUT_S, check=False)
        if done.returncode != 0 and "No such file" not in done.stderr:
            raise NetnsError(f"heal {node_id}: {done.stderr.strip()}")
        self.cut_nodes.discard(node_id)

    def rules(self, node_id: int) -> str:
        """The node's nftables ruleset as `nft list ruleset` prints it (for reports, tests)."""
        done = subprocess.run(("ip", "netns", "exec", self.name(node_id), "nft", "list",
                               "ruleset"), capture_output=True, text=True,
                              timeout=CMD_TIMEOUT_S, check=False)
        return done.stdout
