"""The one place that knows bytes: a msgpack codec for frozen dataclasses (everything
else sees typed messages).

Any frozen dataclass registered with a stable string tag can be encoded. Wire shape:

- a top-level record is a msgpack ExtType(code 1) whose payload is the msgpack array
  `[tag, field_1, ..., field_n]` in declaration order (positional: no field names on the wire);
- a record nested inside another is the plain array `[tag, field_1, ...]`, turned back into a
  record by the enclosing field's type hint (so one frame costs two packb calls however deeply
  it nests; a nested ExtType is still accepted);
- an Enum is its `.value`, turned back into the enum by the field's type hint;
- tuples, lists -> arrays (decoded as tuples), dicts -> maps, bytes -> bin, str -> str,
  int/float/bool/None as themselves.

Evolution rule: a field may be appended with a default; a decoder accepts payloads that omit
trailing fields that have defaults (older senders) and rejects payloads with more fields than it
knows (`unknown field`).

Invariant: `decode` raises `DecodeError` and nothing else on any malformed input (bad msgpack,
trailing bytes, unknown tag, wrong arity, a value of the wrong type, a failing constructor).
Field types are checked against the dataclass's type hints, compiled once per class and cached, so
the hot path is an attrgetter on encode and a tuple of small checker closures on decode.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import math
import struct
import types
import typing
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar

import msgpack  # type: ignore[import-untyped]

__all__ = ["DecodeError", "EncodeError", "decode", "encode", "register", "registered_tags"]

_EXT_RECORD = 1

T = TypeVar("T")
_Checker = Callable[[Any], Any]


class DecodeError(ValueError):
    """Malformed input at the edge: the frame is dropped and the connection closed."""


class EncodeError(TypeError):
    """An object the codec cannot encode (unregistered class, unsupported value type)."""


@dataclasses.dataclass(slots=True)
class _Spec:
    cls: type[Any]
    tag: str
    names: tuple[str, ...]
    getter: Callable[[Any], Any]
    required: int  # fields without defaults: a payload must carry at least these
    checkers: tuple[_Checker, ...] | None = None  # compiled lazily (forward references)
    # Every tuple of field types the checkers would pass unchanged, when each field is a plain
    # int/str/bytes/bool or a union of those and None (compiled with the checkers; else None):
    # a payload whose types are one of them is built without a call per field.
    exact_types: frozenset[tuple[type[Any], ...]] | None = None


_BY_CLASS: dict[type[Any], _Spec] = {}
_BY_TAG: dict[str, _Spec] = {}


def register(tag: str) -> Callable[[type[T]], type[T]]:
    """Class decorator (or `register("tag")(Cls)`): make a frozen dataclass encodable under
    `tag`. Tags are part of the wire format: never reuse or rename one."""

    def wrap(cls: type[T]) -> type[T]:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls!r} is not a dataclass")
        if not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
            raise TypeError(f"{cls.__name__} must be frozen to be a wire type")
        existing = _BY_TAG.get(tag)
        if existing is not None and existing.cls is not cls:
            raise ValueError(f"codec tag {tag!r} already registered for {existing.cls.__name__}")
        fields = dataclasses.fields(cls)
        names = tuple(f.name for f in fields)
        required = sum(
            1
            for f in fields
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        )
        if len(names) == 1:
            single = attrgetter(names[0])
            getter: Callable[[Any], Any] = lambda obj: (single(obj),)  # noqa: E731
        elif names:
            getter = attrgetter(*names)
        else:
            getter = lambda obj: ()  # noqa: E731
        spec = _Spec(cls, tag, names, getter, required)
        _BY_CLASS[cls] = spec
        _BY_TAG[tag] = spec
        return cls

    return wrap


def registered_tags() -> dict[str, type[Any]]:
    """Tag -> class, for diagnostics and tests."""
    return {tag: spec.cls for tag, spec in _BY_TAG.items()}


# ---------------------------------------------------------------------------------------- encode


def _default(obj: Any) -> Any:
    """msgpack's hook for types it does not know: nested records become [tag, fields...]."""
    spec = _BY_CLASS.get(type(obj))
    if spec is not None:
        return (spec.tag, *spec.getter(obj))
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, frozenset | set):
        return sorted(obj)
    raise EncodeError(f"cannot encode {type(obj).__name__}: register it with quorum.codec")


# Packers are reused (`packb` builds a new one, with its buffer, on every call): a pool rather
# than one shared packer, so a nested or concurrent encode takes its own (list pop/append are
# atomic). A packer resets its buffer after each pack, also when packing raises.
_PACKERS: list[Any] = []

_FIXEXT = {1: 0xD4, 2: 0xD5, 4: 0xD6, 8: 0xD7, 16: 0xD8}
_EXT8 = struct.Struct(">BBb")
_EXT16 = struct.Struct(">BHb")
_EXT32 = struct.Struct(">BIb")


def _ext_header(code: int, size: int) -> bytes:
    """The msgpack ext header msgpack itself writes for a payload of `size` bytes (fixext for
    sizes 1, 2, 4, 8, 16; else ext 8/16/32), so `header + payload` is what packing
    ExtType(code, payload) gives, without a second packb."""
    fixed = _FIXEXT.get(size)
    if fixed is not None:
        return bytes((fixed, code))
    if size < 1 << 8:
        return _EXT8.pack(0xC7, size, code)
    if size < 1 << 16:
        return _EXT16.pack(0xC8, size, code)
    return _EXT32.pack(0xC9, size, code)


def encode(obj: Any) -> bytes:
    """Encode a registered record (or any value built from supported types)."""
    try:
        packer = _PACKERS.pop()
    except IndexError:
        packer = msgpack.Packer(default=_default, use_bin_type=True)
    try:
        spec = _BY_CLASS.get(type(obj))
        if spec is None:
            return packer.pack(obj)  # type: ignore[no-any-return]
        payload: bytes = packer.pack((spec.tag, *spec.getter(obj)))
        return _ext_header(_EXT_RECORD, len(payload)) + payload
    except EncodeError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:
        raise EncodeError(f"cannot encode {type(obj).__name__}: {exc}") from exc
    finally:
        _PACKERS.append(packer)


# ---------------------------------------------------------------------------------------- decode


def _ext_hook(code: int, data: bytes) -> Any:
    if code != _EXT_RECORD:
        raise DecodeError(f"unknown msgpack ext code {code}")
    payload = msgpack.unpackb(data, ext_hook=_ext_hook, use_list=False, raw=False)
    return _build(payload, None)


def _build(payload: Any, want: _Spec | None) -> Any:
    """[tag, fields...] -> the record, checking every field against its type hint."""
    if type(payload) is not tuple or not payload or type(payload[0]) is not str:
        raise DecodeError("record is not [tag, fields...]")
    spec = _BY_TAG.get(payload[0])
    if spec is None:
        raise DecodeError(f"unknown record tag {payload[0]!r}")
    if want is not None and spec is not want:
        raise DecodeError(f"expected {want.tag}, got {spec.tag}")
    n = len(payload) - 1
    if n > len(spec.names):
        raise DecodeError(f"{spec.tag}: unknown field(s): {n} values for {len(spec.names)} fields")
    if n < spec.required:
        missing = spec.names[n : spec.required]
        raise DecodeError(f"{spec.tag}: missing field(s) {', '.join(missing)}")
    checkers = spec.checkers
    if checkers is None:
        checkers = _compile(spec)
    exact = spec.exact_types
    if exact is not None and n == len(checkers):
        fields = payload[1:]
        if tuple(map(type, fields)) in exact:
            return spec.cls(*fields)
    try:
        checked = [check(v) for check, v in zip(checkers, payload[1:], strict=False)]
    except DecodeError as exc:
        raise DecodeError(f"{spec.tag}: {exc}") from None
    return spec.cls(*checked)


def decode(data: bytes, expected: type[T] | None = None) -> T:
    """Decode one registered record; `expected` (a class) narrows what is accepted."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise DecodeError(f"expected bytes, got {type(data).__name__}")
    try:
        start = _record_payload_start(data)
        if start:
            # One top-level record (every frame): its payload is unpacked directly, without
            # a first unpackb that only finds the ext and calls back into Python.
            obj = _build(msgpack.unpackb(data[start:], ext_hook=_ext_hook, use_list=False,
                                         raw=False), None)  # fmt: skip
        else:
            obj = msgpack.unpackb(data, ext_hook=_ext_hook, use_list=False, raw=False)
    except DecodeError:
        raise
    except Exception as exc:  # the edge: any malformed input becomes one typed error
        raise DecodeError(f"malformed frame: {type(exc).__name__}: {exc}") from exc
    if type(obj) not in _BY_CLASS:
        raise DecodeError(f"expected a registered record, got {type(obj).__name__}")
    if expected is not None and not isinstance(obj, expected):
        raise DecodeError(f"expected {expected.__name__}, got {type(obj).__name__}")
    return obj  # type: ignore[no-any-return]


def _record_payload_start(data: bytes | bytearray | memoryview) -> int:
    """Where the payload starts if `data` is exactly one record ext (fixext or ext 8/16/32 of
    code 1 whose length is the rest of `data`), else 0 (then the general path decides, errors included)."""
    size = len(data)
    if size < 3:
        return 0
    first = data[0]
    if 0xD4 <= first <= 0xD8:  # fixext 1, 2, 4, 8, 16
        start, length = 2, 1 << (first - 0xD4)
    elif first == 0xC7:
        start, length = 3, data[1]
    elif first == 0xC8 and size >= 4:
        start, length = 4, (data[1] << 8) | data[2]
    elif first == 0xC9 and size >= 6:
        start, length = 6, int.from_bytes(data[1:5], "big")
    else:
        return 0
    if data[start - 1] != _EXT_RECORD or start + length != size:
        return 0
    return start


# ------------------------------------------------------------------------------ type checkers


def _compile(spec: _Spec) -> tuple[_Checker, ...]:
    hints = typing.get_type_hints(spec.cls)
    spec.exact_types = _exact_types([hints[name] for name in spec.names])
    spec.checkers = tuple(_checker_for(hints[name], name) for name in spec.names)
    return spec.checkers


_PASSED_AS_IS = (int, str, bytes, bool, type(None))  # types whose checkers return the value
_MAX_EXACT_TYPE_TUPLES = 256


def _exact_types(hints: list[Any]) -> frozenset[tuple[type[Any], ...]] | None:
    """The field type tuples `_build` may take without checking each field, or None when a
    field's checker converts or looks inside its value (enums, floats, tuples, records...).
    Exact types only: a bool is not an int here, as `_type_is` has it."""
    per_field: list[tuple[type[Any], ...]] = []
    for hint in hints:
        origin = typing.get_origin(hint)
        args = typing.get_args(hint) if origin is typing.Union or origin is types.UnionType else (hint,)
        if not all(a in _PASSED_AS_IS for a in args):
            return None
        per_field.append(args)
    if math.prod(len(a) for a in per_field) > _MAX_EXACT_TYPE_TUPLES:
        return None
    return frozenset(itertools.product(*per_field))


def _fail(name: str, want: str, value: Any) -> DecodeError:
    return DecodeError(f"field {name}: expected {want}, got {type(value).__name__}")


def _checker_for(hint: Any, name: str) -> _Checker:  # noqa: C901 - one branch per type form
    if hint is Any or hint is object:
        return _any_checker
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return _union_checker(typing.get_args(hint), name)
    if hint is type(None):
        return _exact(name, "None", lambda v: v is None)
    if hint is bool:
        return _exact(name, "bool", lambda v: v is True or v is False)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum_checker(hint, name)
    if hint is float:
        return lambda v: float(v) if type(v) in (int, float) else _raise(_fail(name, "float", v))
    if hint in (int, str, bytes):
        return _type_is(hint, name)
    if origin is tuple:
        return _tuple_checker(typing.get_args(hint), name)
    if origin is dict:
        key_t, val_t = typing.get_args(hint)
        kc, vc = _checker_for(key_t, name), _checker_for(val_t, name)

        def check_dict(v: Any) -> Any:
            if type(v) is not dict:
                raise _fail(name, "map", v)
            return {kc(k): vc(x) for k, x in v.items()}

        return check_dict
    if origin is typing.Literal:
        allowed = typing.get_args(hint)
        return _exact(name, f"one of {allowed}", lambda v: v in allowed)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _record_checker(hint, name)
    raise TypeError(f"quorum.codec: unsupported field type {hint!r} for field {name}")


def _any_checker(v: Any) -> Any:
    # An untyped field: a nested [tag, ...] array of a known tag is taken for a record.
    if type(v) is tuple and v and type(v[0]) is str and v[0] in _BY_TAG:
        return _build(v, None)
    return v


def _record_checker(cls: type[Any], name: str) -> _Checker:
    def check(v: Any) -> Any:
        if type(v) is cls:
            return v  # a nested ExtType frame, already built
        spec = _BY_CLASS.get(cls)
        if spec is None:
            raise DecodeError(f"field {name}: {cls.__name__} is not a registered record")
        if type(v) is not tuple:
            raise _fail(name, cls.__name__, v)
        return _build(v, spec)

    return check


def _raise(exc: Exception) -> Any:
    raise exc


def _exact(name: str, want: str, ok: Callable[[Any], bool]) -> _Checker:
    def check(v: Any) -> Any:
        if not ok(v):
            raise _fail(name, want, v)
        return v

    return check


def _type_is(cls: type[Any], name: str) -> _Checker:
    """Exactly `cls` (no subclass: a bool is not an int here), one call per field."""
    want = cls.__name__

    def check(v: Any) -> Any:
        if type(v) is not cls:
            raise _fail(name, want, v)
        return v

    return check


def _enum_checker(enum_cls: type[enum.Enum], name: str) -> _Checker:
    def check(v: Any) -> Any:
        try:
            return enum_cls(v)
        except (ValueError, TypeError):
            raise _fail(name, enum_cls.__name__, v) from None

    return check


def _rejects_none(hint: Any) -> bool:
    """The checker of `hint` refuses None whatever the class (an Enum might have a None value,
    Any and Literal may allow it: those are not counted)."""
    if hint in (int, str, bytes, bool, float):
        return True
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return True
    return typing.get_origin(hint) in (tuple, dict)


def _union_checker(args: tuple[Any, ...], name: str) -> _Checker:
    checkers = [_checker_for(a, name) for a in args]
    want = " | ".join(getattr(a, "__name__", str(a)) for a in args)
    # `X | None` holding None (most optional fields, most of the time): what trying X first
    # would end in, without raising and catching X's DecodeError.
    none_first = type(None) in args and all(
        _rejects_none(a) for a in args[: args.index(type(None))]
    )

    def check(v: Any) -> Any:
        if v is None and none_first:
            return None
        for c in checkers:
            try:
                return c(v)
            except DecodeError:
                continue
        raise _fail(name, want, v)

    return check


def _tuple_checker(args: tuple[Any, ...], name: str) -> _Checker:
    if len(args) == 2 and args[1] is Ellipsis:
        item = _checker_for(args[0], name)

        def check_var(v: Any) -> Any:
            if type(v) is not tuple:
                raise _fail(name, "array", v)
            return tuple(map(item, v))

        return check_var
    items = [_checker_for(a, name) for a in args]

    def check_fixed(v: Any) -> Any:
        if type(v) is not tuple or len(v) != len(items):
            raise _fail(name, f"array of {len(items)}", v)
        return tuple(c(x) for c, x in zip(items, v, strict=True))

    return check_fixed
