"""A group's `__consumer_offsets` partition is Kafka's: Utils.abs(groupId.hashCode()) % n.

The expected hashes were computed by Java 17 (`String.hashCode`, `Utils.abs` semantics) and are
pinned here; they cover multi-byte UTF-8 characters (hashed as UTF-16 code units), a character
outside the BMP (two surrogates), the collision "Aa"/"BB", and "polygenelubricants", whose hash is
Integer.MIN_VALUE (Math.abs would leave it negative; Kafka's Utils.abs gives 0).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.partitioning import java_string_hash, kafka_abs, partition_for

JAVA = [
    # (string, String.hashCode(), partition of 50, partition of 3)
    ("", 0, 0, 0),
    ("a", 97, 47, 1),
    ("hello", 99162322, 22, 1),
    ("Aa", 2112, 12, 0),
    ("BB", 2112, 12, 0),
    ("polygenelubricants", -2147483648, 0, 0),
    ("console-consumer-12345", 158455506, 6, 0),
    ("my-group", -1906497762, 12, 0),
    ("test-group", 627841412, 12, 2),
    ("kraftlab", -1526861211, 11, 0),
    ("gr\u00fc\u00dfe", 98768023, 23, 1),
    ("\U0001f600emoji", -1233692477, 27, 2),
    ("group-\u4e2d\u6587", 506956552, 2, 1),
    ("abcdefghijklmnopqrstuvwxyz0123456789", 1478768498, 48, 2),
]


@pytest.mark.parametrize(("group_id", "java_hash", "of_50", "of_3"), JAVA)
def test_hash_and_partition_are_javas(group_id: str, java_hash: int, of_50: int, of_3: int) -> None:
    assert java_string_hash(group_id) == java_hash
    assert partition_for(group_id, 50) == of_50
    assert partition_for(group_id, 3) == of_3


def test_kafka_abs_of_int_min_is_zero() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 5


@given(st.text(max_size=40), st.integers(1, 200))
def test_hash_is_a_signed_int32_and_the_partition_is_in_range(group_id: str, n: int) -> None:
    h = java_string_hash(group_id)
    assert -(2**31) <= h < 2**31
    assert 0 <= partition_for(group_id, n) < n


def test_no_partitions_is_refused() -> None:
    with pytest.raises(ValueError):
        partition_for("g", 0)
