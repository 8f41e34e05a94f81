"""Node process entry point: `python -m harness.node --config FILE` (a controller or, with
`process.roles=broker`, a broker: see harness/runtime/node.py and broker.py).

This module composes the process: it runs the node (harness/runtime) on an asyncio loop (uvloop
when installed), then, on a broker with a Kafka listener (`listeners=...,PLAINTEXT://host:port`),
the Kafka wire protocol (harness/kafka), then the admin API on the node's admin listener
(127.0.0.1, harness/admin). Both listeners see the node through its context protocols
(harness/runtime/context.py), and the runtime imports neither. On SIGTERM/SIGINT it shuts down
gracefully, the Kafka listener first: a controller resigns (EndQuorumEpoch, so a successor is
elected without waiting for a timeout), a broker does a controlled shutdown first (KIP-631), and
the process exits 0. Logs are structlog JSON lines
on stderr, which the launcher points at the node's log file.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import structlog
from aiohttp import web

from harness.admin.server import build_app
from harness.node.malloc import tune_malloc
from harness.runtime.config import ConfigError, load
from harness.runtime.logs import configure_logging
from harness.runtime.node import ControllerNode
from partition.raft.log import SnapshotRecoveryError

if TYPE_CHECKING:
    from harness.kafka.server import KafkaListener

log = structlog.get_logger()


async def serve(config_path: Path) -> int:
    config = load(config_path)
    node = ControllerNode(config)
    await node.start()
    kafka: KafkaListener | None = None
    if node.broker is not None and config.kafka_listener is not None:
        # Imported here: kafka-python's protocol classes take a few hundred ms to load, which
        # only a broker with a Kafka listener pays.
        from harness.kafka.server import KafkaListener

        kafka = KafkaListener(node, config.kafka_listener.host, config.kafka_listener.port)
        await kafka.start()
    runner = web.AppRunner(build_app(node), access_log=None, handle_signals=False)
    await runner.setup()
    admin = config.admin_endpoint
    site = web.TCPSite(runner, admin.host, admin.port, reuse_address=True, backlog=512)
    await site.start()
    log.info("node.admin_listening", host=admin.host, port=admin.port)
    # What start-up allocated (modules, the restored image) lives as long as the process: out of
    # the cyclic collector's way, a full collection scans only what the node allocates since. A
    # full collection holds the GIL, so it stalls the liveness probe's answers too.
    gc.freeze()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("node.stopping", reason="signal")
    if kafka is not None:
        await kafka.close()  # no new Kafka requests during the controlled shutdown
    await node.stop(resign=True)
    await runner.cleanup()
    log.info("node.stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.node")
    parser.add_argument("--config", required=True, type=Path, help="controller.properties or broker.properties file")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    configure_logging(level=args.log_level, stream=sys.stderr, json=True)
    tune_malloc()  # large batch buffers reused, not mmap'ed afresh per copy (node/malloc.py)
    runner = asyncio.run
    if os.environ.get("KRAFTLAB_EVENT_LOOP", "uvloop") == "uvloop":
        try:
            import uvloop  # a faster event loop where installed (docs/benchmarks.md)
        except ImportError:
            pass
        else:
            runner = uvloop.run
    try:
        return runner(serve(args.config))
    except ConfigError as exc:
        log.error("node.bad_config", error=str(exc))
        print(f"kraftlab node: invalid config: {exc}", file=sys.stderr)
        return 2
    except SnapshotRecoveryError as exc:
        log.error("node.snapshot_unrecoverable", error=str(exc))
        print(f"kraftlab node: {exc}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    raise SystemExit(main())
