"""Replica placement for new topics: Kafka's round robin with a shifting start
(AdminUtils.assignReplicasToBrokers), rack-aware when the brokers have racks.

Deterministic (no randomness in a core): where Kafka draws a random start index, we use
`start_index` (the controller passes the number of existing topics, so successive topics start
on successive brokers). With brokers [101, 102, 103] and start 0, partition 0 gets
[101, 102, 103], partition 1 [102, 103, 101], partition 2 [103, 101, 102].

Invariants: each partition gets `replication_factor` distinct brokers; the first replica (the
preferred leader) rotates over the brokers; with racks, a partition's replicas cover
min(replication_factor, racks) distinct racks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def assign_replicas(
    brokers: Sequence[int],
    racks: Mapping[int, str | None],
    partitions: int,
    replication_factor: int,
    start_index: int = 0,
) -> list[tuple[int, ...]]:
    """Replica lists for `partitions` partitions over `brokers` (sorted ids). The caller checks
    1 <= replication_factor <= len(brokers) and partitions >= 1."""
    ordered = sorted(brokers)
    if not 1 <= replication_factor <= len(ordered):
        raise ValueError(f"replication factor {replication_factor} for {len(ordered)} brokers")
    if any(racks.get(b) is not None for b in ordered):
        ordered = _rack_alternated(ordered, racks)
        return _assign(ordered, partitions, replication_factor, start_index, racks)
    return _assign(ordered, partitions, replication_factor, start_index, None)


def _rack_alternated(brokers: Sequence[int], racks: Mapping[int, str | None]) -> list[int]:
    """Brokers interleaved by rack: rack1-b1, rack2-b1, rack3-b1, rack1-b2, ... (Kafka's
    getRackAlternatedBrokerList). Brokers without a rack form one rack of their own."""
    by_rack: dict[str, list[int]] = {}
    for b in brokers:
        by_rack.setdefault(racks.get(b) or "", []).append(b)
    queues = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    i = 0
    while len(out) < len(brokers):
        queue = queues[i % len(queues)]
        depth = i // len(queues)
        if depth < len(queue):
            out.append(queue[depth])
        i += 1
    return out


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def _assign(
    brokers: list[int],
    partitions: int,
    rf: int,
    start_index: int,
    racks: Mapping[int, str | None] | None,
) -> list[tuple[int, ...]]:
    n = len(brokers)
    start = start_index % n
    shift = start
    result: list[tuple[int, ...]] = []
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1  # shift followers so that replica sets differ after a full round
        first = (p + start) % n
        replicas = [brokers[first]]
        if racks is None:
            replicas += [brokers[_replica_index(first, shift - start, j, n)] for j in range(rf - 1)]
        else:
            replicas += _rack_aware_followers(brokers, racks, first, shift - start, rf)
        result.append(tuple(replicas))
    return result


def _rack_aware_followers(
    brokers: list[int], racks: Mapping[int, str | None], first: int, shift: int, rf: int
) -> list[int]:
    """Followers for one partition: walk the shifted order, preferring brokers on racks the
    partition does not use yet, until every rack is used (Kafka's rack-aware assignment)."""
    n = len(brokers)
    all_racks = {racks.get(b) or "" for b in brokers}
    chosen = [brokers[first]]
    used_racks = {racks.get(brokers[first]) or ""}
    candidates = [brokers[_replica_index(first, shift, j, n)] for j in range(n - 1)]
    for relax in (False, True):
        for b in candidates:
            if len(chosen) == rf:
                return chosen[1:]
            rack = racks.get(b) or ""
            if b in chosen:
                continue
            if not relax and rack in used_racks and used_racks != all_racks:
                continue  # a rack this partition does not use yet comes first
            chosen.append(b)
            used_racks.add(rack)
    return chosen[1:]
