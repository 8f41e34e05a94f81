"""A data-plane run recorded for replay (`kraftlab sim replay`, docs/ui.md): a snapshot of what a
viewer sees after every actor event (a broker's, a controller's, a client's).

Observer interface: `Recorder.attach(cluster)` adds one after-hook to the cluster's World (the
kernel calls it after every event an actor handled) and nothing else. The recorder only reads: it
never schedules an event, sends a message or draws a random number, so a recorded run is the
same run as an unrecorded one (same events in the same order, same history, same outcome).
What a script does between events (a kill, a cut) shows at the next event.

A frame is `{"time_ms", "state"}`; `state` is the view-state shape the UI draws (docs/ui.md
"The view state"): controllers, brokers, each partition with, per replica, its log start, LEO,
HW, role, lag and the records of the last WINDOW offsets as `[offset, leader_epoch, value]`,
the cut links, and the anomaly in force, if any. A frame is kept only when its state differs
from the previous frame's, so a long run of unanswered fetch polls costs nothing.

Anomalies (what "jump to the anomaly" finds; the checkers of harness/sim/runs/scenario_run.py
judge the run):
- divergence: two live replicas hold different records at one offset below both their HWs
  (KIP-101's silent divergence), or the replicas' committed-prefix invariant broke
  (`divergence-below-hw`, for offsets outside the frame's window);
- loss: the partition leader's log ends below the highest offset ever seen committed (KIP-101's
  truncation to the HW, or an unclean election): records that were below some replica's HW, so
  acknowledged to an acks=all producer, are gone from the log every replica will follow.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.sim.actors.abstract_controller import CONTROLLER_ID
from harness.sim.actors.broker import Broker
from harness.sim.actors.controller import TOPIC
from harness.sim.runs.cluster import Cluster
from harness.sim.runs.kip101 import silent_divergence, truncation_to_hw_loss
from harness.sim.runs.scenario_run import FAULT_START_MS, PRODUCERS, ScenarioConfig, ScenarioRun
from partition.log import batch as rb

WINDOW = 24  # offsets per replica whose records a frame carries (the last ones, by max LEO)
MAX_FRAMES = 40_000  # a frame is ~1-2 KB of JSON: a bound on what a browser is sent
VALUE_CHARS = 12

# name -> (title, the story the page shows above the replay, the script)
SCENARIOS: dict[str, tuple[str, str, Callable[..., Any]]] = {
    "kip101-loss": (
        "KIP-101 case 1: truncation to the high watermark loses an acknowledged write",
        "RF 2, acks=all, min.insync.replicas=1. Broker 1 leads; both brokers hold offsets 0 and "
        "1 and the leader's HW reaches 2, but the link is cut before broker 2 hears it, so its "
        "HW stays 1. Broker 2 restarts its replica: before KIP-101 a follower truncates to its "
        "HW, so it drops offset 1. Broker 1 dies before broker 2 fetches it again; broker 2 is "
        "elected, broker 1 returns and follows it. Offset 1 was acknowledged and is gone "
        "(KAFKA-1211). With leader epochs (KIP-101) broker 2 keeps it and nothing is lost.",
        truncation_to_hw_loss),
    "kip101-divergence": (
        "KIP-101 case 2: replicas silently diverge after a power loss",
        "RF 2, acks=all, min.insync.replicas=1. Both brokers hold offsets 0 and 1 (HW 2). Both "
        "lose power: broker 2 had not flushed offset 1, broker 1 had. Broker 2 comes back "
        "first, is elected and writes a new record at offset 1. Broker 1 returns with HW 2, not "
        "below broker 2's log end: before KIP-101 it keeps its offset 1, so the two logs differ "
        "below the high watermark, for good. With leader epochs broker 1 asks where epoch 0 "
        "ends on the leader, truncates to 1 and fetches the new record (the acknowledged "
        "offset 1 is lost to the power failure either way: Kafka does not fsync each write).",
        silent_divergence),
}


@dataclass
class Recording:
    """Frames of one run, the first anomaly, and what was run (JSON via `to_json`)."""

    title: str
    source: dict[str, Any]
    description: str = ""
    frames: list[dict[str, Any]] = field(default_factory=list)
    # The first frame showing each kind of anomaly: {"frame", "kind", "text"}, in frame order.
    anomalies: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"kind": "replay", "title": self.title, "description": self.description,
                "source": self.source, "frames": self.frames, "anomalies": self.anomalies,
                "truncated": self.truncated}


class Recorder:
    """Snapshots a Cluster into a Recording; attach before it runs."""

    def __init__(self, recording: Recording, max_frames: int = MAX_FRAMES,
                 memory: Memory | None = None) -> None:
        self.recording = recording
        self.max_frames = max_frames
        self.cluster: Cluster | None = None
        self._last_key = ""
        self._memory = memory or Memory()

    def attach(self, cluster: Cluster) -> None:
        self.cluster = cluster
        cluster.world.after_hooks.append(self._after_event)
        self.capture()

    def _after_event(self, actor: Any) -> None:
        self.capture()

    def capture(self) -> None:
        """Append a frame if what a viewer sees changed since the last one."""
        cluster = self.cluster
        assert cluster is not None, "attach the recorder to a cluster first"
        if self.recording.truncated:
            return
        state = snapshot(cluster, self._memory)
        state["anomalies"] = anomalies(cluster, state)
        key = json.dumps(state, sort_keys=True)
        if key == self._last_key:
            return
        self._last_key = key
        frames = self.recording.frames
        if len(frames) >= self.max_frames:
            self.recording.truncated = True
            return
        known = {a["kind"] for a in self.recording.anomalies}
        for found in state["anomalies"]:
            if found["kind"] not in known:
                known.add(found["kind"])
                self.recording.anomalies.append({"frame": len(frames), **found})
        frames.append({"time_ms": cluster.world.now_ms, "state": state})


# --- snapshots ------------------------------------------------------------------------------------

class Memory:
    """What snapshots remember between frames: each broker's replica as last seen while it was
    up, and the records last read from each log (a frame re-reads only what was appended)."""

    def __init__(self) -> None:
        self.last_seen: dict[int, dict[str, Any]] = {}
        # broker -> (log, first offset read, LEO then, epoch cache then, entries from first)
        self._read: dict[int, tuple[Any, int, int, Any, list[list[Any]]]] = {}

    def entries(self, broker: Broker, first: int) -> list[list[Any]]:
        """`[offset, leader_epoch, value]` of each record at or after `first`."""
        log = broker.log
        assert log is not None
        first = max(first, log.log_start_offset)
        leo, epochs = log.log_end_offset, log.epoch_cache.entries
        cached = self._read.get(broker.node_id)
        if cached is not None and cached[0] is log and cached[1] <= first and leo >= cached[2] \
                and epochs[:len(cached[3])] == cached[3]:
            # Only appended since (no truncation: the LEO did not go back and no epoch entry
            # was rewritten; a truncation and re-append in between would end another epoch).
            _, _, old_leo, _, old = cached
            out = [e for e in old if e[0] >= first] + _read_entries(log, max(old_leo, first))
        else:
            out = _read_entries(log, first)
        self._read[broker.node_id] = (log, first, leo, epochs, out)
        return out


def snapshot(cluster: Cluster, memory: Memory) -> dict[str, Any]:
    """The view state of `cluster` now (JSON-ready; docs/ui.md)."""
    image = cluster.image
    registrations = {b.broker_id: b for b in image.brokers()}
    brokers = []
    for b, broker in sorted(cluster.brokers.items()):
        reg = registrations.get(b)
        brokers.append({"id": b, "up": broker.up, "paused": broker.paused,
                        "registered": reg is not None,
                        "fenced": reg.fenced if reg is not None else True,
                        "epoch": reg.broker_epoch if reg is not None else None})
    return {
        "time_ms": cluster.world.now_ms,
        "controllers": _controllers(cluster),
        "brokers": brokers,
        "partitions": _partitions(cluster, memory),
        "links": _cut_links(cluster),
    }


def _controllers(cluster: Cluster) -> list[dict[str, Any]]:
    ctl, voters = cluster.abstract, cluster.voters
    if ctl is not None:  # the abstract controller: one active controller, up or down
        return [{"id": CONTROLLER_ID, "up": ctl.up, "paused": ctl.paused,
                 "role": "leader" if ctl.up else "down", "epoch": None,
                 "leader_id": CONTROLLER_ID if ctl.up else None, "voted_id": None,
                 "high_watermark": None, "log_end_offset": None}]
    out = []
    for v, voter in sorted(voters.items()):
        core = voter.core
        status = core.status() if voter.up and core is not None else None
        out.append({"id": v, "up": voter.up, "paused": voter.paused,
                    "role": status.role if status else "down",
                    "epoch": status.epoch if status else None,
                    "leader_id": status.leader_id if status else None,
                    "voted_id": status.voted_id if status else None,
                    "high_watermark": status.high_watermark if status else None,
                    "log_end_offset": status.log_end_offset if status else None})
    return out


def _partitions(cluster: Cluster, memory: Memory) -> list[dict[str, Any]]:
    """The partition as the image and each replica see it. A broker that is down shows its log
    as last seen while it was up (after a power loss its disk may hold less: a restart shows)."""
    topic_id = cluster.topic_id
    part = cluster.image.partition(topic_id, 0) if topic_id else None
    if part is None:
        return []
    replicas = [r for r in part.replicas if r in cluster.brokers]
    logs = [_replica(cluster.brokers[r]) for r in replicas]
    _fill_lag(logs, cluster.world.now_ms)
    top = max((lg["leo"] for lg in logs), default=0)
    first = max(0, top - WINDOW)
    for lg, r in zip(logs, replicas, strict=True):
        broker = cluster.brokers[r]
        if broker.up:
            lg["entries"] = memory.entries(broker, first) if broker.log is not None else []
            memory.last_seen[r] = lg
        else:
            seen = memory.last_seen.get(r, {})
            lg.update({k: seen.get(k, lg[k]) for k in ("log_start", "leo", "hw")})
            lg["entries"] = [e for e in seen.get("entries", []) if e[0] >= first]
    committed = max(cluster.replicas.committed_owner, default=-1) + 1
    return [{
        "topic": TOPIC, "partition": 0, "mode": cluster.replica_config.replication_mode,
        "leader": part.leader if part.leader >= 0 else None, "leader_epoch": part.leader_epoch,
        "isr": list(part.isr), "elr": list(part.elr), "replicas": list(part.replicas),
        "committed_end": committed, "logs": logs,
    }]


def _replica(broker: Broker) -> dict[str, Any]:
    log, core = broker.log, broker.core
    role = ("down" if not broker.up else "paused" if broker.paused
            else "recovering" if core is None or core.partition is None
            else "leader" if core.is_leader else "follower")
    out: dict[str, Any] = {"id": broker.node_id, "role": role, "log_start": 0, "leo": 0,
                           "hw": 0, "leader_epoch": None, "fetched_to": None,
                           "lag_offsets": None, "lag_ms": None}
    if log is not None and broker.up:
        out["log_start"] = log.log_start_offset
        out["leo"] = log.log_end_offset
        out["hw"] = core.high_watermark if core is not None else log.high_watermark
    if core is not None and core.partition is not None:
        out["leader_epoch"] = core.partition.leader_epoch
        if core.is_leader:
            out["followers"] = {f: (s.log_end_offset, s.last_caught_up_time_ms)
                                for f, s in core.role.followers.items()}  # type: ignore[union-attr]
    return out


def _fill_lag(logs: list[dict[str, Any]], now_ms: int) -> None:
    """Each follower as the leader sees it (Kafka's Replica state on the leader): `fetched_to`,
    the LEO its last fetch reported; `lag_offsets`, the leader's LEO minus that; `lag_ms`, how
    long since it was last caught up (what replica.lag.time.max.ms is measured against)."""
    leader = next((lg for lg in logs if "followers" in lg), None)
    for lg in logs:
        if lg is not leader:
            lg.pop("followers", None)  # a deposed leader that has not heard yet
    if leader is None:
        return
    followers = leader.pop("followers")
    leader["lag_offsets"], leader["lag_ms"] = 0, 0
    for lg in logs:
        known = followers.get(lg["id"])
        if lg is leader or known is None or known[0] < 0:
            continue
        leo, caught_up_ms = known
        lag = max(0, leader["leo"] - leo)
        lg["fetched_to"] = leo
        lg["lag_offsets"] = lag
        lg["lag_ms"] = 0 if lag == 0 else max(0, now_ms - caught_up_ms)


def _read_entries(log: Any, start: int) -> list[list[Any]]:
    """`[offset, leader_epoch, value]` of every record of `log` at or after `start` (value None
    for a control batch: quorum mode's epoch marker)."""
    if log.log_end_offset <= start:
        return []
    data = log.read(start, 1 << 22)
    out: list[list[Any]] = []
    for h in rb.iter_headers(data, check_crc=False):
        if h.is_control:
            out.extend([o, h.partition_leader_epoch, None]
                       for o in range(h.base_offset, h.base_offset + h.last_offset_delta + 1)
                       if o >= start)
            continue
        for r in rb.decode_records(data, h):
            if r.offset >= start:
                value = (r.value or b"").decode("utf-8", errors="replace")[:VALUE_CHARS]
                out.append([r.offset, h.partition_leader_epoch, value])
    return out


def _cut_links(cluster: Cluster) -> list[list[int]]:
    world = cluster.world
    ids = [*world.controller_ids, *world.broker_ids]
    reach = world.network.can_reach
    return [[a, b] for i, a in enumerate(ids) for b in ids[i + 1:]
            if not reach(a, b) or not reach(b, a)]


# --- anomalies ------------------------------------------------------------------------------------

def anomalies(cluster: Cluster, state: dict[str, Any]) -> list[dict[str, Any]]:
    """What is wrong in `state` now: `{"kind": "divergence"|"loss", "text", "offsets"}` (the
    offsets the page marks)."""
    out = []
    for part in state["partitions"]:
        for found in (_divergence(part), _loss(part)):
            if found is not None:
                out.append(found)
    # Beyond the window: the replicas' committed-prefix invariant (not its count of rewrites
    # after a loss, Counters.divergence_after_loss: those are the loss, already reported).
    counted = cluster.replicas.counters.violations.get("divergence-below-hw", 0)
    if counted and not any(a["kind"] == "divergence" for a in out):
        out.append({"kind": "divergence", "offsets": [],
                    "text": f"replicas disagree below their high watermarks ({counted} "
                            f"record(s) found by the committed-prefix check)"})
    return out


def _divergence(part: dict[str, Any]) -> dict[str, Any] | None:
    """The leader counts a follower as holding an offset (the follower fetched past it: the
    leader's `fetched_to` for it) that is below both their HWs, and the two hold different
    records there: KIP-101's silent divergence. A follower that fetches with its last epoch and
    is answered a diverging epoch (KIP-320) is not counted past it: the leader answers before
    updating its fetch state, and the follower truncates first."""
    leader = _leader_log(part)
    if leader is None:
        return None
    mine = {offset: (epoch, value) for offset, epoch, value in leader["entries"]}
    diverged: list[int] = []
    first = ""
    for lg in part["logs"]:
        if lg is leader or lg.get("fetched_to") is None:
            continue
        bound = min(lg["fetched_to"], lg["hw"], leader["hw"])
        for offset, epoch, value in lg["entries"]:
            if offset >= bound:
                break
            theirs = mine.get(offset)
            if theirs is not None and theirs != (epoch, value) and offset not in diverged:
                diverged.append(offset)
                first = first or (f"offset {offset}: leader {leader['id']} holds {theirs[1]!r} "
                                  f"(epoch {theirs[0]}), follower {lg['id']} holds {value!r} "
                                  f"(epoch {epoch})")
    if not diverged:
        return None
    return {"kind": "divergence", "offsets": sorted(diverged),
            "text": f"replicas diverge below their high watermarks: {first}"}


def _leader_log(part: dict[str, Any]) -> dict[str, Any] | None:
    """The replica that leads in the image and knows it."""
    return next((lg for lg in part["logs"]
                 if lg["role"] == "leader" and lg["id"] == part["leader"]), None)


def _loss(part: dict[str, Any]) -> dict[str, Any] | None:
    """The leader's log ends below the highest offset ever seen committed."""
    leader = _leader_log(part)
    if leader is None:
        return None
    end, leo = part["committed_end"], leader["leo"]
    if leo >= end:
        return None
    gone = f"offset {leo}" if end - leo == 1 else f"offsets {leo}-{end - 1}"
    return {"kind": "loss", "offsets": list(range(leo, end)),
            "text": f"committed {gone} lost: leader {leader['id']} (epoch "
                    f"{part['leader_epoch']}) ends at offset {leo}, below the high watermark "
                    f"{end} seen before (acknowledged to acks=all producers)"}


# --- what `kraftlab sim replay` runs --------------------------------------------------------------

def record_scenario(name: str, leader_epoch_enable: bool) -> Recording:
    """One of the scripted KIP-101 scenarios (harness/sim/runs/kip101.py), recorded."""
    title, story, run = SCENARIOS[name]
    recording = Recording(
        f"{title}; leader.epoch.enable={str(leader_epoch_enable).lower()}",
        {"scenario": name, "leader_epoch_enable": leader_epoch_enable}, story)
    recorder = Recorder(recording)
    outcome = run(leader_epoch_enable, observer=recorder.attach)
    recording.source["lost"] = outcome.lost()
    recording.source["diverged"] = outcome.diverged()
    return recording


def record_data_run(config: ScenarioConfig, max_frames: int = MAX_FRAMES) -> Recording:
    """One seeded data-plane run (the matrix's runs, `kraftlab sim matrix`), recorded."""
    run = ScenarioRun(config)
    recording = Recording(f"data-plane run {config.key()}", {"run": config.key()},
                          f"The run `kraftlab sim matrix` makes for these settings and seed: "
                          f"{config.nemesis} fault from {FAULT_START_MS} ms for "
                          f"{config.fault_duration_ms} ms, {PRODUCERS} producers with "
                          f"acks={config.acks}, one consumer.")
    Recorder(recording, max_frames).attach(run.cluster)
    result = run.run()
    recording.source.update({"lost_writes": result.lost_writes,
                             "divergent_offsets": result.divergent_offsets,
                             "anomalies": result.anomalies(),
                             "violations": result.violations})
    found = ", ".join(f"{k} x{v}" for k, v in sorted(result.anomalies().items())) or "none"
    recording.description += (f" The checkers found: {found}; divergent offsets at the end: "
                              f"{result.divergent_offsets}.")
    return recording
