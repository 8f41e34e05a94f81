"""The options of a bounded Jepsen run against Apache Kafka, shared by the Kafka run tests
(test_run_kafka.py on loopback, test_run_kafka_netns.py in network namespaces): acks=all,
min.insync.replicas=2, RF 3, idempotent producers, one fault held until `stop_when` holds (the
time limit bounds it), started once a write was acknowledged on every partition."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from harness.jepsen.run_core import RunOptions, served_on_every_partition
from harness.jepsen.workload_queue import QueueOptions

PARTITIONS = 2


def kafka_options(out: Path, data_dir: Path | None, *, topic: str, nemesis: str, seed: int,
                  time_limit_s: float, stop_when: Callable[[Any], Awaitable[bool]],
                  **changes: Any) -> RunOptions:
    base: dict[str, Any] = dict(
        out_dir=out, workload="queue", system="kafka", nemesis=nemesis,
        time_limit_s=time_limit_s, seed=seed, data_dir=data_dir,
        queue=QueueOptions(topic=topic, partitions=PARTITIONS, replication_factor=3, acks="all",
                           min_insync_replicas=2, idempotence=True, producers=2, consumers=1,
                           rate=40.0, op_timeout_s=2.5),
        # one fault, held until `stop_when` ends the phase
        fault_s=(time_limit_s, time_limit_s), quiet_s=(60.0, 60.0), lead_in_s=0.5,
        start_when=served_on_every_partition(PARTITIONS), stop_when=stop_when)
    base.update(changes)
    return RunOptions(**base)
