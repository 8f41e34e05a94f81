"""Cluster ids (harness/launcher/cluster.py `random_cluster_id`): Kafka's form, and never one a
command line would read as an option."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator

import pytest

from harness.launcher import cluster as cl


def test_an_id_that_would_start_with_a_dash_is_drawn_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0xf8 first: URL-safe base64 begins "-" (kafka-storage format --cluster-id -AAAA... fails
    # with its usage line, which a peer's formatting once did).
    draws: Iterator[uuid.UUID] = iter([uuid.UUID(bytes=bytes([0xF8]) + bytes(15)),
                                       uuid.UUID(bytes=bytes([0x04]) + bytes(15))])
    monkeypatch.setattr(cl.uuid, "uuid4", lambda: next(draws))
    assert cl.random_cluster_id() == "BAAAAAAAAAAAAAAAAAAAAA"


def test_ids_are_22_url_safe_characters_of_a_uuid() -> None:
    for _ in range(200):
        cluster_id = cl.random_cluster_id()
        assert len(cluster_id) == 22 and not cluster_id.startswith("-")
        assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16
