"""The asyncio driver of one controller: feeds the sans-IO Raft core, runs its effects for real.

Shape (aioquic's asyncio adapter): every input (a message from the transport, a timer,
a proposal batch, a read barrier, a refused connection) goes `core.<input>(..., now_ms)` ->
`execute_effects(effects, env)` (harness/drive/effects.py, the same function the simulator uses) ->
re-arm ONE timer (a harness/loop Timer on the node's clock) at `core.next_deadline_ms()`. Effects run synchronously and in order
before the core sees its next input: that order is the durability contract (a vote or fetch is
never sent before the fsync it depends on).

The helpers around the node (broker.py, replica_manager.py, controller_rpc.py, client_requests.py,
status.py, metrics.py) and the listeners composed beside it by the process (harness/kafka,
harness/admin: harness/node/__main__.py) see it through the protocols of context.py, never this
class: this module imports them, they never import it.

This module is the `env` of execute_effects: sends go to the transport, log effects to the
RaftLogStore (real fsync), the quorum-state file is replaced atomically, committed entries are
applied to the MetadataImage and resolve proposal waiters.

Controllers also run the hung-leader probe (harness/net/liveness.py): a thread answers UDP pings,
and a follower whose leader leaves one unanswered for kraftlab.quorum.liveness.timeout.ms feeds
`peer_unreachable(leader)` to the core, as for a refused connection.

Invariants:
- Proposals are batched: all `submit()` calls made while one delivery is held (the frames of one
  chunk a connection read, or one step: harness/net/transport.py) become ONE `core.propose` (one
  append, one fsync) at its release; outside a delivery, all made before the loop runs
  `_flush_proposals` (a `Soon`, harness/loop).
- Deferred work (the proposal flush, a follower's apply after its Fetch left, the prefix deletion
  after a snapshot, the core's timer, a proposal's timeout) runs through harness/loop with
  `crash` as its on_error: an exception in it stops the process as one in `_step` does.
- A proposal waiter resolves only when its offset is applied, with the image's ApplyResult. If
  this node stops leading first, the waiter fails as indeterminate (OutcomeUnknownError): the
  entry may still commit under the next leader.
- A linearizable read is answered only after a read barrier completed (a majority confirmed this
  leader after the read arrived) AND the image applied everything below the barrier's HW.
- Snapshots are taken of the image at its applied offset (always <= HW), when
  image_snapshots.py says one is due (records, bytes or time since the last, KIP-876); the image
  is restored from the newest snapshot at start and when the leader sends one (KIP-630).
"""

from __future__ import annotations

import asyncio
import os
import sys
import typing
from collections import deque
from dataclasses import dataclass
from typing import Any, NoReturn, assert_never

import structlog

from harness.drive.effects import execute_effects
from harness.loop import Soon, Timer, run_later, run_soon
from harness.net.liveness import LivenessProbe
from harness.net.transport import FrameError, Transport
from harness.runtime.broker import BrokerLifecycle
from harness.runtime.client_requests import answer_client_request
from harness.runtime.clock import NodeClock
from harness.runtime.config import NodeConfig
from harness.runtime.context import (
    NotLeaderError,
    OutcomeUnknownError,
    ResultSink,
    VoterChangeError,
)
from harness.runtime.controller_rpc import (
    ActiveController,
    ControllerRpcRequest,
    ControllerRpcResponse,
    ControllerRpcServer,
)
from harness.runtime.file_storage import FileStorage
from harness.runtime.image_snapshots import ImageSnapshots, log_dropped_snapshots, restore_image
from harness.runtime.metrics import LatencyWindow, MetadataCounters, NodeMetrics
from harness.runtime.quorum_state import QuorumStateFile
from harness.runtime.replica_manager import ReplicaFetchBatch, ReplicaFetchBatchResponse
from harness.runtime.status import quorum_replication, quorum_status
from partition.log.config import LogConfig
from partition.raft import RaftEnvelope
from partition.raft.log import RaftLogStore
from quorum import codec
from quorum.metadata import (
    DecodeError,
    ImageError,
    KvCas,
    KvDelete,
    KvPut,
    encode_record,
)
from quorum.metadata.image import ApplyResult
from quorum.raft import QuorumStatus
from quorum.raft.config import RaftConfig
from quorum.raft.core import Accepted, NotLeader, RaftCore
from quorum.raft.effects import (
    ElectionState,
    LeaderChanged,
    ReadBarrierCompleted,
    ReadBarrierFailed,
    VoterChangeCompleted,
)
from quorum.raft.log import Entry, OffsetAndEpoch
from quorum.raft.messages import ErrorCode, RaftMessage, RaftRequest, RaftResponse
from quorum.raft.snapshot import decode_snapshot
from quorum.raft.voters import Voter, VotersRecord

log = structlog.get_logger()

_KV_VALUE_TYPES = (str, bytes)


def _decodes_as_itself(record: Any) -> bool:
    """Whether decoding `record`'s encoding gives `record` back: a key/value record whose fields
    have exactly the types the codec accepts (KvValue = str | bytes). Only such a record may be
    applied by the leader without decoding its entry: anything else must meet the decode every
    other replica's apply (and every replay) does, or the images would differ."""
    t = type(record)
    if t is KvPut:
        return type(record.key) is str and type(record.value) in _KV_VALUE_TYPES
    if t is KvCas:
        return (type(record.key) is str and type(record.value) in _KV_VALUE_TYPES
                and (record.expected is None or type(record.expected) in _KV_VALUE_TYPES))
    return t is KvDelete and type(record.key) is str
_RAFT_MESSAGE_TYPES = frozenset(typing.get_args(RaftRequest) + typing.get_args(RaftResponse))

# Entries read from the log per apply step (bytes), so catching up never builds one huge list.
APPLY_READ_BYTES = 4 << 20


@dataclass(slots=True)
class _Waiter:
    future: ResultSink
    epoch: int
    started: float
    # The proposal's bytes and, for a key/value write, the record they were encoded from: the
    # apply of the leader's own entry (the same bytes object) skips decoding them again.
    data: bytes
    record: Any


def raft_config(config: NodeConfig) -> RaftConfig:
    return RaftConfig(
        election_timeout_ms=config.election_timeout_ms,
        fetch_timeout_ms=config.fetch_timeout_ms,
        election_backoff_max_ms=config.election_backoff_max_ms,
        request_timeout_ms=config.request_timeout_ms,
        retry_backoff_ms=config.retry_backoff_ms,
        append_linger_ms=config.append_linger_ms,
        max_idle_interval_ms=config.max_idle_interval_ms,
        snapshot_retention_entries=config.snapshot_retention_records,
        flush_on_append=bool(config.fsync),
        hw_linger_ms=config.hw_linger_ms,
        spare_voter_linger_ms=config.spare_voter_linger_ms,
    )



def _expire(future: asyncio.Future[Any], timeout_ms: int) -> None:
    """`ControllerNode.propose`'s timer: the record was not applied in time; whether it will
    still commit is unknown to the caller."""
    if not future.done():
        future.set_exception(OutcomeUnknownError(f"not committed within {timeout_ms} ms"))

class ControllerNode:
    """One node process: Raft core + log + image + transport, on the running loop.

    A controller (`process.roles=controller`) is a voter and, while it leads, the active
    controller (controller_rpc.ActiveController). A broker (`process.roles=broker`) runs the same
    core as an observer (its node id is not a voter) plus the broker lifecycle (broker.py)."""

    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.cluster_id = config.cluster_id
        # Read first: a node that must protect its admin API but has no token does not start.
        self.admin_token = config.read_admin_token()
        self.loop = asyncio.get_running_loop()
        self.clock = NodeClock(self.loop)  # skewed only by the clock nemesis (clock.py)
        config.quorum_state_path.parent.mkdir(parents=True, exist_ok=True)
        self.quorum_state = QuorumStateFile(config.quorum_state_path, config.cluster_id)
        self.log = RaftLogStore.open(
            FileStorage(),
            str(config.metadata_log_dir),
            LogConfig(segment_bytes=config.metadata_log_segment_bytes),
            validate=decode_snapshot,
        )
        log_dropped_snapshots(self.log)
        self.image = restore_image(self.log)
        # Elections and ISR changes from applied records (harness/runtime/metrics.py); what is
        # already in the log at start is replayed, not counted.
        self.metadata_counters = MetadataCounters(config.node_id, self.log.end_offset)
        self.metadata_counters.seed(self.image)
        self.high_watermark = 0
        self._was_leader = False
        self._waiters: dict[int, _Waiter] = {}
        self._proposals: list[tuple[bytes, ResultSink, Any]] = []
        self._apply_soon = Soon(self.loop, self._apply_committed, on_error=self.crash)
        self._proposal_soon = Soon(self.loop, self._flush_proposals, on_error=self.crash)
        self._reads: dict[int, asyncio.Future[int]] = {}
        self._reads_waiting_apply: deque[tuple[int, asyncio.Future[int]]] = deque()
        self._next_read_id = 1
        self._timer = Timer(self.clock, self._on_timer, on_error=self.crash)
        self._heard_s: dict[int, float] = {}  # loop time of the last Raft message from each peer
        self.commit_latency = LatencyWindow()
        self.started_ms = self.now_ms()
        self.snapshots = ImageSnapshots(config, self.started_ms)
        election_state = self.quorum_state.read()
        self.core = RaftCore(
            raft_config(config),
            config.node_id,
            tuple(sorted(config.voters)),
            self.log,
            election_state,
            config.seed if config.seed >= 0 else int.from_bytes(os.urandom(8), "big"),
            self.now_ms(),
            voter_endpoints={i: f"{e.host}:{e.port}" for i, e in config.voters.items()},
        )
        self._voter_changes: dict[int, asyncio.Future[None]] = {}
        self._next_voter_change_id = 1
        self.transport = Transport(
            cluster_id=config.cluster_id,
            node_id=config.node_id,
            host=config.rpc_endpoint.host,
            port=config.rpc_endpoint.port,
            peers={i: (e.host, e.port) for i, e in config.voters.items()},
            on_message=self._on_message,
            on_unreachable=self._on_unreachable,
            encode=codec.encode,
            decode=codec.decode,
            decode_errors=(codec.DecodeError,),
            on_error=self.crash,
            on_client_request=self.on_client_request,
        )
        self.transport.on_delivered = self._on_delivered
        self.on_voters_changed(self.core.voters_record)  # the log may know voters config does not
        self.active: ActiveController | None = None
        self.rpc_server: ControllerRpcServer | None = None
        self.broker: BrokerLifecycle | None = None
        self.liveness = None if config.is_broker else self._liveness_probe(config)
        if config.is_broker:
            self.broker = BrokerLifecycle(self)
        else:
            self.active = ActiveController(self)
            self.rpc_server = ControllerRpcServer(self, self.active)
        self._bound_role = self.core.role
        self.metrics = NodeMetrics(self)
        structlog.contextvars.bind_contextvars(
            node_id=config.node_id, epoch=self.epoch, role=self.role
        )

    def _liveness_probe(self, config: NodeConfig) -> LivenessProbe | None:
        """The hung-leader probe of a controller (harness/net/liveness.py), unless turned off
        or alone. Its UDP port taken by another program is no reason to refuse to start: the
        fetch timeout still finds a hung leader, as in Kafka."""
        if config.liveness_timeout_ms <= 0 or len(config.voters) < 2:
            return None
        try:
            return LivenessProbe(
                node_id=config.node_id,
                host=config.rpc_endpoint.host,
                port=config.rpc_endpoint.port,
                interval_ms=config.liveness_interval_ms,
                timeout_ms=config.liveness_timeout_ms,
                loop=self.loop,
                on_unresponsive=self._on_leader_unresponsive,
                is_dropped=lambda peer: peer in self.transport.links.drop,
            )
        except OSError as exc:
            log.warning("node.liveness_probe_off", error=str(exc))
            return None

    # --- clock ------------------------------------------------------------------------------

    def now_ms(self) -> int:
        return self.clock.now_ms()

    def wall_ms(self, mono_ms: int) -> int:
        """A core timestamp (loop clock) as Unix epoch ms, for the API (KIP-836 timestamps)."""
        return self.clock.wall_ms(mono_ms)

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        await self.transport.start()
        if self.liveness is not None:
            self.liveness.start()
        self._step(self.core.tick)
        self._watch_leader(self.core.leader_id, self.core.is_leader)  # a restart may follow at once
        if self.broker is not None:
            self.broker.start()
        log.info("node.started", voters=sorted(self.config.voters), epoch=self.epoch,
                 process_roles=self.config.process_roles)

    async def stop(self, *, resign: bool) -> None:
        """Graceful shutdown: resign (EndQuorumEpoch to the others, KIP-595) then close."""
        if self.broker is not None:
            await self.broker.controlled_shutdown()
            await self.broker.close()
        if self.active is not None:
            self.active.stop("node shutting down")
        if resign and self.active is not None:
            self._step(self.core.resign)
            for _ in range(3):
                await asyncio.sleep(0)  # let the transport flush EndQuorumEpoch
        self._fail_waiters("node shutting down")
        self._timer.cancel()
        if self.liveness is not None:
            self.liveness.stop()
        await self.transport.close()
        self.log.close()

    # --- inputs -----------------------------------------------------------------------------

    def _on_message(self, src: int, message: Any) -> None:
        if type(message) in _RAFT_MESSAGE_TYPES:  # nearly every frame: straight to the core
            self._heard_s[src] = self.loop.time()
            self._step(self.core.handle, src, message)
            return
        if isinstance(message, ControllerRpcRequest):
            if self.rpc_server is None:
                raise FrameError("a broker does not serve controller requests")
            self.rpc_server.on_request(src, message)
            return
        if isinstance(message, ControllerRpcResponse):
            if self.broker is not None:
                self.broker.on_response(message)
            elif self.rpc_server is not None:
                self.rpc_server.on_response(message)
            return
        if isinstance(message, RaftEnvelope):
            if self.broker is None:
                raise FrameError("a controller hosts no raft partitions")
            self.broker.replicas.on_raft_envelope(src, message)
            return
        if isinstance(message, ReplicaFetchBatch | ReplicaFetchBatchResponse):
            if self.broker is None:
                raise FrameError("a controller hosts no data replicas")
            if isinstance(message, ReplicaFetchBatch):
                self.broker.replicas.on_fetch_batch(src, message)
            else:
                self.broker.replicas.on_fetch_batch_response(src, message)
            return
        if not isinstance(message, RaftMessage):
            # A well-formed frame of a type peers never send: the peer is broken, not us.
            raise FrameError(f"{type(message).__name__} is not a Raft message")
        self._heard_s[src] = self.loop.time()
        self._step(self.core.handle, src, message)

    def _on_unreachable(self, peer: int) -> None:
        self._step(self.core.peer_unreachable, peer)
        if self.broker is not None:
            self.broker.replicas.raft.peer_unreachable(peer)

    def _on_leader_unresponsive(self, peer: int) -> None:
        """The liveness probe's report (harness/net/liveness.py): the leader's process left a
        ping unanswered for the timeout, i.e. it is hung, not slow. Handled as a refused
        connection: a voter following it starts a pre-vote now (its header has why that is safe)."""
        if self.core.leader_id != peer or self.core.is_leader:
            return
        heard = self._heard_s.get(peer)
        timeout_ms = self.config.liveness_timeout_ms
        if heard is not None and (self.loop.time() - heard) * 1000 < timeout_ms:
            return  # it still sends us Raft messages: its pings are late, it is not hung
        log.warning("node.leader_unresponsive", leader_id=peer, timeout_ms=timeout_ms)
        self._step(self.core.peer_unreachable, peer)

    def _on_timer(self) -> None:
        deadline = self.core.next_deadline_ms()
        if deadline > self.clock.now_ms():
            # The kept earlier timer (`_arm_timer`): the deadline it was armed for has moved
            # later (a parked Fetch was answered by an append). A tick now would do nothing.
            self._arm_timer(deadline)
            return
        self._step(self.core.tick)

    def _step(self, fn: Any, *args: Any) -> None:
        """Feed one input to the core and run its effects. Any exception here is a bug or a
        broken invariant (InvariantViolation): the process stops at once rather than run on with
        a core and a disk that may disagree (a broken invariant crashes a real node)."""
        try:
            self._run(fn(*args, self.clock.now_ms()))
        except Exception as exc:
            self.crash(exc)

    def crash(self, exc: BaseException) -> NoReturn:
        """A bug or a broken invariant (here or in a helper): log it and exit at once."""
        log.critical("node.crashed", error=f"{type(exc).__name__}: {exc}", exc_info=exc)
        sys.stderr.flush()
        os._exit(70)

    def _run(self, effects: list[Any]) -> None:
        if effects:
            # Held: the Sends of these effects (and answers they complete) are written when the
            # step ends, not one loop iteration later (harness/net/transport.py). Inside a
            # delivery (nearly every step) the transport is held already: its release writes.
            transport = self.transport
            if transport.held:
                execute_effects(effects, self)
            else:
                transport.hold()
                try:
                    execute_effects(effects, self)
                finally:
                    transport.release()
            if self.core.role is not self._bound_role:
                self._rebind_context()
        self._arm_timer()

    def _rebind_context(self) -> None:
        """Keep the log context (role, epoch) current: every line says who said it, when. Called
        after a transition (a new role object: every new epoch is one)."""
        core = self.core
        self._bound_role = core.role
        structlog.contextvars.bind_contextvars(role=core.role_name, epoch=core.epoch)

    def _arm_timer(self, deadline: int | None = None) -> None:
        if deadline is None:
            deadline = self.core.next_deadline_ms()
        armed = self._timer.deadline_ms
        if armed is not None and deadline is not None and armed <= deadline:
            # Keep the earlier timer: it fires early at worst, and a tick before a deadline does
            # nothing but re-arm. Deadlines move later on nearly every input (each fetch parks a
            # long poll, each answer restarts the fetch timeout): re-arming each time cost a
            # cancel and a call_at per message.
            return
        self._timer.set(deadline)

    # --- proposals and reads (called by the admin API) ----------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.core.is_leader

    @property
    def leader_id(self) -> int | None:
        return self.core.leader_id

    @property
    def epoch(self) -> int:
        return self.core.epoch

    @property
    def role(self) -> str:
        return self.core.role_name

    def raft_status(self) -> QuorumStatus:
        return self.core.status()

    def submit(self, record: Any) -> asyncio.Future[ApplyResult]:
        """Queue one metadata record for the next proposal batch; the future resolves with the
        image's ApplyResult once it is committed and applied. Raises NotLeaderError."""
        if not self.is_leader:
            raise NotLeaderError(self.leader_id, self.epoch)
        future: asyncio.Future[ApplyResult] = self.loop.create_future()
        self._queue_proposal(record, future)
        return future

    def submit_to(self, record: Any, sink: ResultSink) -> None:
        """`submit` without a future: `sink` is completed synchronously when the record is
        applied (or fails), so an answer can be written in the same loop iteration as the Fetch
        that committed it (harness/runtime/client_requests.py). Raises NotLeaderError."""
        if not self.is_leader:
            raise NotLeaderError(self.leader_id, self.epoch)
        self._queue_proposal(record, sink)

    def _queue_proposal(self, record: Any, sink: ResultSink) -> None:
        self._proposals.append((encode_record(record), sink, record if _decodes_as_itself(record) else None))
        if not self.transport.held:
            # Inside a delivery the release proposes (`_on_delivered`): every request of the
            # chunk in one batch, no extra pass of the loop.
            self._proposal_soon.schedule()

    async def propose(self, record: Any) -> ApplyResult:
        """Commit one metadata record; returns the image's result of applying it."""
        future = self.submit(record)
        # One timer on the future itself rather than asyncio.wait_for (a second future, a
        # callback and a cancellation per request on the admin API's write path). Whoever
        # completes the future later checks done() first (`_apply_entry`, `_fail_waiters`).
        timeout_ms = self.config.request_timeout_ms
        expiry = run_later(self.loop, timeout_ms, _expire, future, timeout_ms, on_error=self.crash)
        try:
            return await future
        finally:
            expiry.cancel()

    def _on_delivered(self) -> None:
        """The transport's release hook: propose what this delivery submitted."""
        if self._proposals:
            self._proposal_soon.run_now()
            if self._proposals:
                # Submitted while that batch ran (a quorum of one commits and applies within
                # it): no release follows this hook, so the loop's next pass proposes them.
                self._proposal_soon.schedule()

    def _flush_proposals(self) -> None:
        batch, self._proposals = self._proposals, []
        if not batch:
            return
        try:
            result, effects = self.core.propose(tuple([data for data, _, _ in batch]), self.clock.now_ms())
        except Exception as exc:
            self.crash(exc)
        match result:
            case Accepted(first_offset=base, epoch=epoch):
                started = self.loop.time()
                for i, (data, future, record) in enumerate(batch):
                    self._waiters[base + i] = _Waiter(future, epoch, started, data, record)
            case NotLeader(leader_id=leader_id, epoch=epoch):
                error = NotLeaderError(leader_id, epoch)
                for _, future, _ in batch:
                    if not future.done():
                        future.set_exception(error)
            case _:
                assert_never(result)
        try:
            self._run(effects)
        except Exception as exc:
            self.crash(exc)

    def begin_read(self) -> asyncio.Future[int]:
        """Start a read barrier; the future resolves (with the applied end) once a linearizable
        read may be served from the image. Raises NotLeaderError."""
        if not self.is_leader:
            raise NotLeaderError(self.leader_id, self.epoch)
        request_id = self._next_read_id
        self._next_read_id += 1
        future: asyncio.Future[int] = self.loop.create_future()
        self._reads[request_id] = future
        self._step(self.core.read_barrier, request_id)
        return future

    async def read_barrier(self) -> None:
        """Return once a linearizable read may be served from the image."""
        future = self.begin_read()
        try:
            await asyncio.wait_for(future, self.config.request_timeout_ms / 1000)
        except TimeoutError:
            raise OutcomeUnknownError("read barrier not confirmed in time") from None

    def on_client_request(self, conn: Any, request: Any) -> None:
        answer_client_request(self, conn, request)

    # --- the execute_effects env --------------------------------------------------------------

    def send(self, to: int, message: Any) -> None:
        self.transport.send(to, message)

    def flush_sends(self) -> None:
        """execute_effects' hook before a FlushLog: the leader's new records go on the wire before
        its own fsync, so the followers' fsyncs overlap it (Raft thesis 10.2.1). Without it the
        frames would leave only when the loop runs again, after the fsync: two fsyncs in series."""
        self.transport.flush_now()

    def persist_election_state(self, state: ElectionState) -> None:
        self.quorum_state.write(state)

    def on_commit_advanced(self, high_watermark: int) -> None:
        self.high_watermark = high_watermark
        if self.transport.held and not self.core.is_leader:
            # A follower learns the HW with the next records, whose Fetch (the acknowledgement)
            # the core queues after this effect: apply once that Fetch is written, so the
            # leader's next commit does not wait for this apply. Nothing here waits on a
            # follower's apply; the leader applies at once (its answers come from the apply).
            self._apply_soon.schedule()
            return
        self._apply_committed()

    def on_leader_changed(self, effect: LeaderChanged) -> None:
        epoch, leader_id, is_self = effect.epoch, effect.leader_id, effect.is_self
        if self._was_leader and not is_self:
            self._fail_waiters(f"leadership moved to {leader_id} in epoch {epoch}")
        if self.active is not None and (
            not is_self or self.active.service_epoch not in (-1, epoch)
        ):
            self.active.stop(f"leadership moved to {leader_id} in epoch {epoch}")
        self._was_leader = is_self
        self._watch_leader(leader_id, is_self)
        log.info("node.leader_changed", leader_id=leader_id, is_self=is_self)

    def leader_silent_ms(self) -> int:
        """How long the leader we follow has left a liveness ping unanswered (0: it answers,
        or no probe runs here). The admin API does not forward to a leader silent this long."""
        return 0 if self.liveness is None else self.liveness.silent_ms()

    def _watch_leader(self, leader_id: int | None, is_self: bool) -> None:
        """Point the liveness probe at the leader we follow (nobody while we lead or know none)."""
        if self.liveness is None:
            return
        endpoint = None if is_self or leader_id is None else self.config.voters.get(leader_id)
        if endpoint is None:
            self.liveness.watch(None)
        else:
            self.liveness.watch(leader_id, (endpoint.host, endpoint.port))

    def on_read_barrier(self, effect: ReadBarrierCompleted | ReadBarrierFailed) -> None:
        match effect:
            case ReadBarrierCompleted(request_id=request_id, high_watermark=hw):
                self._read_barrier_completed(request_id, hw)
            case ReadBarrierFailed(request_id=request_id, leader_id=leader_id, epoch=epoch):
                self._read_barrier_failed(request_id, leader_id, epoch)
            case _:
                assert_never(effect)

    def _read_barrier_completed(self, request_id: int, high_watermark: int) -> None:
        future = self._reads.pop(request_id, None)
        if future is None or future.done():
            return
        if self.image.applied_offset + 1 >= high_watermark:
            future.set_result(high_watermark)
        else:
            self._reads_waiting_apply.append((high_watermark, future))

    def _read_barrier_failed(self, request_id: int, leader_id: int | None, epoch: int) -> None:
        future = self._reads.pop(request_id, None)
        if future is not None and not future.done():
            future.set_exception(NotLeaderError(leader_id, epoch))

    def on_snapshot_installed(self, snapshot: OffsetAndEpoch) -> None:
        """The log now starts at a fetched snapshot: rebuild the image from it (KIP-630)."""
        self.image = restore_image(self.log)
        self.metadata_counters.seed(self.image)
        self.high_watermark = max(self.high_watermark, snapshot.offset)
        if self.broker is not None:
            self.broker.on_applied()
        self._resolve_reads()
        log.info("node.snapshot_installed", offset=snapshot.offset, epoch=snapshot.epoch)

    def on_voters_changed(self, voters: VotersRecord) -> None:
        """A voter change is in force (KIP-853): reach every voter at its recorded endpoint."""
        for voter in voters.voters:
            host, _, port = voter.endpoint.rpartition(":")
            if host and port.isdigit() and voter.node_id != self.node_id:
                self.transport.learn_peer(voter.node_id, [host, int(port)])
        log.info("node.voters_changed", voters=list(voters.ids))

    def on_voter_change_completed(self, effect: VoterChangeCompleted) -> None:
        future = self._voter_changes.pop(effect.request_id, None)
        if future is None or future.done():
            return
        if effect.error == ErrorCode.NONE:
            future.set_result(None)
        else:
            future.set_exception(VoterChangeError(effect.error.name, effect.message))

    async def change_voters(self, kind: str, node_id: int, endpoint: str = "") -> None:
        """AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter on this node (the leader): returns
        once the VotersRecord is committed; VoterChangeError with Kafka's error name otherwise
        (NOT_LEADER_OR_FOLLOWER after the record was appended: the outcome is unknown)."""
        request_id = self._next_voter_change_id
        self._next_voter_change_id += 1
        future: asyncio.Future[None] = self.loop.create_future()
        self._voter_changes[request_id] = future
        voter = Voter(node_id, endpoint)
        calls = {
            "add": lambda now_ms: self.core.add_voter(request_id, voter, now_ms),
            "remove": lambda now_ms: self.core.remove_voter(request_id, node_id, now_ms),
            "update": lambda now_ms: self.core.update_voter(request_id, voter, now_ms),
        }
        self._step(calls[kind])
        await future

    # --- applying committed entries -----------------------------------------------------------

    def _apply_committed(self) -> None:
        image = self.image
        while image.applied_offset + 1 < self.high_watermark:
            start = image.applied_offset + 1
            if start < self.log.start_offset:
                # Behind the log start: only a snapshot can bring us forward (InstallSnapshot).
                break
            entries = self.log.read(start, APPLY_READ_BYTES)
            if not entries:
                break
            for entry in entries:
                if entry.offset >= self.high_watermark:
                    break
                self._apply_entry(entry)
        if self._reads_waiting_apply:
            self._resolve_reads()
        if self.active is not None:
            self.active.maybe_start()
        if self.broker is not None:
            self.broker.on_applied()
        if self.snapshots.due(self.clock.now_ms):
            self._take_snapshot()

    def _apply_entry(self, entry: Entry) -> None:
        waiter = self._waiters.pop(entry.offset, None)
        try:
            if (waiter is not None and waiter.record is not None and entry.data is waiter.data
                    and entry.epoch == waiter.epoch):
                # Our own proposal, still the very bytes encoded from this record (a data entry:
                # control records are built by the core): decoding them would rebuild it.
                result = self.image.apply_record(entry.offset, entry.epoch, waiter.record)
            else:
                result = self.image.apply_entry(entry)
        except DecodeError as exc:
            # A committed entry that is not a record: consume its offset, loudly (every replica
            # does the same, so images stay equal).
            log.error("node.undecodable_record", offset=entry.offset, error=str(exc))
            self.image.apply_control(entry.offset, entry.epoch)
            result = None
        except ImageError:
            raise
        if result is not None:
            self.metadata_counters.observe(result, self.image)
        self.snapshots.applied(len(entry.data))
        if waiter is None or waiter.future.done():
            return
        if result is None or entry.epoch != waiter.epoch:
            waiter.future.set_exception(OutcomeUnknownError("entry replaced by another leader"))
            return
        self.commit_latency.add((self.loop.time() - waiter.started) * 1000)
        waiter.future.set_result(result)

    def _resolve_reads(self) -> None:
        applied_end = self.image.applied_offset + 1
        queue = self._reads_waiting_apply
        while queue and queue[0][0] <= applied_end:
            _, future = queue.popleft()
            if not future.done():
                future.set_result(applied_end)

    def _take_snapshot(self) -> None:
        snapshot = self.snapshots.take(self.log, self.image, self.core.voters_at, self.now_ms)
        if snapshot is not None:
            # Called from inside execute_effects (CommitAdvanced): the prefix deletion after it.
            run_soon(self.loop, self._snapshot_taken, snapshot, on_error=self.crash)

    def _snapshot_taken(self, snapshot: OffsetAndEpoch) -> None:
        self._step(self.core.snapshot_taken, snapshot)

    def _fail_waiters(self, reason: str) -> None:
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            if not waiter.future.done():
                waiter.future.set_exception(OutcomeUnknownError(reason))
        for _, future, _ in self._proposals:
            if not future.done():
                future.set_exception(NotLeaderError(self.leader_id, self.epoch))
        self._proposals = []
        reads, self._reads = self._reads, {}
        pending_reads = list(reads.values()) + [f for _, f in self._reads_waiting_apply]
        self._reads_waiting_apply.clear()
        for read in pending_reads:
            if not read.done():
                read.set_exception(NotLeaderError(self.leader_id, self.epoch))

    # --- status (harness/runtime/status.py) -----------------------------------------------------

    def quorum_status(self) -> dict[str, Any]:
        return quorum_status(self)

    def quorum_replication(self) -> list[dict[str, Any]]:
        return quorum_replication(self)

    def metrics_text(self) -> str:
        return self.metrics.render().decode()
