"""Linearizability checker: Wing-Gong-Lowe search with a (linearized set, state) cache.

The algorithm (Wing & Gong 1993, with Lowe's 2017 memoisation, as in Porcupine):
the history becomes a doubly linked list of call and return entries in real-time order. The
search walks the list; at a call entry it tries to linearize that operation next (the model's
`step` must accept it in the current state), lifts the call and its return out of the list and
restarts from the head. Reaching a return entry means the operation it belongs to had to be
linearized before this point and was not: the search backtracks (pops the last linearized
operation, restores its entries and state, and tries the next call after it). The history is
linearizable iff the list empties. The cache holds every (linearized bitset, state) already
explored: reaching the same configuration by another order cannot succeed where the first failed.

Exact prunings beyond Porcupine (each keeps the verdict; a brute-force property test checks it):
- read-only dominance: an op that never changes the state (read, failed cas) and is legal
  where it is tried can always be moved first among the pending ops (everything that precedes
  it in real time is already linearized), so if that choice fails the configuration fails;
  read-only calls are listed first among concurrent calls so they are tried first;
- symmetry: two open (info) ops with equal input and output are interchangeable once both are
  invoked, so only orders where the earlier-invoked one goes first are explored.
The failure report keeps the deepest stack seen: the longest linearizable prefix, and the
pending calls that could not extend it (Porcupine's "partial linearizations", one of them).

Invariants:
- `check_linearizable` is a pure function of (operations, model, limits): no I/O, and the only
  clock read is the monotonic deadline that turns a long search into `unknown`;
- bitsets are Python ints (bit i = operation i of the partition linearized);
- an `info` operation has its return entry at the very end, so it may be linearized anywhere
  after its call, including "never" (last, when nothing observes it);
- partitions (P-compositionality) are checked independently; the first invalid one decides;
  `unknown` (timeout, memory bound) wins over `valid` but never over `invalid`.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from harness.check.history import Operation
from harness.check.models import Model, ModelOp, get_model

Verdict = Literal["valid", "invalid", "unknown"]

DEFAULT_MAX_CACHE_ENTRIES = 1_000_000  # cache keys: ~100 B each at 200 ops, n/8 B more at n ops
QUICK_PASS_S = 0.2  # per partition, in this process, before a partition earns a worker
CONTEXT_MAX_OPS = 200  # ops kept around a failure window for the HTML view
CONTEXT_PREFIX_OPS = 10  # prefix operations shown before the window
_CHECK_EVERY = 0x3FF  # backtracks between deadline / memory checks


@dataclass(frozen=True, slots=True)
class FailureWindow:
    """Where the search got furthest in a non-linearizable partition.

    `prefix` is the longest linearizable prefix found (operations in linearization order) and
    `state` the model state after it; `stuck` are the operations pending at that point (invoked
    before the earliest outstanding return), none of which can be linearized next.
    `blocking` is the operation whose return forced the backtrack.
    """

    partition: Hashable
    prefix: tuple[ModelOp, ...]
    state: Any
    stuck: tuple[ModelOp, ...]
    blocking: ModelOp
    context: tuple[ModelOp, ...] = ()  # the partition's ops overlapping the window, for views

    @property
    def window(self) -> tuple[int, int]:
        """History positions from the earliest stuck call to the blocking op's return."""
        start = min(m.op.call_index for m in self.stuck)
        end = self.blocking.op.return_index
        return start, start if end is None else end

    def describe(self, model: Model) -> dict[str, Any]:
        def row(mop: ModelOp) -> dict[str, Any]:
            op = mop.op
            return {
                "op_id": op.id,
                "process": op.process,
                "call_index": op.call_index,
                "return_index": op.return_index,
                "type": op.type,
                "op": model.describe_op(mop.input, mop.output),
            }

        return {
            "partition": self.partition
            if self.partition is None or isinstance(self.partition, str | int)
            else repr(self.partition),
            "prefix_length": len(self.prefix),
            "prefix_op_ids": [m.op.id for m in self.prefix],
            "prefix_tail": [row(m) for m in self.prefix[-10:]],
            "state_after_prefix": model.describe_state(self.state),
            "stuck": [row(m) for m in self.stuck],
            "blocking": row(self.blocking),
            "window": list(self.window),
        }


@dataclass(frozen=True, slots=True)
class PartitionOutcome:
    verdict: Verdict
    ops: int
    cache_entries: int
    reason: str | None = None
    failure: FailureWindow | None = None


@dataclass(frozen=True, slots=True)
class LinearizabilityResult:
    verdict: Verdict
    model: str
    ops: int
    partitions: int
    partitions_checked: int
    cache_entries: int
    elapsed_s: float
    reason: str | None = None
    failure: FailureWindow | None = None

    @property
    def valid(self) -> bool:
        return self.verdict == "valid"

    def to_json(self, model: Model) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "valid": self.verdict == "valid" if self.verdict != "unknown" else None,
            "model": self.model,
            "ops": self.ops,
            "partitions": self.partitions,
            "partitions_checked": self.partitions_checked,
            "cache_entries": self.cache_entries,
            "elapsed_s": round(self.elapsed_s, 6),
            "reason": self.reason,
            "failure": None if self.failure is None else self.failure.describe(model),
        }


class _Stop(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


def _entries(model: Model, mops: Sequence[ModelOp]) -> list[tuple[int, int, int]]:
    """(op, kind) entries in real-time order; kind 0 call, 1 return. Open ops return last.

    Calls between two consecutive returns may be listed in any order (they are concurrent with
    the same set of operations); read-only calls go first there, so the search tries the
    dominating choice before the others (see the pruning note in `check_partition`).
    """
    end = max((m.op.call_index for m in mops), default=0) + 1
    timeline: list[tuple[int, int, int]] = []
    for i, mop in enumerate(mops):
        timeline.append((mop.op.call_index, 0, i))
        ret = mop.op.return_index
        timeline.append((end + i if ret is None else ret, 1, i))
    timeline.sort()
    out: list[tuple[int, int, int]] = []
    returns_seen = 0
    for _, kind, i in timeline:
        if kind == 1:
            out.append((returns_seen, 3, i))  # closes the group of calls before it
            returns_seen += 1
        else:
            ro = model.is_read_only(mops[i].input, mops[i].output)
            rank = 0 if ro else 2 if mops[i].op.return_index is None else 1
            out.append((returns_seen, rank, i))
    out.sort()
    return [(0, 1 if kind == 3 else 0, i) for _, kind, i in out]


def _linked_entries(
    model: Model, mops: Sequence[ModelOp]
) -> tuple[list[int], list[int], list[int], list[int]]:
    """The entry list as arrays: op_of[e], ret_of[e] (a call's return entry, -1 for returns),
    and next/prev links. Entries are 0..2n-1, the head sentinel 2n, the tail sentinel 2n+1."""
    n = len(mops)
    order = _entries(model, mops)
    op_of = [i for _, _, i in order]
    where_ret = [0] * n
    for e, (_, kind, i) in enumerate(order):
        if kind == 1:
            where_ret[i] = e
    ret_of = [where_ret[i] if kind == 0 else -1 for _, kind, i in order]
    head, tail = 2 * n, 2 * n + 1
    nxt = list(range(1, 2 * n + 1)) + [0, tail]
    nxt[2 * n - 1] = tail
    prv = [head] + list(range(0, 2 * n - 1)) + [head, 2 * n - 1]
    return op_of, ret_of, nxt, prv


def check_partition(
    model: Model,
    mops: Sequence[ModelOp],
    *,
    deadline: float | None = None,
    max_cache_entries: int = DEFAULT_MAX_CACHE_ENTRIES,
) -> PartitionOutcome:
    """Wing-Gong-Lowe search over one partition. Hot loop: keep it flat and local."""
    n = len(mops)
    if n == 0:
        return PartitionOutcome("valid", 0, 0)
    op_of, ret_of, nxt, prv = _linked_entries(model, mops)
    head, tail = 2 * n, 2 * n + 1
    inputs = [m.input for m in mops]
    outputs = [m.output for m in mops]
    # States are interned to small ints (sid) so that a cache key is one int:
    # the linearized bitset in the low n bits, the sid above them.
    states: list[Any] = [model.init()]
    sid_of: dict[Any, int] = {states[0]: 0}
    memo_of_op: list[dict[int, int]] = [{} for _ in range(n)]  # {sid: next sid, -1 illegal}
    memo = [memo_of_op[i] for i in op_of]  # indexed by entry, to save a lookup per visit
    memo_get = [m.get for m in memo]  # bound methods: one subscript and a call per visit
    bits = [1 << i for i in op_of]  # indexed by entry
    high = [0]  # sid << n, the state's part of a cache key
    read_only = [model.is_read_only(mops[i].input, mops[i].output) for i in op_of]
    twin = _twin_bits(mops, op_of)
    step = model.step
    cache: set[int] = set()
    stack: list[tuple[int, int]] = []
    sid = 0
    linearized = 0
    backtracks = 0
    best_len = -1
    best: tuple[list[tuple[int, int]], int, int, list[int]] | None = None
    e = nxt[head]
    while True:
        r = ret_of[e]
        if r >= 0:  # a call: try to linearize it next
            ns = memo_get[e](sid)
            if ns is None:
                i = op_of[e]
                ok, new_state = step(states[sid], inputs[i], outputs[i])
                if ok:
                    ns = sid_of.get(new_state)
                    if ns is None:
                        ns = sid_of[new_state] = len(states)
                        states.append(new_state)
                        high.append(ns << n)
                else:
                    ns = -1
                memo[e][sid] = ns
            if ns >= 0 and linearized & twin[e] == twin[e]:
                lin2 = linearized | bits[e]
                key = lin2 | high[ns]
                if key not in cache:
                    cache.add(key)
                    stack.append((e, sid))
                    linearized = lin2
                    sid = ns
                    p, q = prv[e], nxt[e]
                    nxt[p] = q
                    prv[q] = p
                    p, q = prv[r], nxt[r]
                    nxt[p] = q
                    prv[q] = p
                    e = nxt[head]
                    if e == tail:
                        break  # everything linearized
                    continue
                if not read_only[e]:
                    e = nxt[e]
                    continue
                # a legal read-only op whose successor configuration already failed: by the
                # dominance below, this configuration fails too, so backtrack now
            else:
                e = nxt[e]
                continue
        elif len(stack) > best_len:
            # a return: its operation should have been linearized by now
            best_len = len(stack)
            best = (
                stack.copy(),  # a C-level copy: this runs at every new depth record
                sid,
                op_of[e],
                _pending_calls(nxt, ret_of, op_of, head, e),
            )
        while stack:
            e, sid = stack.pop()
            linearized ^= bits[e]
            r = ret_of[e]
            nxt[prv[r]] = r
            prv[nxt[r]] = r
            nxt[prv[e]] = e
            prv[nxt[e]] = e
            # A read-only op that was legal here dominates every alternative (it changes no
            # state and every op that precedes it in real time is already linearized), so if
            # linearizing it first failed, this whole configuration fails: keep popping.
            if not read_only[e]:
                break
        else:
            break  # nothing left to undo: not linearizable
        e = nxt[e]
        backtracks += 1
        if backtracks & _CHECK_EVERY == 0:
            if deadline is not None and time.monotonic() > deadline:
                return PartitionOutcome("unknown", n, len(cache), reason="timeout")
            if len(cache) > max_cache_entries:
                return PartitionOutcome("unknown", n, len(cache), reason="memory")
    if nxt[head] == tail:
        return PartitionOutcome("valid", n, len(cache))
    assert best is not None
    best_stack, best_sid, blocking, stuck = best
    prefix_ids = [op_of[x] for x, _ in best_stack]
    window = FailureWindow(
        partition=mops[0].partition,
        prefix=tuple(mops[i] for i in prefix_ids),
        state=states[best_sid],
        stuck=tuple(mops[i] for i in stuck),
        blocking=mops[blocking],
        context=_context(
            mops, [mops[i] for i in prefix_ids], [mops[i] for i in stuck], mops[blocking]
        ),
    )
    return PartitionOutcome("invalid", n, len(cache), failure=window)


def _twin_bits(mops: Sequence[ModelOp], op_of: list[int]) -> list[int]:
    """Per entry: the bit of an identical open operation invoked earlier, or 0.

    Symmetry reduction: two open (info) operations with the same input and output are
    interchangeable once both are invoked (both may go anywhere up to the end), so only
    linearizations where the earlier-invoked one goes first need exploring.
    """
    last: dict[tuple[Any, Any], int] = {}
    twin_of_op = [0] * len(mops)
    for i in sorted(range(len(mops)), key=lambda i: mops[i].op.call_index):
        if mops[i].op.return_index is None:
            key = (mops[i].input, mops[i].output)
            if key in last:
                twin_of_op[i] = 1 << last[key]
            last[key] = i
    return [twin_of_op[i] for i in op_of]


def _context(
    mops: Sequence[ModelOp], prefix: list[ModelOp], stuck: list[ModelOp], blocking: ModelOp
) -> tuple[ModelOp, ...]:
    """The partition's ops overlapping the failure window widened back to the calls of the
    prefix's last CONTEXT_PREFIX_OPS operations, so a view shows how the state came about."""
    start = min(m.op.call_index for m in stuck + prefix[-CONTEXT_PREFIX_OPS:])
    end = blocking.op.return_index
    end = max(m.op.call_index for m in stuck) if end is None else end
    around = [
        m
        for m in mops
        if m.op.call_index <= end and (m.op.return_index is None or m.op.return_index >= start)
    ]
    return tuple(around[-CONTEXT_MAX_OPS:])


def _pending_calls(
    nxt: list[int], ret_of: list[int], op_of: list[int], head: int, stop: int
) -> list[int]:
    """The operations whose calls remain before entry `stop`: those that could go next."""
    out = []
    e = nxt[head]
    while e != stop:
        if ret_of[e] >= 0:
            out.append(op_of[e])
        e = nxt[e]
    out.append(op_of[stop])
    return sorted(set(out))


def _check_one(args: tuple[str, list[ModelOp], float | None, int]) -> PartitionOutcome:
    model_name, mops, deadline, max_cache = args
    return check_partition(
        get_model(model_name), mops, deadline=deadline, max_cache_entries=max_cache
    )


def check_linearizable(
    ops: Sequence[Operation],
    model: Model,
    *,
    timeout_s: float | None = None,
    max_cache_entries: int = DEFAULT_MAX_CACHE_ENTRIES,
    workers: int = 1,
    quick_pass_s: float = QUICK_PASS_S,
) -> LinearizabilityResult:
    """Check a paired history against `model`.

    Partitions run in this process in order, stopping at the first invalid one. With
    `workers > 1` and several partitions, each partition first gets `quick_pass_s` here (most
    keys of a real history are decided in milliseconds, and a process pool costs more than
    that); the ones still undecided then run in a process pool (the GIL rules out threads for
    this CPU-bound search), where the first invalid result terminates the pool. The memory
    bound applies per process. Parallel mode needs a model registered in MODELS.
    """
    started = time.monotonic()
    deadline = None if timeout_s is None else started + timeout_s
    mops = [m for m in (model.prepare(op) for op in ops) if m is not None]
    parts = model.partition(mops)
    parallel = workers > 1 and len(parts) > 1
    outcomes: list[PartitionOutcome] = []
    hard: list[list[ModelOp]] = []
    for part in parts:
        quick = time.monotonic() + quick_pass_s if parallel else None
        limit = quick if deadline is None else deadline if quick is None else min(quick, deadline)
        outcome = check_partition(model, part, deadline=limit, max_cache_entries=max_cache_entries)
        if parallel and outcome.reason == "timeout" and not _expired(deadline):
            hard.append(part)  # undecided in the quick pass: give it a worker
            continue
        outcomes.append(outcome)
        if outcome.verdict == "invalid":
            hard = []
            break
    if len(hard) == 1:
        outcomes.append(
            check_partition(model, hard[0], deadline=deadline, max_cache_entries=max_cache_entries)
        )
    elif hard:
        outcomes += _run_parallel(model, hard, deadline, max_cache_entries, workers)
    return _combine(model, outcomes, len(mops), len(parts), time.monotonic() - started)


def _expired(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def _run_parallel(
    model: Model, parts: list[list[ModelOp]], deadline: float | None, max_cache: int, workers: int
) -> list[PartitionOutcome]:
    outcomes: list[PartitionOutcome] = []
    ctx = multiprocessing.get_context("fork")
    pool = ctx.Pool(processes=min(workers, len(parts)))
    try:
        jobs = [(model.name, part, deadline, max_cache) for part in parts]
        for outcome in pool.imap_unordered(_check_one, jobs):
            outcomes.append(outcome)
            if outcome.verdict == "invalid":
                break  # first failure stops the rest
    finally:
        pool.terminate()
        pool.join()
    return outcomes


def _combine(
    model: Model, outcomes: list[PartitionOutcome], n_ops: int, n_parts: int, elapsed_s: float
) -> LinearizabilityResult:
    invalid = next((o for o in outcomes if o.verdict == "invalid"), None)
    unknown = next((o for o in outcomes if o.verdict == "unknown"), None)
    verdict: Verdict = "invalid" if invalid else "unknown" if unknown else "valid"
    return LinearizabilityResult(
        verdict=verdict,
        model=model.name,
        ops=n_ops,
        partitions=n_parts,
        partitions_checked=len(outcomes),
        cache_entries=sum(o.cache_entries for o in outcomes),
        elapsed_s=elapsed_s,
        reason=None if invalid or not unknown else unknown.reason,
        failure=invalid.failure if invalid else None,
    )
