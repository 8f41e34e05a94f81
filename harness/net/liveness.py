"""Hung-leader detection between controllers: a UDP ping answered by a thread of each process.

Why: a leader that is hung (SIGSTOP, a stopped VM) keeps its TCP connections open, so nothing is
refused and pull replication notices only when `controller.quorum.fetch.timeout.ms` (2 s) passes
without an answer. A leader that is merely slow (a long fsync, a loaded machine, a big snapshot)
is silent on its event loop too, and must not be replaced. This probe tells the two apart: every
controller answers pings from a thread of its own, which keeps running while the event loop is
blocked (fsync and socket calls release the GIL; CPU-bound Python yields it every
`sys.getswitchinterval()`), but not while the process is stopped. A follower pings its leader
every `interval_ms`; when a ping has gone unanswered for `timeout_ms` (or four times the slowest
recent answer, on a machine that answers slowly: `PingWindow.timeout`) it reports the leader as
unresponsive, and the node feeds that to the core as `RaftCore.peer_unreachable` (as a refused
connection): the follower starts a pre-vote at once.

Raft safety and the pre-vote / check-quorum interaction: the report only starts a *pre-vote*
(KIP-996), which changes no durable state and wins only if a majority grants it. A voter grants a
pre-vote only when it has no live leader: it leads, or it fetched from its leader within the fetch
timeout and was not told (EndQuorumEpoch, NOT_LEADER, a refused connection, this probe) that the
leader is gone. So one follower with a false suspicion (its own network, its own pause) cannot
start an election while the other follower still hears the leader; it only spends an election
timeout as a prospective. The real vote that follows a won pre-vote is ordinary Raft (one vote per
epoch, up-to-date log, persisted first), so an election the probe starts is as safe as any. The
deposed leader, when it runs again, meets the higher epoch on its first message and steps down;
until then it cannot commit (a majority moved on), and its check-quorum (1.5 x the fetch timeout)
still ends its reign if it is cut off rather than stopped. What the probe must never do is ring
falsely on *every* follower at once: it does not, because a slow leader's thread still answers,
and a follower that was itself not running (its own stop, a starved thread) restarts its window
instead of blaming the leader (`PingWindow.resume`).

The nemesis link filter (harness/net/transport.py `LinkFilter.drop`) applies to pings and
answers too, so a cut link looks the same to the probe as to Raft.

Wire format: 16-byte datagrams `b"KLPI"|b"KLPO"` (ping, pong) + sender node id (int32) + sequence
(int64), big-endian, to the peer's RPC port number over UDP on the same host address.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

log = structlog.get_logger()

_DATAGRAM = struct.Struct(">4siq")
PING = b"KLPI"
PONG = b"KLPO"


RTT_WINDOW = 256  # answers whose round trips set the adaptive part of the timeout
RTT_FACTOR = 4
MAX_TIMEOUT_MS = 2_000


@dataclass(slots=True)
class PingWindow:
    """When a watched peer counts as unresponsive (pure: times in ms are passed in).

    `first_unanswered_ms` is when the oldest ping not followed by any answer was sent; the peer
    is suspect once that is `timeout()` old. Any answer to a ping of the current watch clears
    it (an answer to an old ping still proves the process ran after the ping was sent).

    The timeout adapts to the machine: it is the configured one, or RTT_FACTOR times the slowest
    of the last RTT_WINDOW answers if that is longer (at most MAX_TIMEOUT_MS). A loaded machine
    that answers in 60 ms now and then is given 240 ms before anyone is blamed; an idle one keeps
    the configured timeout. (A stopped process answers nothing, whatever the timeout.)"""

    timeout_ms: int
    first_unanswered_ms: int | None = None
    rtts_ms: list[int] = field(default_factory=list)

    def sent(self, now_ms: int) -> None:
        if self.first_unanswered_ms is None:
            self.first_unanswered_ms = now_ms

    def answered(self, rtt_ms: int | None = None) -> None:
        self.first_unanswered_ms = None
        if rtt_ms is not None:
            self.rtts_ms.append(rtt_ms)
            if len(self.rtts_ms) > 2 * RTT_WINDOW:
                del self.rtts_ms[:-RTT_WINDOW]

    def resume(self) -> None:
        """We ourselves were not running (stopped, starved): what we did not hear meanwhile
        says nothing about the peer. Start over."""
        self.first_unanswered_ms = None

    def timeout(self) -> int:
        recent = self.rtts_ms[-RTT_WINDOW:]
        slowest = max(recent) if recent else 0
        return min(max(self.timeout_ms, RTT_FACTOR * slowest), MAX_TIMEOUT_MS)

    def is_suspect(self, now_ms: int) -> bool:
        first = self.first_unanswered_ms
        return first is not None and now_ms - first >= self.timeout()


class LivenessProbe:
    """Answers pings on (host, port)/UDP and pings the watched peer, from one daemon thread.

    `on_unresponsive(peer)` is called on the event loop (call_soon_threadsafe) when the watched
    peer has left a ping unanswered for `timeout_ms`, and again every `timeout_ms` while that
    lasts. `is_dropped(peer)` is the nemesis link filter."""

    def __init__(
        self,
        *,
        node_id: int,
        host: str,
        port: int,
        interval_ms: int,
        timeout_ms: int,
        loop: asyncio.AbstractEventLoop,
        on_unresponsive: Callable[[int], None],
        is_dropped: Callable[[int], bool] = lambda peer: False,
    ) -> None:
        if interval_ms <= 0 or timeout_ms <= interval_ms:
            raise ValueError(f"need 0 < interval ({interval_ms}) < timeout ({timeout_ms})")
        self.node_id = node_id
        self.interval_s = interval_ms / 1000
        self.window = PingWindow(timeout_ms)
        self.loop = loop
        self.on_unresponsive = on_unresponsive
        self.is_dropped = is_dropped
        self.answering = True  # tests: False plays a stopped process (no answers)
        self.pings_sent = 0
        self.pongs_received = 0
        self.reports = 0
        self._target: tuple[int, tuple[str, int]] | None = None
        self._watch_seq = 0  # pings of an earlier watch carry smaller sequence numbers
        self._seq = 0
        self._sent_at: dict[int, float] = {}  # seq -> monotonic send time, this watch's pings
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind((host, port))
        self._thread = threading.Thread(target=self._run, name=f"liveness-{node_id}", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._sock.getsockname()[:2]
        return host, port

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._wake()
        self._thread.join(timeout=2 * self.interval_s + 1)
        self._sock.close()

    def _wake(self) -> None:
        """An empty datagram to our own socket: ends the thread's wait at once (`_received`
        ignores it). The thread waits without a timeout while it watches nobody (a leader)."""
        with contextlib.suppress(OSError):
            self._sock.sendto(b"", self._sock.getsockname()[:2])

    def silent_ms(self) -> int:
        """How long the watched peer has left a ping unanswered (0: it answered the last one)."""
        first = self.window.first_unanswered_ms
        return 0 if first is None else max(0, int(time.monotonic() * 1000) - first)

    def watch(self, peer: int | None, address: tuple[str, int] | None = None) -> None:
        """Ping `peer` at `address` from now on (None: nobody); a new watch starts clean."""
        with self._lock:
            current = self._target[0] if self._target is not None else None
            if peer == current:
                return
            self._target = None if peer is None or address is None else (peer, address)
            self._watch_seq = self._seq + 1
            self._sent_at.clear()
            self.window.answered()
        if peer is not None:
            self._wake()  # the thread may be waiting for pings with no timeout (no target)

    # --- the thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        sock = self._sock
        next_ping = 0.0
        last_turn = time.monotonic()
        next_report_ms = 0
        while not self._stopped.is_set():
            now = time.monotonic()
            with self._lock:
                if now - last_turn > 2 * self.interval_s + self.window.timeout() / 2000:
                    self.window.resume()  # we were not running, not them
                    next_report_ms = 0
                last_turn = now
                target = self._target
                if target is not None and now >= next_ping:
                    self._seq += 1
                    self.window.sent(int(now * 1000))
                    next_ping = now + self.interval_s
                    if not self.is_dropped(target[0]):
                        self._sent_at[self._seq] = now
                        if len(self._sent_at) > 64:  # unanswered ones: keep only the newest
                            del self._sent_at[min(self._sent_at)]
                        self._send(PING, self._seq, target[1])
                        self.pings_sent += 1
                now_ms = int(now * 1000)
                if target is not None and self.window.is_suspect(now_ms) and now_ms >= next_report_ms:
                    next_report_ms = now_ms + self.window.timeout()
                    self.reports += 1
                    self.loop.call_soon_threadsafe(self.on_unresponsive, target[0])
            # Watching nobody (a leader): wait for pings only, no wake-up per interval (`watch`
            # and `stop` wake the thread).
            sock.settimeout(max(0.001, next_ping - time.monotonic()) if target else None)
            try:
                data, sender = sock.recvfrom(64)
            except (TimeoutError, BlockingIOError):
                continue
            except OSError:
                if self._stopped.is_set():
                    return
                continue
            self._received(data, sender)

    def _received(self, data: bytes, sender: tuple[str, int]) -> None:
        if len(data) != _DATAGRAM.size:
            return
        kind, peer, seq = _DATAGRAM.unpack(data)
        if self.is_dropped(peer):
            return
        if kind == PING:
            if self.answering:
                self._send(PONG, seq, sender)
        elif kind == PONG:
            with self._lock:
                target = self._target
                if target is not None and target[0] == peer and seq >= self._watch_seq:
                    self.pongs_received += 1
                    sent = self._sent_at.pop(seq, None)
                    rtt = None if sent is None else int((time.monotonic() - sent) * 1000)
                    self.window.answered(rtt)

    def _send(self, kind: bytes, seq: int, address: tuple[str, int]) -> None:
        # Unreachable or closing: the unanswered ping is the signal, nothing to do here.
        with contextlib.suppress(OSError):
            self._sock.sendto(_DATAGRAM.pack(kind, self.node_id, seq), address)
