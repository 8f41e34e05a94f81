"""The data-partition transcript environment: ReplicaCores over tests/replica/router.py (simulated
disks, PartitionLog, the controller model answering AlterPartition), driven one command at a time.

Fetches are delivered by hand (`fetch 2`), time moves by `advance`, the controller acts by
`elect`, and every command prints what it changed, in causal order: role changes, high
watermarks, truncations, AlterPartition proposals and the controller's answers, produce answers.
Commands: see README.md.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from partition.log import batch as rb
from partition.replica import (
    ACKS_ALL,
    ACKS_LEADER,
    ACKS_NONE,
    CompleteProduce,
    Effect,
    FetchResponse,
    LeadershipChanged,
    ReplicaConfig,
    SendAlterPartition,
    TruncateFully,
    TruncateTo,
    UpdateHighWatermark,
)
from quorum.controller.messages import AlterPartitionResponse
from quorum.metadata.errors import Errors
from quorum.metadata.records import LeaderRecoveryState
from tests.replica.router import T0_MS, Cluster, Node
from tests.transcripts.datadriven import Command, TranscriptError

_ACKS = {"all": ACKS_ALL, "-1": ACKS_ALL, "1": ACKS_LEADER, "0": ACKS_NONE}
_CONFIG_KEYS = {
    "min.insync.replicas": "min_insync_replicas",
    "leader.epoch.enable": "leader_epoch_enable",
    "replica.lag.time.max.ms": "replica_lag_time_max_ms",
}


def _ids(ids: tuple[int, ...] | list[int]) -> str:
    return ",".join(map(str, ids))


def fmt_records(data: bytes) -> str:
    """`offset:epoch:value` of every record in raw batch bytes."""
    out = []
    for h in rb.iter_headers(data, check_crc=False):
        for r in rb.decode_records(data, h):
            out.append(f"{r.offset}:{h.partition_leader_epoch}:{(r.value or b'').decode()}")
    return " ".join(out)


class TranscriptCluster(Cluster):
    """The router's Cluster, reporting what each executed effect list changed to `out`."""

    def __init__(self, **kwargs: Any) -> None:
        self.out: list[str] = []
        self.hws: dict[int, int] = {}
        super().__init__(**kwargs)

    def execute(self, node_id: int, effects: list[Effect]) -> None:
        node = self.nodes[node_id]
        for e in effects:
            match e:
                case LeadershipChanged(leader_id=leader, leader_epoch=epoch, is_self=is_self):
                    if is_self:
                        what = "leader"
                    elif leader < 0:
                        what = "offline"
                    else:
                        what = f"follower of {leader}"
                    self.out.append(f"{node_id} becomes {what} in epoch {epoch}")
                case TruncateTo(offset=offset):
                    self.out.append(f"{node_id} truncates its log from {node.log.log_end_offset}"
                                    f" to {offset}")  # fmt: skip
                case TruncateFully(start_offset=start):
                    self.out.append(f"{node_id} empties its log, restarting it at {start}")
                case SendAlterPartition(request=req):
                    isr = _ids([m.broker_id for m in req.new_isr_with_epochs])
                    recovered = ""
                    if self.partition.leader_recovery_state != req.leader_recovery_state:
                        state = req.leader_recovery_state == LeaderRecoveryState.RECOVERED
                        recovered = (
                            f" leader_recovery_state={'RECOVERED' if state else 'RECOVERING'}"
                        )
                    self.out.append(f"{node_id} sends AlterPartition isr={isr} "
                                    f"partition_epoch={req.partition_epoch}{recovered}")  # fmt: skip
                case UpdateHighWatermark(high_watermark=hw):
                    self.out.append(f"{node_id} hw {self.hws.get(node_id)} -> {hw}")
                    self.hws[node_id] = hw
                case CompleteProduce(response=resp):
                    offsets = f" offsets {resp.base_offset}..{resp.last_offset}"
                    self.out.append(f"r{resp.request_id} answered {resp.error.name}"
                                    f"{offsets if resp.base_offset >= 0 else ''}")  # fmt: skip
        super().execute(node_id, effects)
        self.report_hw(node_id)

    def report_hw(self, node_id: int) -> None:
        """A HW change no UpdateHighWatermark announced: a truncation below it."""
        hw = self.nodes[node_id].core.high_watermark
        before = self.hws.get(node_id)
        if before is not None and hw != before:
            self.out.append(f"{node_id} hw {before} -> {hw}")
        self.hws[node_id] = hw

    def step(self, node_id: int, message: Any) -> list[Effect]:
        if isinstance(message, AlterPartitionResponse):
            if message.error is Errors.NONE:
                self.out.append(f"controller commits isr={_ids(message.isr)} "
                                f"partition_epoch={message.partition_epoch}")  # fmt: skip
            else:
                self.out.append(f"controller refuses AlterPartition: {message.error.name}")
        return super().step(node_id, message)


class PartitionEnv:
    def __init__(self) -> None:
        self._c: TranscriptCluster | None = None

    @property
    def c(self) -> TranscriptCluster:
        if self._c is None:
            raise TranscriptError("no partition yet: start with replicas")
        return self._c

    def handle(self, cmd: Command) -> str:
        handler = getattr(self, "cmd_" + cmd.name.replace("-", "_"), None)
        if handler is None:
            raise TranscriptError(f"line {cmd.line}: unknown partition command {cmd.name!r}")
        if self._c is not None:
            self._c.out = []
        result: str | None = handler(cmd)
        lines = list(self._c.out) if self._c is not None else []
        if result:
            lines.insert(0, result)
        return "\n".join(lines)

    def node_id(self, cmd: Command, index: int = 0) -> int:
        nid = cmd.int_arg(index)
        if nid not in self.c.nodes:
            raise TranscriptError(f"line {cmd.line}: no replica {nid}")
        return nid

    # ------------------------------------------------------------------------------ setup

    def cmd_replicas(self, cmd: Command) -> str:
        """replicas <id>... [leader=] [isr=] [min.insync.replicas=] [leader.epoch.enable=]
        [replica.lag.time.max.ms=]: a partition at leader epoch 0 (time T0), metadata published."""
        cmd.check((1, 9), frozenset({"leader", "isr"} | set(_CONFIG_KEYS)))
        replicas = tuple(cmd.int_arg(i) for i in range(len(cmd.args)))
        overrides: dict[str, Any] = {}
        for key, field in _CONFIG_KEYS.items():
            if key in cmd.kwargs:
                raw = cmd.kwargs[key]
                overrides[field] = raw == "true" if raw in ("true", "false") else int(raw)
        config = ReplicaConfig(replica_fetch_wait_max_ms=0, **overrides)
        leader = int(cmd.kwargs["leader"]) if "leader" in cmd.kwargs else None
        isr = cmd.ints("isr") or None
        self._c = TranscriptCluster(replicas=replicas, config=config, leader=leader, isr=isr)
        for nid in replicas:
            self.c.hws[nid] = self.c.nodes[nid].core.high_watermark
        return ""

    def cmd_status(self, cmd: Command) -> str:
        """The controller's partition state, then one line per replica (the leader also lists
        the LEO it holds for each follower: `remote_leo`, "?" until that follower fetched)."""
        cmd.check(0)
        c = self.c
        p = c.partition
        recovering = (" recovering" if p.leader_recovery_state == LeaderRecoveryState.RECOVERING
                      else "")  # fmt: skip
        rows = [f"controller leader={p.leader} leader_epoch={p.leader_epoch} "
                f"partition_epoch={p.partition_epoch} isr={_ids(p.isr)}{recovering}"]  # fmt: skip
        for nid, node in sorted(c.nodes.items()):
            if not node.up:
                rows.append(f"{nid} down")
                continue
            s = node.core.status()
            log = " ".join(f"{o}:{e}:{v.decode()}" for o, e, v in node.entries())
            row = (f"{nid} {s.role:<8} epoch={s.leader_epoch} leo={s.log_end_offset} "
                   f"hw={s.high_watermark} isr={_ids(s.isr)}")  # fmt: skip
            if s.role == "leader":
                remote = " ".join(f"{f.replica_id}:{f.log_end_offset if f.log_end_offset >= 0 else '?'}"
                                  for f in s.followers)  # fmt: skip
                row += f" remote_leo=[{remote}]"
            rows.append(f"{row} log=[{log}]")
        return "\n".join(rows)

    # -------------------------------------------------------------------------- traffic

    def cmd_produce(self, cmd: Command) -> str:
        """produce <value>... [acks=all|1|0] [timeout=<ms>] [to=<id>]: one batch."""
        cmd.check((1, 50), frozenset({"acks", "timeout", "to"}))
        acks = _ACKS.get(cmd.kwargs.get("acks", "all"))
        if acks is None:
            raise TranscriptError(f"line {cmd.line}: acks must be all, 1 or 0")
        to = int(cmd.kwargs["to"]) if "to" in cmd.kwargs else self.c.partition.leader
        rid = self.c.next_request_id
        self.c.out.append(
            f"r{rid} produce [{' '.join(cmd.args)}] acks={cmd.kwargs.get('acks', 'all')} to {to}"
        )
        self.c.produce(*cmd.args, acks=acks, timeout_ms=int(cmd.kwargs.get("timeout", "30000")),
                       to=to)  # fmt: skip
        return ""

    def _fetch_line(self, follower: int, lost: bool) -> tuple[str, FetchResponse | None]:
        node = self.c.nodes[follower]
        if not node.outbox:
            self.c.tick(follower)
        if not node.outbox:
            return f"{follower} has no fetch to send", None
        req = node.outbox[0]
        head = (f"{follower} fetch offset={req.fetch_offset} last_epoch={req.last_fetched_epoch} "
                f"epoch={req.current_leader_epoch}")  # fmt: skip
        index = len(self.c.out)
        resp = self.c.fetch(follower, deliver_response=not lost)
        if resp is None:
            line = f"{head} -> no answer (leader {self.c.partition.leader} is down)"
        elif resp.error is not Errors.NONE:
            line = f"{head} -> {resp.error.name} leader={resp.leader_id} epoch={resp.leader_epoch}"
        elif resp.diverging_epoch is not None:
            d = resp.diverging_epoch
            line = f"{head} -> diverging epoch={d.epoch} end_offset={d.end_offset}"
        else:
            line = f"{head} -> hw={resp.high_watermark} records=[{fmt_records(resp.records)}]"
        if lost and resp is not None:
            line += " (response lost)"
        self.c.out.insert(index, line)
        return line, resp

    def cmd_fetch(self, cmd: Command) -> None:
        """fetch <id> [lost]: deliver <id>'s fetch to the leader (ticking <id> first if none is
        in flight) and the answer back, unless `lost`."""
        cmd.check((1, 2))
        lost = cmd.args[1:] == ("lost",)
        if len(cmd.args) == 2 and not lost:
            raise TranscriptError(f"line {cmd.line}: fetch <id> [lost]")
        self._fetch_line(self.node_id(cmd), lost)

    def cmd_catch_up(self, cmd: Command) -> None:
        """catch-up <id>: fetch until an answer brings nothing new (at most 20 fetches)."""
        cmd.check(1)
        follower = self.node_id(cmd)
        for _ in range(20):
            _, resp = self._fetch_line(follower, lost=False)
            if resp is None or (not resp.records and resp.diverging_epoch is None
                                and resp.error is Errors.NONE
                                and self.c.nodes[follower].core.high_watermark
                                >= resp.high_watermark):  # fmt: skip
                return
        raise TranscriptError(f"line {cmd.line}: {follower} still catching up after 20 fetches")

    def cmd_consume(self, cmd: Command) -> str:
        """consume [offset=0]: a consumer fetch from the leader (reads below the HW only)."""
        cmd.check(0, frozenset({"offset"}))
        offset = int(cmd.kwargs.get("offset", "0"))
        resp = self.c.consume(offset)
        if resp is None:
            return "no answer"
        if resp.error is not Errors.NONE:
            return f"consumer fetch offset={offset} -> {resp.error.name}"
        return f"consumer fetch offset={offset} -> hw={resp.high_watermark} records=[{fmt_records(resp.records)}]"

    def cmd_advance(self, cmd: Command) -> str:
        """advance <ms>: the clock moves, then every live replica's timers fire once."""
        cmd.check(1)
        self.c.advance(cmd.int_arg(0))
        return f"t=T0+{self.c.now_ms - T0_MS}"

    # ------------------------------------------------------------------- controller, faults

    def cmd_elect(self, cmd: Command) -> str:
        """elect <id> [isr=..] [to=..] [unclean]: the controller makes <id> leader at the next
        leader epoch and publishes it (to the live replicas, or only to those in `to=`).
        `unclean`: <id> is not in the ISR (unclean.leader.election.enable), so the partition is
        RECOVERING until the new leader says otherwise (KIP-704)."""
        cmd.check((1, 2), frozenset({"isr", "to"}))
        leader = self.node_id(cmd)
        unclean = cmd.args[1:] == ("unclean",)
        if len(cmd.args) == 2 and not unclean:
            raise TranscriptError(f"line {cmd.line}: elect <id> [isr=..] [unclean]")
        c = self.c
        if unclean:
            c.partition = dataclasses.replace(
                c.partition, leader_recovery_state=LeaderRecoveryState.RECOVERING
            )
        isr = cmd.ints("isr") or None
        p = c.partition
        self.c.out.append(f"controller elects {leader} leader_epoch={p.leader_epoch + 1} "
                          f"isr={_ids(isr or p.isr)}{' (unclean)' if unclean else ''}")  # fmt: skip
        c.elect(leader, isr=isr, publish=False)
        c.publish(cmd.ints("to") or None)
        return ""

    def cmd_publish(self, cmd: Command) -> None:
        """publish <id>...: the controller's current partition state reaches these replicas
        (after `elect ... to=`, a replica cut off from the controller catching up)."""
        cmd.check((1, 9))
        self.c.publish(tuple(self.node_id(cmd, i) for i in range(len(cmd.args))))

    def cmd_crash(self, cmd: Command) -> None:
        """crash <id>: power loss; what the log had not fsynced is gone."""
        cmd.check(1)
        self.c.crash(self.node_id(cmd))

    def cmd_flush(self, cmd: Command) -> None:
        """flush <id>: fsync the replica's log (Kafka flushes on its own schedule)."""
        cmd.check(1)
        self.c.nodes[self.node_id(cmd)].log.flush()

    def cmd_restart(self, cmd: Command) -> str:
        """restart <id> hw=<n>: recover the log from disk, with <n> in the HW checkpoint."""
        cmd.check(1, frozenset({"hw"}))
        if "hw" not in cmd.kwargs:
            raise TranscriptError(f"line {cmd.line}: restart <id> hw=<checkpointed HW>")
        nid = self.node_id(cmd)
        node = self.c.restart(nid, int(cmd.kwargs["hw"]), publish=False)
        self.c.hws[nid] = node.core.high_watermark
        line = f"{nid} recovers leo={node.core.log_end_offset} hw={node.core.high_watermark}"
        self.c.out.append(line)
        self.c.publish((nid,))
        return ""

    def cmd_clean_restart(self, cmd: Command) -> None:
        """clean-restart <id>: flush, checkpoint the HW, stop and start again."""
        cmd.check(1)
        nid = self.node_id(cmd)
        node: Node = self.c.clean_restart(nid, publish=False)
        self.c.hws[nid] = node.core.high_watermark
        self.c.out.append(f"{nid} recovers leo={node.core.log_end_offset} "
                          f"hw={node.core.high_watermark}")  # fmt: skip
        self.c.publish((nid,))
