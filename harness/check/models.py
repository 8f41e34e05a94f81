"""Sequential specifications for the linearizability checker.

A model is a pure, deterministic sequential object: `init()` gives the initial state and
`step(state, input, output)` says whether an operation with that input could have returned
that output in that state, and the state it leaves. The checker memoises `step` per
(operation, state), so a model must not keep hidden state, and states must be hashable and
compared by value (Porcupine's `Equal`/`Hash` collapse into Python's `==`/`hash`).

`prepare(op)` turns a history operation into the model's (partition, input, output), or None
when the operation cannot influence the verdict (a `fail`ed write did not happen; a read whose
result is unknown could return anything). `partition` implements P-compositionality
(Herlihy & Wing, "locality"): a history over independent registers is linearizable iff each
register's sub-history is, so the kv model splits by key.

Models here:
- `kv`: one register per key; ops read [k, v|null], write [k, v], cas [k, [expected, new]],
  append [k, suffix] (string concatenation; a missing key appends to ""), delete [k, null].
- `cas-register`: the single compare-and-set register of Jepsen's etcd test; ops read v|null,
  write v, cas [expected, new].

Completion semantics (Jepsen's, as in tests/data/jepsen-etcd/README.md):
- `ok cas` succeeded: the state equalled `expected` and becomes `new`;
- `fail cas` with no error or error CAS_FAILED is a compare that did not match: it took effect
  as a read, legal only where the state differs from `expected`. A `fail cas` with any other
  error (NOT_LEADER_OR_FOLLOWER, ...) did not happen and is dropped;
- `info` ops are open to the end: writes, appends and cas may take effect at any later point;
  an info cas applies `new` only if linearized where the state equals `expected`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from harness.check.history import HistoryError, Operation

CAS_FAILED = "CAS_FAILED"


@dataclass(frozen=True, slots=True)
class ModelOp:
    """An operation as the model sees it. `op` is kept for reports."""

    op: Operation
    partition: Hashable
    input: Hashable
    output: Hashable


class Model(Protocol):
    """The pluggable model interface (cf. Porcupine's Model)."""

    name: str

    def init(self) -> Hashable: ...

    def prepare(self, op: Operation) -> ModelOp | None: ...

    def step(self, state: Any, input: Any, output: Any) -> tuple[bool, Hashable]: ...

    def is_read_only(self, input: Any, output: Any) -> bool:
        """True if `step` never changes the state for this op (a read). The checker uses it to
        prune: such an op, legal where it is tried, can always be linearized first. Returning
        False is always safe."""
        ...

    def partition(self, mops: Sequence[ModelOp]) -> list[list[ModelOp]]: ...

    def describe_op(self, input: Any, output: Any) -> str: ...

    def describe_state(self, state: Any) -> str: ...


def freeze(value: Any) -> Hashable:
    """JSON values as hashable, comparable model values (lists become tuples)."""
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), freeze(v)) for k, v in value.items()))
    return value  # type: ignore[no-any-return]


def _show(value: Any) -> str:
    return "null" if value is None else repr(value) if isinstance(value, str) else str(value)


class RegisterModel:
    """Registers with read / write / cas / append; keyed (`kv`) or a single one (`cas-register`).

    Input is (f, argument), output is (completion type, read value). State is the register's
    value, None when absent.
    """

    def __init__(self, name: str, *, keyed: bool) -> None:
        self.name = name
        self.keyed = keyed

    def init(self) -> Hashable:
        return None

    def _split(self, op: Operation, value: Any) -> tuple[Hashable, Any]:
        if not self.keyed:
            return None, value
        if not isinstance(value, list | tuple) or len(value) != 2:
            raise HistoryError(
                f"{self.name} op {op.f} needs value [key, argument], got {value!r} "
                "(a single unkeyed register, like Jepsen's etcd logs, is --model cas-register)",
                index=op.invoke.index,
            )
        return freeze(value[0]), value[1]

    def prepare(self, op: Operation) -> ModelOp | None:
        if not op.is_client:
            return None
        key, arg = self._split(op, op.invoke.value)
        if op.f == "read":
            if op.type != "ok":
                return None  # did not happen, or unknown result: any value would be legal
            result = op.completion.value if op.completion is not None else None
            _, read = self._split(op, result) if self.keyed else (None, result)
            return ModelOp(op, key, ("read", None), ("ok", freeze(read)))
        if op.type == "fail" and not (op.f == "cas" and op.error in (None, CAS_FAILED)):
            return None  # did not happen
        if op.f == "delete":
            return ModelOp(op, key, ("delete", None), (op.type, None))
        if op.f in ("write", "append"):
            if op.f == "append" and not isinstance(arg, str):
                raise HistoryError(
                    f"append needs a string suffix, got {arg!r}", index=op.invoke.index
                )
            return ModelOp(op, key, (op.f, freeze(arg)), (op.type, None))
        if op.f == "cas":
            if not isinstance(arg, list | tuple) or len(arg) != 2:
                raise HistoryError(f"cas needs [expected, new], got {arg!r}", index=op.invoke.index)
            return ModelOp(op, key, ("cas", freeze(arg)), (op.type, None))
        raise HistoryError(f"model {self.name} has no operation {op.f!r}", index=op.invoke.index)

    def step(self, state: Any, input: Any, output: Any) -> tuple[bool, Hashable]:
        f, arg = input
        outcome, read = output
        match f:
            case "read":
                return state == read, state
            case "write":
                return True, arg
            case "delete":
                return True, None
            case "cas":
                expected, new = arg
                matches = state == expected
                if outcome == "ok":
                    return matches, new
                if outcome == "fail":
                    return not matches, state  # a compare that did not match: a read
                return True, new if matches else state  # info: whichever the state allows
            case "append":
                if state is None:
                    return True, arg
                if not isinstance(state, str):
                    return False, state
                return True, state + arg
            case _:
                return False, state

    def is_read_only(self, input: Any, output: Any) -> bool:
        # reads, and cas that failed its compare, never change the register
        f: str = input[0]
        outcome: str = output[0]
        return f == "read" or (f == "cas" and outcome == "fail")

    def partition(self, mops: Sequence[ModelOp]) -> list[list[ModelOp]]:
        groups: dict[Hashable, list[ModelOp]] = defaultdict(list)
        for mop in mops:
            groups[mop.partition].append(mop)
        return [groups[k] for k in sorted(groups, key=repr)]

    def describe_op(self, input: Any, output: Any) -> str:
        f, arg = input
        outcome, read = output
        if f == "read":
            return f"read() -> {_show(read)}"
        if f == "delete":
            return "delete()" if outcome == "ok" else f"delete() -> {outcome}"
        if f == "cas":
            return f"cas({_show(arg[0])}, {_show(arg[1])}) -> {outcome}"
        suffix = "" if outcome == "ok" else f" -> {outcome}"
        return f"{f}({_show(arg)}){suffix}"

    def describe_state(self, state: Any) -> str:
        return _show(state)


MODELS: dict[str, Model] = {
    "kv": RegisterModel("kv", keyed=True),
    "cas-register": RegisterModel("cas-register", keyed=False),
}


def get_model(name: str) -> Model:
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; use one of {', '.join(MODELS)}") from None
