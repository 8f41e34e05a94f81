"""The `kv` workload: clients doing read / write / cas / append on the metadata key/value space.

Each worker is a Jepsen client (a logical process) talking to random controllers over the admin
HTTP API (docs/api.md): `GET /kv/{key}?consistency=linearizable|local`, `PUT /kv/{key}`,
`POST /kv/{key}/cas`. Followers forward writes and linearizable reads to the active controller;
a 421 NOT_CONTROLLER with a `leader` hint is retried once at that leader within the same
operation (a 421 means the node did nothing). The API has no append route, so `append` is
done at the client as a linearizable read followed by a cas of read+suffix, retried on
CAS_FAILED; the append takes effect exactly at its successful cas, so it is a correct
linearizable append (docs/jepsen.md).

Outcome rules (the heart of a sound history: `fail` must mean "did not happen"):
- 2xx: ok. A 404 KEY_NOT_FOUND read is an ok read of null.
- 409 CAS_FAILED: fail (the compare did not match; the checker treats it as a read).
- 421, 400, 503 LEADER_NOT_AVAILABLE *without* a leader (nothing was proposed), and a refused
  connection (the runner's session never resends, harness/net/http_session.py): fail.
- 504 (indeterminate), 500, 503 after any failed forward to the leader, a broken or
  timed-out connection after the request was sent, or the client-side operation timeout: info;
  the worker's process id is retired.
Values are unique strings (w<n>, c<n>, appended +<n>), so a stale read can never be explained by
a later write of the same value.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from harness.check.history import Operation
from harness.check.linearizable import check_linearizable
from harness.check.models import get_model
from harness.jepsen.recorder import CheckOutcome, ProcessIds, RunContext

OP_WEIGHTS = (("read", 4), ("write", 2), ("cas", 2), ("append", 2))
APPEND_ATTEMPTS = 3  # read + cas rounds before an append gives up (fail: nothing was written)
# The node that gave the last answer in this task (each worker is its own task), recorded as
# `node` on completions: which controller served a stale read, for diagnosis only.
answered_by: contextvars.ContextVar[int | None] = contextvars.ContextVar("answered_by",
                                                                           default=None)


@dataclass(frozen=True, slots=True)
class KvOptions:
    keys: int = 3
    # Keys are PREFIX0.. (a soak's runs share one cluster: each run its own keys, which start
    # absent as the checker's model assumes).
    key_prefix: str = "k"
    concurrency: int = 5
    rate: float = 40.0  # operations per second, all workers together
    op_timeout_s: float = 2.5
    consistency: str = "linearizable"  # of reads: "linearizable" or "local"
    check_timeout_s: float = 60.0
    workers_for_check: int = 2


@dataclass(frozen=True, slots=True)
class Outcome:
    type: str  # ok | fail | info
    value: Any = None  # the read value (ok reads)
    error: str | None = None


class Definite(Exception):
    """The request certainly did not reach a node (connection refused)."""


class KvWorkload:
    name = "kv"

    def __init__(self, options: KvOptions) -> None:
        if options.consistency not in ("linearizable", "local"):
            raise ValueError("consistency must be 'linearizable' or 'local'")
        self.options = options
        self.concurrency = options.concurrency
        self.op_timeout_s = options.op_timeout_s
        self.keys = [f"{options.key_prefix}{i}" for i in range(options.keys)]
        self._values = itertools.count(1)
        self.pids = ProcessIds(options.concurrency)
        self._known: dict[tuple[int, str], Any] = {}  # (worker, key) -> last value seen
        self.final_process_base = 0

    def describe(self) -> dict[str, Any]:
        return {"consistency": self.options.consistency, "keys": self.keys,
                "concurrency": self.concurrency, "rate": self.options.rate,
                "op_timeout_s": self.op_timeout_s}

    # ------------------------------------------------------------------- HTTP and outcomes

    async def _http(
        self, ctx: RunContext, node: int, method: str, path: str, body: Any = None
    ) -> tuple[int, dict[str, Any]]:
        url = ctx.admin_urls[node] + path
        answered_by.set(None)
        try:
            async with ctx.session.request(method, url, json=body) as resp:
                answered_by.set(node)
                data = await resp.json(content_type=None)
                return resp.status, data if isinstance(data, dict) else {}
        except aiohttp.ClientConnectorError as exc:
            raise Definite(type(exc).__name__) from exc

    async def _call(
        self, ctx: RunContext, method: str, path: str, body: Any = None
    ) -> tuple[int, dict[str, Any]]:
        """Send to a random node; follow one 421 leader hint (safe: a 421 did nothing)."""
        node = ctx.rng.choice(sorted(ctx.admin_urls))
        status, data = await self._http(ctx, node, method, path, body)
        hint = data.get("leader")
        if status == 421 and isinstance(hint, int) and hint in ctx.admin_urls and hint != node:
            status, data = await self._http(ctx, hint, method, path, body)
        return status, data

    @staticmethod
    def classify(status: int, data: dict[str, Any]) -> Outcome:
        """A non-2xx answer as fail (did not happen) or info (may have happened)."""
        error = str(data.get("error", f"HTTP_{status}"))
        # 401: the node's auth middleware refused the request before any handler ran
        # (harness/admin/auth.py), so it did nothing
        if status in (400, 401, 404, 409, 421):
            return Outcome("fail", error=error)
        if status == 503:
            message = str(data.get("message", ""))
            if data.get("leader_id") is not None and "forwarding" in message:
                # The forward may have reached the leader, even when the message names a
                # refused connection: aiohttp retries an idempotent request (PUT) once after
                # the connection broke, so the refusal may be of the retry (seen in a run:
                # a PUT answered 503 ... ClientConnectorError was committed).
                return Outcome("info", error=error)
            return Outcome("fail", error=error)
        return Outcome("info", error=error)  # 504 indeterminate, 500, anything unexpected

    # --------------------------------------------------------------------------- operations

    async def read(self, ctx: RunContext, key: str, consistency: str) -> Outcome:
        status, data = await self._call(ctx, "GET", f"/kv/{key}?consistency={consistency}")
        if status == 200:
            return Outcome("ok", value=data.get("value"))
        if status == 404 and data.get("error") == "KEY_NOT_FOUND":
            return Outcome("ok", value=None)
        return self.classify(status, data)

    async def write(self, ctx: RunContext, key: str, value: str) -> Outcome:
        status, data = await self._call(ctx, "PUT", f"/kv/{key}", {"value": value})
        return Outcome("ok") if status == 200 else self.classify(status, data)

    async def cas(self, ctx: RunContext, key: str, expected: str | None, new: str) -> Outcome:
        body = {"expected": expected, "value": new}
        status, data = await self._call(ctx, "POST", f"/kv/{key}/cas", body)
        return Outcome("ok") if status == 200 else self.classify(status, data)

    async def append(self, ctx: RunContext, key: str, suffix: str) -> Outcome:
        """Read, then cas(read, read + suffix); retried on CAS_FAILED. Only a cas can write,
        so any failure before a cas was sent is a definite fail."""
        last = Outcome("fail", error="CAS_FAILED")
        for _ in range(APPEND_ATTEMPTS):
            current = await self.read(ctx, key, "linearizable")
            if current.type != "ok":
                return Outcome("fail", error=current.error)
            last = await self.cas(ctx, key, current.value, (current.value or "") + suffix)
            if last.error != "CAS_FAILED":
                return last
        return Outcome("fail", error="CAS_FAILED")

    async def _execute(self, ctx: RunContext, f: str, key: str, arg: Any) -> Outcome:
        match f:
            case "read":
                return await self.read(ctx, key, self.options.consistency)
            case "write":
                return await self.write(ctx, key, arg)
            case "cas":
                return await self.cas(ctx, key, arg[0], arg[1])
            case "append":
                return await self.append(ctx, key, arg)
        raise ValueError(f"unknown kv operation {f!r}")

    async def invoke(self, ctx: RunContext, worker: int, f: str, key: str, arg: Any) -> Outcome:
        """Record one operation around its execution, bounded by the op timeout."""
        process = self.pids.current(worker)
        ctx.recorder.record(process, "invoke", f, [key, arg])
        try:
            async with asyncio.timeout(self.options.op_timeout_s):
                outcome = await self._execute(ctx, f, key, arg)
        except Definite as exc:
            outcome = Outcome("fail", error=f"CONNECTION_REFUSED:{exc}")
        except TimeoutError:
            outcome = Outcome("info", error="REQUEST_TIMED_OUT")
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            outcome = Outcome("info", error=type(exc).__name__)  # sent, answer lost
        value = [key, outcome.value] if f == "read" and outcome.type == "ok" else [key, arg]
        ctx.recorder.record(process, outcome.type, f, value, outcome.error,
                            node=answered_by.get())
        if outcome.type == "info":
            self.pids.retire(worker)
        return outcome

    # ----------------------------------------------------------------------------- workload

    async def setup(self, ctx: RunContext) -> None:
        return None

    def _next_op(self, rng: random.Random, worker: int) -> tuple[str, str, Any]:
        f = rng.choices([f for f, _ in OP_WEIGHTS], [w for _, w in OP_WEIGHTS])[0]
        key = rng.choice(self.keys)
        n = next(self._values)
        match f:
            case "read":
                return f, key, None
            case "write":
                return f, key, f"w{n}"
            case "cas":
                # expect the last value this client saw, so a fair share of cas succeed
                return f, key, [self._known.get((worker, key)), f"c{n}"]
            case _:
                return f, key, f"+{n}"

    def _learn(self, worker: int, f: str, key: str, arg: Any, outcome: Outcome) -> None:
        if outcome.type != "ok":
            return
        if f == "read":
            self._known[(worker, key)] = outcome.value
        elif f == "write":
            self._known[(worker, key)] = arg
        elif f == "cas":
            self._known[(worker, key)] = arg[1]

    async def run_worker(self, ctx: RunContext, worker: int, deadline: float) -> None:
        rng = random.Random(ctx.rng.random())
        interval_s = self.options.concurrency / self.options.rate
        while time.monotonic() < deadline:
            started = time.monotonic()
            f, key, arg = self._next_op(rng, worker)
            outcome = await self.invoke(ctx, worker, f, key, arg)
            self._learn(worker, f, key, arg, outcome)
            # pacing (the rate option), jittered so workers do not march in step
            pause = rng.uniform(0.5, 1.5) * interval_s - (time.monotonic() - started)
            remaining = deadline - time.monotonic()
            if pause > 0 and remaining > 0:
                await asyncio.sleep(min(pause, remaining))

    async def final(self, ctx: RunContext, deadline: float) -> None:
        """One linearizable read of every key after recovery, retried until one is ok.

        Final reads use fresh process ids above every client's, so they never overlap a
        client's open operation.
        """
        self.final_process_base = max(self.pids.current(w) for w in range(self.pids.workers)) + 1
        for i, key in enumerate(self.keys):
            while time.monotonic() < deadline:
                outcome = await self._final_read(ctx, i, key)
                if outcome.type == "ok":
                    break
                await asyncio.sleep(0.05)  # retry pacing while the cluster settles

    async def _final_read(self, ctx: RunContext, i: int, key: str) -> Outcome:
        process = self.final_process_base + i
        ctx.recorder.record(process, "invoke", "read", [key, None], final=True)
        try:
            async with asyncio.timeout(self.options.op_timeout_s):
                outcome = await self.read(ctx, key, "linearizable")
        except Definite as exc:
            outcome = Outcome("fail", error=f"CONNECTION_REFUSED:{exc}")
        except TimeoutError:
            outcome = Outcome("fail", error="REQUEST_TIMED_OUT")  # a read changes nothing
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            outcome = Outcome("fail", error=type(exc).__name__)
        value = [key, outcome.value if outcome.type == "ok" else None]
        ctx.recorder.record(process, outcome.type, "read", value, outcome.error, final=True,
                            node=answered_by.get())
        return outcome

    # ------------------------------------------------------------------------------ checker

    def check(self, ops: Sequence[Operation], out_dir: Path) -> CheckOutcome:
        from harness.check.timeline import write_failure_html

        model = get_model("kv")
        result = check_linearizable(
            ops, model, timeout_s=self.options.check_timeout_s,
            workers=self.options.workers_for_check,
        )
        report = result.to_json(model)
        anomalies: dict[str, Any] = {}
        files: dict[str, str] = {}
        if result.failure is not None:
            anomalies["nonlinearizable"] = report["failure"]
            stale = [row for row in report["failure"]["stuck"] if row["op"].startswith("read(")]
            if stale:
                anomalies["stale-read"] = stale
            path = write_failure_html(result, model, out_dir / "linearizability.html",
                                      source="history.jsonl")
            files["linearizability_html"] = path.name
        return CheckOutcome(result.verdict, anomalies, report, files)
