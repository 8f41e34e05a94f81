"""The broker side of KIP-631's broker lifecycle as a sans-IO state machine, shared by the asyncio
broker (harness/runtime/broker.py) and the simulator (harness/sim/actors/broker.py) so the two drivers
cannot drift apart (one core, two drivers).

Inputs: `poll(now_ms, leader_id, applied_offset)` (returns the one request to send now, if any),
`on_response(request_id, response, now_ms)`, `request_shutdown(now_ms)`. Output: what to send
(`Outgoing`) and what changed (`Transition`s, for logs). Time is a parameter; nothing here reads a
clock or does I/O.

Rules:
- Register first (fresh incarnation id per process start), with the broker epoch this broker
  shut down cleanly with, if it did (`previous_broker_epoch`, read by the driver from the clean
  shutdown file; KAFKA-15586), else -1: the controller then takes it out of every ELR. Only the
  first registration of a process carries it; a later one in the same process sends -1.
  DUPLICATE_BROKER_REGISTRATION means the
  previous incarnation's session is still live (after a kill -9, up to broker.session.timeout.ms):
  retry after `duplicate_backoff_ms`.
- Then heartbeat every `heartbeat_interval_ms` with the applied metadata offset; while fenced (or
  shutting down) every `fast_heartbeat_ms`, so the controller unfences it as soon as it has caught
  up to its broker epoch (Kafka's initial catch-up).
- STALE_BROKER_EPOCH / BROKER_ID_NOT_REGISTERED: the registration is gone; register again.
- At most one request outstanding; one not answered within `request_timeout_ms` is given up and
  the next poll sends a new one (a late answer to it is ignored: request ids must match).
- Controlled shutdown: heartbeats carry want_shut_down until the controller answers
  should_shut_down (then `shut_down` is True and nothing more is sent).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from quorum.controller import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    ControllerRequest,
)
from quorum.metadata.errors import Errors
from quorum.metadata.records import Endpoint


@dataclass(frozen=True, slots=True)
class BrokerTiming:
    heartbeat_interval_ms: int = 2000
    request_timeout_ms: int = 2000
    fast_heartbeat_ms: int = 100
    retry_backoff_ms: int = 100
    duplicate_backoff_ms: int = 500


@dataclass(frozen=True, slots=True)
class Outgoing:
    """Send `request` with `request_id` to the active controller `to`."""

    to: int
    request_id: int
    request: ControllerRequest


@dataclass(frozen=True, slots=True)
class Transition:
    """Something the driver logs: registered, registration_retry, registration_failed,
    registration_lost, fenced, unfenced, shutdown_granted."""

    event: str
    broker_epoch: int
    detail: str = ""


class BrokerSession:
    def __init__(
        self,
        broker_id: int,
        incarnation_id: str,
        endpoints: tuple[Endpoint, ...],
        timing: BrokerTiming,
        rack: str | None = None,
        previous_broker_epoch: int = -1,
    ) -> None:
        self.broker_id = broker_id
        self.previous_broker_epoch = previous_broker_epoch
        self.incarnation_id = incarnation_id
        self.endpoints = endpoints
        self.rack = rack
        self.timing = timing
        self.broker_epoch = -1
        self.fenced = True
        self.want_shut_down = False
        self.shut_down = False
        self._outstanding: tuple[int, int] | None = None  # request id, deadline
        self._next_send_ms = 0
        self._next_id = 0

    @property
    def registered(self) -> bool:
        return self.broker_epoch >= 0

    def next_deadline_ms(self) -> int | None:
        if self.shut_down:
            return None
        if self._outstanding is not None:
            return self._outstanding[1]
        return self._next_send_ms

    def request_shutdown(self, now_ms: int) -> None:
        if not self.want_shut_down:
            self.want_shut_down = True
            self._next_send_ms = now_ms

    def poll(self, now_ms: int, leader_id: int | None, applied_offset: int) -> Outgoing | None:
        """The request to send now, if one is due (and a controller is known)."""
        if self.shut_down:
            return None
        if self._outstanding is not None:
            if now_ms < self._outstanding[1]:
                return None
            self._outstanding = None  # no answer in time: ask again
        if now_ms < self._next_send_ms:
            return None
        if leader_id is None:
            self._next_send_ms = now_ms + self.timing.retry_backoff_ms
            return None
        request: ControllerRequest
        if self.broker_epoch < 0:
            request = BrokerRegistrationRequest(
                broker_id=self.broker_id, incarnation_id=self.incarnation_id,
                endpoints=self.endpoints, rack=self.rack,
                previous_broker_epoch=self.previous_broker_epoch,
            )
        else:
            request = BrokerHeartbeatRequest(
                broker_id=self.broker_id, broker_epoch=self.broker_epoch,
                current_metadata_offset=applied_offset, want_shut_down=self.want_shut_down,
            )
        self._next_id += 1
        self._outstanding = (self._next_id, now_ms + self.timing.request_timeout_ms)
        return Outgoing(leader_id, self._next_id, request)

    def on_response(self, request_id: int, response: Any, now_ms: int) -> list[Transition]:
        if self._outstanding is None or request_id != self._outstanding[0]:
            return []  # a duplicate, or the answer to a request already given up
        self._outstanding = None
        t = self.timing
        match response:
            case BrokerRegistrationResponse(error=Errors.NONE):
                self.broker_epoch = response.broker_epoch
                self.previous_broker_epoch = -1  # used once: the registration it vouched for
                self.fenced = True
                self._next_send_ms = now_ms
                return [Transition("registered", self.broker_epoch, self.incarnation_id)]
            case BrokerRegistrationResponse(error=Errors.DUPLICATE_BROKER_REGISTRATION):
                # The previous incarnation's session is live until it expires (KIP-631).
                self._next_send_ms = now_ms + t.duplicate_backoff_ms
                return [Transition("registration_retry", -1, response.error.name)]
            case BrokerRegistrationResponse():
                self._next_send_ms = now_ms + t.retry_backoff_ms
                return [Transition("registration_failed", -1, response.error.name)]
            case BrokerHeartbeatResponse(error=Errors.NONE):
                return self._heartbeat_answered(response, now_ms)
            case BrokerHeartbeatResponse(
                error=Errors.STALE_BROKER_EPOCH | Errors.BROKER_ID_NOT_REGISTERED
            ):
                lost = self.broker_epoch
                self.broker_epoch = -1
                self.fenced = True
                self._next_send_ms = now_ms
                return [Transition("registration_lost", lost, response.error.name)]
            case _:
                self._next_send_ms = now_ms + t.retry_backoff_ms
                return []

    def _heartbeat_answered(self, response: BrokerHeartbeatResponse, now_ms: int) -> list[Transition]:
        out: list[Transition] = []
        if response.is_fenced != self.fenced:
            self.fenced = response.is_fenced
            out.append(Transition("fenced" if self.fenced else "unfenced", self.broker_epoch))
        if response.should_shut_down and self.want_shut_down:
            self.shut_down = True
            out.append(Transition("shutdown_granted", self.broker_epoch))
            return out
        t = self.timing
        fast = self.fenced or self.want_shut_down
        self._next_send_ms = now_ms + (
            min(t.heartbeat_interval_ms, t.fast_heartbeat_ms) if fast else t.heartbeat_interval_ms
        )
        return out
