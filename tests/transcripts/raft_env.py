"""The Raft transcript environment: RaftCores over tests/raft/cluster.py (in-memory logs, the
shared effect executor, a latency queue), driven one command at a time.

Messages are printed when they are delivered (or dropped), each followed, indented, by what it
changed on the receiver: a new role, epoch or leader, a truncation, a snapshot, a high watermark.
Commands that only queue messages (`campaign`, `propose`, `tick`) print the changes on the node
itself; the messages show up in the next `deliver` / `stabilize` / `advance`. Time moves only by
command: a delivery moves it to the message's arrival, `campaign`/`tick` to the node's timer,
`advance` runs timers and deliveries up to a point in time. Commands: see README.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from quorum import codec
from quorum.raft.config import RaftConfig
from quorum.raft.core import Accepted
from quorum.raft.effects import (
    DeleteLogPrefix,
    Effect,
    InstallSnapshot,
    TruncateLog,
    VoterChangeCompleted,
    VotersChanged,
)
from quorum.raft.log import Entry, OffsetAndEpoch
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderChangeRecord,
    NoOpRecord,
    VoteRequest,
    VoteResponse,
)
from quorum.raft.voters import Voter, VotersRecord
from tests.raft.cluster import Cluster, Node
from tests.transcripts.datadriven import Command, TranscriptError

QueueItem = tuple[int, int, int, int, Any]
_ELECTION_ROLES = ("unattached", "voted", "prospective", "candidate", "resigned")


def _opt(value: int | None) -> str:
    return "none" if value is None else str(value)


def fmt_entry(e: Entry) -> str:
    """`epoch:value`; control records by name (LC = LeaderChange, noop = NoOp)."""
    if e.control:
        record: object = codec.decode(e.data)
        if isinstance(record, VotersRecord):
            return f"{e.epoch}:voters({','.join(map(str, record.ids))})"
        names: dict[type, str] = {LeaderChangeRecord: "LC", NoOpRecord: "noop"}
        name = names.get(type(record), "control")
        return f"{e.epoch}:{name}"
    return f"{e.epoch}:{e.data.decode()}"


def fmt_oe(oe: OffsetAndEpoch) -> str:
    return f"(end {oe.offset}, epoch {oe.epoch})"


def _error(error: ErrorCode) -> str:
    return "" if error == ErrorCode.NONE else f" error={error.name}"


def fmt_message(msg: Any) -> str:
    """One line per message, Kafka's field names, only what a reader needs to follow the story."""
    match msg:
        case VoteRequest():
            pre = " pre" if msg.pre_vote else ""
            return (f"VoteRequest{pre} epoch={msg.candidate_epoch} "
                    f"last_epoch={msg.last_offset_epoch} leo={msg.last_offset}")  # fmt: skip
        case VoteResponse():
            pre = " pre" if msg.pre_vote else ""
            verdict = "granted" if msg.vote_granted else "rejected"
            return (f"VoteResponse{pre} {verdict} epoch={msg.leader_epoch} "
                    f"leader={_opt(msg.leader_id)}{_error(msg.error)}")  # fmt: skip
        case BeginQuorumEpochRequest():
            return f"BeginQuorumEpoch epoch={msg.leader_epoch} leader={msg.leader_id}"
        case BeginQuorumEpochResponse() | EndQuorumEpochResponse():
            return (f"{type(msg).__name__} epoch={msg.leader_epoch} "
                    f"leader={_opt(msg.leader_id)}{_error(msg.error)}")  # fmt: skip
        case EndQuorumEpochRequest():
            successors = ",".join(map(str, msg.preferred_successors))
            return f"EndQuorumEpoch epoch={msg.leader_epoch} successors={successors}"
        case FetchRequest():
            return (f"Fetch epoch={msg.leader_epoch} offset={msg.fetch_offset} "
                    f"last_epoch={msg.last_fetched_epoch}")  # fmt: skip
        case FetchResponse():
            head = f"FetchResponse epoch={msg.leader_epoch}"
            if msg.error != ErrorCode.NONE:
                return f"{head} leader={_opt(msg.leader_id)}{_error(msg.error)}"
            if msg.diverging_epoch is not None:
                return f"{head} hw={msg.high_watermark} diverging={fmt_oe(msg.diverging_epoch)}"
            if msg.snapshot_id is not None:
                return f"{head} hw={msg.high_watermark} snapshot={fmt_oe(msg.snapshot_id)}"
            records = " ".join(fmt_entry(e) for e in msg.records)
            return f"{head} hw={msg.high_watermark} records=[{records}]"
        case FetchSnapshotRequest():
            return (f"FetchSnapshot epoch={msg.leader_epoch} snapshot={fmt_oe(msg.snapshot_id)} "
                    f"position={msg.position}")  # fmt: skip
        case FetchSnapshotResponse():
            head = f"FetchSnapshotResponse epoch={msg.leader_epoch}"
            if msg.error != ErrorCode.NONE:
                return f"{head}{_error(msg.error)}"
            return (f"{head} position={msg.position} size={msg.size} "
                    f"data={msg.data.decode()!r}")  # fmt: skip
        case _:
            return repr(msg)


@dataclasses.dataclass(frozen=True, slots=True)
class View:
    """What a role-change line reports."""

    role: str
    epoch: int
    leader: int | None
    voted: int | None

    @classmethod
    def of(cls, node: Node) -> View:
        core = node.core
        return cls(core.role_name, core.epoch, core.leader_id, core.election_state.voted_id)

    def describe(self, node_id: int) -> str:
        match self.role:
            case "follower":
                return f"{node_id} becomes follower of {self.leader} in epoch {self.epoch}"
            case "voted":
                return f"{node_id} votes for {self.voted} in epoch {self.epoch}"
            case _:
                return f"{node_id} becomes {self.role} in epoch {self.epoch}"


class TranscriptCluster(Cluster):
    """Cluster that reports what each effect list changed, and each delivery, to `out`."""

    def __init__(self, **kwargs: Any) -> None:
        self.out: list[str] = []
        self.advancing = False  # lines are stamped t=<ms> instead of indented under a message
        self.trace = True  # print deliveries
        self.views: dict[int, View] = {}
        self.hws: dict[int, int] = {}
        super().__init__(**kwargs)
        for nid, node in self.nodes.items():
            self.remember(nid, node)

    def note(self, text: str, at_ms: int, consequence: bool) -> None:
        if self.advancing:
            self.out.append(f"t={at_ms} {text}")
        else:
            self.out.append(f"  {text}" if consequence else text)

    def remember(self, nid: int, node: Node) -> None:
        self.views[nid] = View.of(node)
        self.hws[nid] = node.core.high_watermark

    def run(self, node: Node, effects: list[Effect]) -> None:
        nid = node.node_id
        leo_before = node.log.end_offset
        super().run(node, effects)
        notes: list[str] = []
        view = View.of(node)
        if view != self.views.get(nid):
            notes.append(view.describe(nid))
        for e in effects:
            match e:
                case TruncateLog(end_offset=end):
                    notes.append(f"{nid} truncates its log from {leo_before} to {end}")
                case InstallSnapshot(snapshot=snap):
                    notes.append(f"{nid} installs snapshot {fmt_oe(snap)}")
                case DeleteLogPrefix(before_offset=offset):
                    notes.append(f"{nid} deletes its log below offset {offset}")
                case VotersChanged(voters=voters):
                    notes.append(f"{nid} voters -> {','.join(map(str, voters.ids))}")
                case VoterChangeCompleted(request_id=rid, error=error, message=why):
                    tail = f" ({why})" if why else ""
                    notes.append(f"{nid} answers voter change r{rid}: {error.name}{tail}")
        hw = node.core.high_watermark
        if hw != self.hws.get(nid):
            notes.append(f"{nid} hw {self.hws.get(nid)} -> {hw}")
        self.views[nid], self.hws[nid] = view, hw
        for n in notes:
            self.note(n, self.now, consequence=True)

    def deliver(self, item: QueueItem) -> None:
        at, _, src, dst, message = item
        target = self.nodes.get(dst)
        if self.trace:
            why = ""
            if target is None or not target.up:
                why = f" (dropped: {dst} is down)"
            elif (src, dst) in self.cut:
                why = " (dropped: link cut)"
            line = f"{src}->{dst} {fmt_message(message)}{why}"
            self.note(line, max(self.now, at), consequence=False)
        super().deliver(item)

    def take(self, src: set[int] | None, dst: set[int] | None) -> list[QueueItem]:
        """Remove and return the queued messages matching the filters, in delivery order."""
        picked = [i for i in sorted(self.queue) if (src is None or i[2] in src)
                  and (dst is None or i[3] in dst)]  # fmt: skip
        self.queue = [i for i in self.queue if i not in picked]
        self.queue.sort()  # still a heap
        return picked


class RaftEnv:
    def __init__(self) -> None:
        self._c: TranscriptCluster | None = None
        self.requests = 0

    @property
    def c(self) -> TranscriptCluster:
        if self._c is None:
            raise TranscriptError("no cluster yet: start with add-nodes")
        return self._c

    def handle(self, cmd: Command) -> str:
        handler = getattr(self, "cmd_" + cmd.name.replace("-", "_"), None)
        if handler is None:
            raise TranscriptError(f"line {cmd.line}: unknown raft command {cmd.name!r}")
        if self._c is not None:
            self._c.out = []
        result: str | None = handler(cmd)
        lines = list(self._c.out) if self._c is not None else []
        if result:
            lines.insert(0, result)
        return "\n".join(lines)

    def node(self, cmd: Command, index: int = 0) -> Node:
        nid = cmd.int_arg(index)
        if nid not in self.c.nodes:
            raise TranscriptError(f"line {cmd.line}: no node {nid}")
        return self.c.nodes[nid]

    # ------------------------------------------------------------------------------ setup

    def cmd_add_nodes(self, cmd: Command) -> str:
        """add-nodes <voters> [observers=4,5] [seed=0] [latency=1] [<RaftConfig field>=<value>]"""
        cmd.check(1, frozenset({"observers", "seed", "latency"} | _CONFIG_FIELDS))
        overrides: dict[str, Any] = {}
        for key, raw in cmd.kwargs.items():
            if key in _CONFIG_FIELDS:
                overrides[key] = raw == "true" if raw in ("true", "false") else _number(raw)
        self._c = TranscriptCluster(
            voters=cmd.int_arg(0), observers=cmd.ints("observers"),
            config=dataclasses.replace(RaftConfig(), **overrides),
            seed=int(cmd.kwargs.get("seed", "0")), latency_ms=int(cmd.kwargs.get("latency", "1")),
        )  # fmt: skip
        return self.cmd_status(Command("status"))

    def cmd_status(self, cmd: Command) -> str:
        """One line per node: role, epoch, leader, vote, HW, LEO, log start, snapshot, log."""
        cmd.check(0)
        rows = []
        for nid, node in sorted(self.c.nodes.items()):
            core, log = node.core, node.log
            entries = " ".join(fmt_entry(e) for e in log.entries)
            extra = f" start={log.start_offset}" if log.start_offset else ""
            snap = log.latest_snapshot()
            extra += f" snapshot={fmt_oe(snap)}" if snap is not None else ""
            if not node.up:
                rows.append(f"{nid} down{extra} log=[{entries}]")
                continue
            e = core.election_state
            if core.is_leader:  # the LEO the leader holds for each other voter and observer
                remote = " ".join(
                    f"{r.node_id}:{r.log_end_offset if r.log_end_offset >= 0 else '?'}"
                    for r in core.status().replicas
                    if r.node_id != nid
                )
                extra += f" remote_leo=[{remote}]"
            if core.voters != self.c.voters:  # only once a voter change is in force here
                extra += f" voters={','.join(map(str, core.voters))}"
            rows.append(f"{nid} {core.role_name:<11} epoch={core.epoch} "
                        f"leader={_opt(core.leader_id)} voted={_opt(e.voted_id)} "
                        f"hw={core.high_watermark} leo={log.end_offset}{extra} log=[{entries}]")  # fmt: skip
        return "\n".join(rows)

    # ------------------------------------------------------------------------------ time

    def _fire(self, node: Node) -> None:
        c = self.c
        c.now = max(c.now, node.core.next_deadline_ms())
        c.run(node, node.core.tick(c.now))

    def cmd_campaign(self, cmd: Command) -> str:
        """campaign <id>: <id>'s election timer fires now (the clock jumps to it)."""
        cmd.check(1)
        node = self.node(cmd)
        if node.core.role_name not in _ELECTION_ROLES:
            raise TranscriptError(f"line {cmd.line}: {node.node_id} is {node.core.role_name}; "
                                  "only a node without a leader has an election timer")  # fmt: skip
        self._fire(node)
        return f"t={self.c.now}"

    def cmd_tick(self, cmd: Command) -> str:
        """tick <id>: <id>'s next timer (of whatever kind) fires now."""
        cmd.check(1)
        self._fire(self.node(cmd))
        return f"t={self.c.now}"

    def cmd_advance(self, cmd: Command) -> str:
        """advance <ms> [trace]: run timers and deliveries for <ms> of simulated time."""
        cmd.check((1, 2))
        c = self.c
        if cmd.args[1:] not in ((), ("trace",)):
            raise TranscriptError(f"line {cmd.line}: advance <ms> [trace]")
        c.trace, c.advancing = cmd.args[1:] == ("trace",), True
        end = c.now + cmd.int_arg(0)
        try:
            for _ in range(100_000):
                up = [n for n in c.nodes.values() if n.up]
                t_tick = min((n.core.next_deadline_ms() for n in up), default=1 << 62)
                t_msg = c.queue[0][0] if c.queue else 1 << 62
                if min(t_tick, t_msg) > end:
                    break
                c.step()
            else:
                raise TranscriptError(f"line {cmd.line}: no quiescence while advancing")
        finally:
            c.trace, c.advancing = True, False
        c.now = end
        return f"t={c.now}"

    # -------------------------------------------------------------------------- messages

    def _filters(self, cmd: Command) -> tuple[set[int] | None, set[int] | None]:
        src, dst = cmd.ints("from"), cmd.ints("to")
        return (set(src) or None), (set(dst) or None)

    def cmd_deliver(self, cmd: Command) -> str | None:
        """deliver [from=..] [to=..]: deliver the messages queued now (not those they cause)."""
        cmd.check(0, frozenset({"from", "to"}))
        picked = self.c.take(*self._filters(cmd))
        for item in picked:
            self.c.deliver(item)
        return None if picked else "(no messages)"

    def cmd_stabilize(self, cmd: Command) -> str | None:
        """stabilize: deliver until no message is in flight (timers do not fire)."""
        cmd.check(0)
        delivered = 0
        while self.c.queue:
            for item in self.c.take(None, None):
                self.c.deliver(item)
                delivered += 1
            if delivered > 10_000:
                raise TranscriptError(f"line {cmd.line}: messages never stop")
        return None if delivered else "(no messages)"

    def cmd_drop(self, cmd: Command) -> str:
        """drop [from=..] [to=..]: lose the queued messages matching the filters."""
        cmd.check(0, frozenset({"from", "to"}))
        picked = self.c.take(*self._filters(cmd))
        lines = [f"{s}->{d} {fmt_message(m)} (dropped)" for _, _, s, d, m in picked]
        return "\n".join(lines) or "(no messages)"

    def cmd_msgs(self, cmd: Command) -> str:
        """msgs: list the messages in flight, in delivery order."""
        cmd.check(0)
        lines = [f"{s}->{d} {fmt_message(m)}" for _, _, s, d, m in sorted(self.c.queue)]
        return "\n".join(lines) or "(no messages)"

    # ---------------------------------------------------------------------------- faults

    def _groups(self, cmd: Command) -> Iterator[tuple[int, int]]:
        groups = [set(int(x) for x in g.split(",")) for g in cmd.args]
        for i, a in enumerate(groups):
            for b in groups[i + 1 :]:
                for x in a:
                    for y in b:
                        yield x, y

    def cmd_partition(self, cmd: Command) -> None:
        """partition <a,b> <c,d> ...: cut every link between nodes of different groups."""
        cmd.check((2, 9))
        for x, y in self._groups(cmd):
            self.c.cut |= {(x, y), (y, x)}

    def cmd_isolate(self, cmd: Command) -> None:
        """isolate <id>: cut every link to and from <id>."""
        cmd.check(1)
        self.c.isolate(self.node(cmd).node_id)

    def cmd_heal(self, cmd: Command) -> None:
        cmd.check(0)
        self.c.heal()

    def cmd_crash(self, cmd: Command) -> None:
        """crash <id>: the node stops; what its log had not fsynced is lost."""
        cmd.check(1)
        self.c.stop(self.node(cmd).node_id)

    def cmd_restart(self, cmd: Command) -> str:
        """restart <id>: a new core from the node's log and persisted election state."""
        cmd.check(1)
        node = self.c.restart(self.node(cmd).node_id)
        self.c.remember(node.node_id, node)
        return View.of(node).describe(node.node_id).replace(" becomes ", " restarts as ", 1)

    # ------------------------------------------------------------------------------ API

    def cmd_propose(self, cmd: Command) -> str:
        """propose <id> <value>...: one batch through RaftCore.propose."""
        cmd.check((2, 50))
        node = self.node(cmd)
        result, effects = node.core.propose([v.encode() for v in cmd.args[1:]], self.c.now)
        self.c.run(node, effects)
        if isinstance(result, Accepted):
            return f"accepted offsets {result.first_offset}..{result.last_offset} in epoch {result.epoch}"
        return f"not leader: leader={_opt(result.leader_id)} epoch={result.epoch}"

    def _voter_change(self, cmd: Command, call: str) -> None:
        cmd.check(2)
        node, target = self.node(cmd), cmd.int_arg(1)
        self.requests += 1
        core = node.core
        if call == "add":
            effects = core.add_voter(self.requests, Voter(target), self.c.now)
        else:
            effects = core.remove_voter(self.requests, target, self.c.now)
        self.c.out.append(f"r{self.requests}: {call} voter {target} at {node.node_id}")
        self.c.run(node, effects)

    def cmd_add_voter(self, cmd: Command) -> None:
        """add-voter <leader> <id>: AddRaftVoter request r<n> (KIP-853) to <leader>."""
        self._voter_change(cmd, "add")

    def cmd_remove_voter(self, cmd: Command) -> None:
        """remove-voter <leader> <id>: RemoveRaftVoter request r<n> (KIP-853) to <leader>."""
        self._voter_change(cmd, "remove")

    def cmd_resign(self, cmd: Command) -> None:
        """resign <id>: graceful step-down (EndQuorumEpoch to the successors by LEO)."""
        cmd.check(1)
        node = self.node(cmd)
        self.c.run(node, node.core.resign(self.c.now))

    def cmd_snapshot(self, cmd: Command) -> None:
        """snapshot <id>...: each node writes a snapshot at its HW (the committed values) and
        tells its core (RaftCore.snapshot_taken), which may delete the log prefix below it."""
        cmd.check((1, 9))
        for i in range(len(cmd.args)):
            node = self.node(cmd, i)
            hw = node.core.high_watermark
            epoch = node.log.read(hw - 1, 1)[0].epoch
            snap = OffsetAndEpoch(hw, epoch)
            data = b",".join(d for _, (_, d, control) in sorted(node.committed.items())
                             if not control)  # fmt: skip
            node.log.write_snapshot(snap, data)
            self.c.out.append(
                f"{node.node_id} writes snapshot {fmt_oe(snap)} data={data.decode()!r}"
            )
            self.c.run(node, node.core.snapshot_taken(snap, self.c.now))


_CONFIG_FIELDS = frozenset(f.name for f in dataclasses.fields(RaftConfig))


def _number(raw: str) -> int | float:
    return float(raw) if "." in raw else int(raw)
