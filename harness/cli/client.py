"""`kraftlab produce` and `kraftlab consume` (docs/api.md), over harness.client's native protocol.

    kraftlab produce TOPIC [--partition P] [--acks 0|1|all] [--key K]    # one record per stdin line
    kraftlab consume TOPIC [--partition P] [--from-beginning] [--max-messages N] [--timeout-ms T]

produce: every stdin line (without its newline) is one record's UTF-8 value; the idempotent
producer batches and retries them; at EOF it flushes and prints `produced N records` (and the
offsets of the first and last) on stderr. Exit 0 iff every record was acknowledged.

consume: prints each record's value on its own line (`--print-offsets`: `offset<TAB>value`), in
offset order per partition; stops after --max-messages, or after --timeout-ms without a new record
(default: run until interrupted unless --max-messages is given). Without --from-beginning it starts
at the high watermark, like kafka-console-consumer.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from harness.cli.common import add_data_dir, data_dir_of
from harness.client import (
    Bootstrap,
    ClientError,
    ClusterClient,
    Consumer,
    ConsumerConfig,
    Producer,
    ProducerConfig,
)
from harness.client import run as client_run

ACKS = {"0": 0, "1": 1, "all": -1, "-1": -1}


def _bootstrap(args: Any) -> Bootstrap:
    return Bootstrap.from_cluster_file(data_dir_of(args))


async def _produce(args: Any) -> int:
    client = ClusterClient(_bootstrap(args))
    config = ProducerConfig(acks=ACKS[args.acks], linger_ms=args.linger_ms,
                            batch_size=args.batch_size,
                            enable_idempotence=not args.no_idempotence)  # fmt: skip
    try:
        producer = await Producer.create(client, config)
        key = args.key.encode() if args.key is not None else None
        futures = []
        loop = asyncio.get_running_loop()
        reader: Any = sys.stdin.buffer
        carry = b""
        while True:
            # read1: whatever the pipe holds now (up to 1 MiB), so lines are sent as they come.
            chunk = await loop.run_in_executor(None, reader.read1, 1 << 20)
            if not chunk:
                break
            lines = (carry + chunk).split(b"\n")
            carry = lines.pop()
            for value in lines:
                futures.append(await producer.send(args.topic, value, key, args.partition))
        if carry:
            futures.append(await producer.send(args.topic, carry, key, args.partition))
        await producer.close()
    except ClientError as exc:
        print(f"produce failed: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
    failed = [f.exception() for f in futures if f.exception() is not None]
    done = [f.result() for f in futures if f.exception() is None]
    ranges: dict[int, tuple[int, int]] = {}
    for meta in done:
        low, high = ranges.get(meta.partition, (meta.offset, meta.offset))
        ranges[meta.partition] = (min(low, meta.offset), max(high, meta.offset))
    where = ", ".join(f"partition {p} offsets {lo}..{hi}" for p, (lo, hi) in sorted(ranges.items()))
    if args.acks == "0":
        where = "acks=0: no offsets"
    print(f"produced {len(done)} records" + (f" ({where})" if done else ""), file=sys.stderr)
    if failed:
        print(f"{len(failed)} records failed: {failed[0]}", file=sys.stderr)
        return 1
    return 0


async def _consume(args: Any) -> int:
    client = ClusterClient(_bootstrap(args))
    reset = "earliest" if args.from_beginning else "latest"
    consumer = Consumer(client, ConsumerConfig(max_wait_ms=500, auto_offset_reset=reset))
    out = sys.stdout
    count = 0
    loop = asyncio.get_running_loop()
    idle_since = loop.time()
    try:
        await consumer.assign(args.topic, args.partition)
        while args.max_messages is None or count < args.max_messages:
            records = await consumer.poll()
            if records:
                idle_since = loop.time()
            elif args.timeout_ms is not None and (loop.time() - idle_since) * 1000 >= args.timeout_ms:
                break
            for r in records:
                value = (r.value or b"").decode("utf-8", errors="replace")
                out.write(f"{r.offset}\t{value}\n" if args.print_offsets else f"{value}\n")
                count += 1
                if args.max_messages is not None and count >= args.max_messages:
                    break
            out.flush()
    except ClientError as exc:
        print(f"consume failed: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
    print(f"consumed {count} records", file=sys.stderr)
    return 0


def _run_produce(args: Any) -> int:
    return int(client_run(_produce(args)))


def _run_consume(args: Any) -> int:
    try:
        return int(client_run(_consume(args)))
    except KeyboardInterrupt:
        return 0


def register(sub: Any) -> None:
    p = sub.add_parser("produce", help="produce stdin lines to a topic (one record per line)")
    p.add_argument("topic")
    p.add_argument("--partition", type=int, help="partition (default: sticky over all)")
    p.add_argument("--acks", choices=sorted(ACKS), default="all")
    p.add_argument("--key", help="the key of every record (default: none)")
    p.add_argument("--linger-ms", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=16_384)
    p.add_argument("--no-idempotence", action="store_true",
                   help="plain producer (retries may then duplicate)")
    add_data_dir(p)
    p.set_defaults(handler=_run_produce)

    c = sub.add_parser("consume", help="print the records of a topic (below the high watermark)")
    c.add_argument("topic")
    c.add_argument("--partition", type=int, help="partition (default: all)")
    c.add_argument("--from-beginning", action="store_true")
    c.add_argument("--max-messages", type=int)
    c.add_argument("--timeout-ms", type=int, help="stop after this long without a new record")
    c.add_argument("--print-offsets", action="store_true")
    add_data_dir(c)
    c.set_defaults(handler=_run_consume)
