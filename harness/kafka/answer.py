"""How every Kafka handler module answers (handlers.py, admin_handlers.py, config_handlers.py):
the one-shot `Reply`, and topic ids in the Uuid form Kafka's answers carry.

Invariant: a request answers exactly once (`Reply` ignores later calls), whatever mix of
partition callbacks complete it.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Reply:
    """Answer a request once; later calls are ignored. `client_id` (the request header's) and
    `client_host` (the peer address, as Kafka shows it: "/127.0.0.1") say who asked (the group
    coordinator records both per member)."""

    send: Callable[[Any], None]
    done: bool = field(default=False)
    client_id: str = ""
    client_host: str = ""

    def __call__(self, body: Any) -> None:
        if not self.done:
            self.done = True
            self.send(body)


def topic_uuid(topic_id: str) -> uuid.UUID:
    """kraftlab's 22-character topic id (urlsafe base64 of 16 bytes, as Kafka prints Uuids)."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=="))
