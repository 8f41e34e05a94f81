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
Field types are checked against the dataclass's type hints, compiled once per class and cached.
The hot path is generated per class at its first use (the last section below): an encoder that
lays the fields and nested records out in one call, and a builder that checks a well-typed
payload inline and sets the new record's slots; every other payload goes the checked way, field by
field, which alone decides what to accept and what error to raise.
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
_unpackb = msgpack.unpackb

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
    # The class's own encoder and builder, generated at its first encode / decode (below).
    fields: Callable[[Any], tuple[Any, ...]] | None = None
    build: Callable[[tuple[Any, ...]], Any] | None = None


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


def _new_packer() -> Any:
    return msgpack.Packer(default=_default, use_bin_type=True)


# The ext header of every payload size below 256 (what _ext_header gives), looked up per frame.
_SMALL_EXT_HEADERS = tuple(_ext_header(_EXT_RECORD, size) for size in range(256))


def encode(obj: Any) -> bytes:
    """Encode a registered record (or any value built from supported types)."""
    spec = _BY_CLASS.get(type(obj))
    try:
        packer = _PACKERS.pop()
    except IndexError:
        packer = _new_packer()
    try:
        if spec is None:
            return packer.pack(obj)  # type: ignore[no-any-return]
        fields = spec.fields
        if fields is None:
            fields = _compile_fields(spec)
        payload: bytes = packer.pack(fields(obj))
    except EncodeError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:
        raise EncodeError(f"cannot encode {type(obj).__name__}: {exc}") from exc
    finally:
        _PACKERS.append(packer)
    size = len(payload)
    if size < 256:
        return _SMALL_EXT_HEADERS[size] + payload
    return _ext_header(_EXT_RECORD, size) + payload


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
    build = spec.build
    if build is None:
        build = _compile_build(spec)
    return build(payload)


def _build_checked(spec: _Spec, payload: tuple[Any, ...]) -> Any:
    """The checked path of `_build` (the generated builder's fallback): arity, then every field
    through its checker; the one place that decides what a payload of `spec`'s tag means."""
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
    if type(data) is not bytes and not isinstance(data, bytearray | memoryview):
        raise DecodeError(f"expected bytes, got {type(data).__name__}")
    try:
        # An ext 8 of code 1 spanning the frame (payloads of 17 to 255 bytes: most frames) is
        # recognised inline; other sizes by _record_payload_start.
        size = len(data)
        if size > 3 and data[0] == 0xC7 and data[2] == _EXT_RECORD and data[1] == size - 3:
            start = 3
        else:
            start = _record_payload_start(data)
        if start:
            # One top-level record (every frame): its payload is unpacked directly, without
            # a first unpackb that only finds the ext and calls back into Python.
            payload = _unpackb(data[start:], ext_hook=_ext_hook, use_list=False, raw=False)
            spec = (_BY_TAG.get(payload[0]) if type(payload) is tuple and payload
                    and type(payload[0]) is str else None)
            if spec is not None:  # what `_build` checks first
                obj = (spec.build or _compile_build(spec))(payload)
            else:
                obj = _build(payload, None)
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


# ------------------------------------------------------------ per-class encoders and builders
#
# Each class gets one encoder and one builder, generated from its fields and type hints the first
# time it is encoded or decoded (hints may name classes defined after the registration), so a
# frame pays for no generic per-field machinery:
# - the encoder reads the fields into the `(tag, ...)` tuple itself, a nested record field (`R`,
#   `R | None`, `tuple[R, ...]`) already laid out as `(tag, ...)`: exactly what `_default` returns
#   for it, so the bytes are the same, without msgpack calling back into Python per record;
# - the builder takes a payload of full arity whose fields have exactly the expected types (an
#   int for `int`, None or a str for `str | None`, a value of an enum, a nested `[tag, ...]` of
#   the expected record...) and builds the instance: by setting its slots directly, as the
#   `__init__` dataclasses generated would, when the class has that `__init__` and no
#   `__post_init__`, else through its constructor. Any other payload (fewer fields, other
#   types, anything malformed) goes to `_build_checked`, which decides: accepts, converts, or
#   raises the DecodeError with its message. So the fast path never rejects, and never builds
#   what the checked path would not (tests/raft/test_codec_generated.py holds them together).


class _Fallback(Exception):
    """Raised inside a generated builder: this payload is for the checked path."""


def _fallback() -> Any:
    raise _Fallback


_PLAIN = {int: "int", str: "str", bytes: "bytes", bool: "bool", type(None): "NoneType"}


def _record_spec(hint: Any) -> _Spec | None:
    return _BY_CLASS.get(hint) if isinstance(hint, type) else None


def _union_args(hint: Any) -> tuple[Any, ...] | None:
    origin = typing.get_origin(hint)
    return typing.get_args(hint) if origin is typing.Union or origin is types.UnionType else None


def _compile_fields(spec: _Spec) -> Callable[[Any], tuple[Any, ...]]:
    """Generate `spec`'s encoder: object -> (tag, field_1, ...), nested records laid out."""
    try:
        hints = typing.get_type_hints(spec.cls)
    except (NameError, TypeError):  # unresolvable hints: the generic getter, same bytes
        tag, getter = spec.tag, spec.getter
        spec.fields = lambda obj: (tag, *getter(obj))
        return spec.fields
    env: dict[str, Any] = {"_tag": spec.tag}
    lines: list[str] = []
    items: list[str] = []
    for i, name in enumerate(spec.names):
        hint = hints[name]
        args = _union_args(hint)
        if args is not None and len(args) == 2 and type(None) in args:
            hint = args[0] if args[1] is type(None) else args[1]  # R | None: laid out if an R
        each = typing.get_origin(hint) is tuple and typing.get_args(hint)[1:] == (Ellipsis,)
        nested = _record_spec(typing.get_args(hint)[0] if each else hint)
        if nested is None:
            items.append(f"o.{name}")
            continue
        env[f"_R{i}"], env[f"_t{i}"] = nested.cls, nested.tag
        x = "x" if each else f"v{i}"
        layout = ", ".join([f"_t{i}", *(f"{x}.{n}" for n in nested.names)])
        lines.append(f"    v{i} = o.{name}")
        if each:  # one record (a sequential commit's Fetch answer) without a comprehension
            lines += [
                f"    if type(v{i}) is tuple and len(v{i}) == 1:",
                f"        x = v{i}[0]",
                f"        if type(x) is _R{i}:",
                f"            v{i} = (({layout}),)",
                f"    elif type(v{i}) is tuple:",
                f"        v{i} = [({layout}) if type(x) is _R{i} else x for x in v{i}]",
            ]
        else:
            lines.append(f"    if type(v{i}) is _R{i}:")
            lines.append(f"        v{i} = ({layout})")
        items.append(f"v{i}")
    fields = "".join(item + ", " for item in items)
    source = "\n".join(["def fields(o):", *lines, f"    return (_tag, {fields})"])
    spec.fields = _generated(source, "fields", env, spec)
    return spec.fields


def _generated(source: str, name: str, env: dict[str, Any], spec: _Spec) -> Any:
    code = compile(source, f"<quorum.codec {name} of {spec.tag}>", "exec")
    exec(code, env)  # noqa: S102 - source built here from field names and hints only
    return env[name]


_COMPILING: set[str] = set()  # tags whose builder is being generated (a record nested in itself)


def _compile_build(spec: _Spec) -> Callable[[tuple[Any, ...]], Any]:
    """Generate `spec`'s builder: payload tuple (tag checked by the caller) -> record."""
    checkers = spec.checkers if spec.checkers is not None else _compile(spec)
    hints = typing.get_type_hints(spec.cls)
    _COMPILING.add(spec.tag)
    try:
        env: dict[str, Any] = {"_spec": spec, "_slow": _build_checked, "_cls": spec.cls,
                               "_Fallback": _Fallback, "_fallback": _fallback,
                               "DecodeError": DecodeError}  # fmt: skip
        body: list[str] = []
        for i, name in enumerate(spec.names):
            var = f"f{i}"
            body += _field_code(var, hints[name], env) or _checker_code(var, checkers[i], env)
    finally:
        _COMPILING.discard(spec.tag)
    names = [f"f{i}" for i in range(len(spec.names))]
    lines = ["def build(p):", f"    if len(p) != {len(names) + 1}:"]
    lines.append("        return _slow(_spec, p)")
    if names:
        lines.append(f"    _, {', '.join(names)}, = p")
    if body:
        lines += ["    try:", *("        " + b for b in body)]
        lines += ["    except (_Fallback, DecodeError):", "        return _slow(_spec, p)"]
    setters = _slot_setters(spec)
    if setters is None:
        lines.append(f"    return _cls({', '.join(names)})")
    else:
        env["_new"] = object.__new__
        lines.append("    o = _new(_cls)")
        for i, setter in enumerate(setters):
            env[f"_s{i}"] = setter
            lines.append(f"    _s{i}(o, f{i})")
        lines.append("    return o")
    spec.build = _generated("\n".join(lines), "build", env, spec)
    return spec.build


def _checker_code(var: str, checker: _Checker, env: dict[str, Any]) -> list[str]:
    """A field with no fast form: its own checker (a DecodeError sends the payload to the checked
    path, which reports it with the record's tag)."""
    env[f"_c_{var}"] = checker
    return [f"{var} = _c_{var}({var})"]


def _field_code(var: str, hint: Any, env: dict[str, Any]) -> list[str] | None:
    """Statements that keep `var` if it has exactly a type `hint`'s checker passes unchanged,
    convert it as that checker would (an enum value, a nested record), or raise _Fallback; None
    when `hint` has no such form here."""
    args = _union_args(hint)
    if args is None:
        args = (hint,)
    if all(a in _PLAIN for a in args):
        test = " and ".join(f"type({var}) is not {_PLAIN[a]}" for a in args)
        env.update(NoneType=type(None))
        return [f"if {test}:", "    raise _Fallback"]
    if len(args) == 2 and type(None) in args:  # X | None with X not plain: None, or an X
        inner = _field_code(var, args[0] if args[1] is type(None) else args[1], env)
        return None if inner is None else [f"if {var} is not None:", *("    " + x for x in inner)]
    if len(args) != 1:
        return None
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum_code(var, hint, env)
    nested = _nested_builder(var, hint, env)
    if nested is not None:
        return [f"if type({var}) is tuple and {var} and {var}[0] == _t_{var}:",
                f"    {var} = _b_{var}({var})", "else:", "    raise _Fallback"]  # fmt: skip
    if typing.get_origin(hint) is tuple and typing.get_args(hint)[1:] == (Ellipsis,):
        item = typing.get_args(hint)[0]
        if _nested_builder(var, item, env) is not None:
            each = f"_b_{var}(x) if type(x) is tuple and x and x[0] == _t_{var} else _fallback()"
            return [f"if type({var}) is not tuple:", "    raise _Fallback",
                    f"if len({var}) == 1:", f"    x = {var}[0]", f"    {var} = ({each},)",
                    "else:", f"    {var} = tuple([{each} for x in {var}])"]  # fmt: skip
    return None


def _enum_code(var: str, enum_cls: type[enum.Enum], env: dict[str, Any]) -> list[str] | None:
    """An enum whose values are all ints or all strs: one dict lookup, as `enum_cls(v)` finds
    a member of that value (its other inputs, True for 1 say, go to the checked path)."""
    value_types = {type(m.value) for m in enum_cls}
    if len(value_types) != 1 or not value_types <= {int, str}:
        return None
    env[f"_m_{var}"] = {m.value: m for m in enum_cls}
    env["_MISSING"] = _MISSING
    (value_type,) = value_types
    return [f"{var} = _m_{var}.get({var}, _MISSING) if type({var}) is {_PLAIN[value_type]}"
            " else _MISSING", f"if {var} is _MISSING:", "    raise _Fallback"]  # fmt: skip


_MISSING = object()


def _nested_builder(var: str, hint: Any, env: dict[str, Any]) -> Callable[..., Any] | None:
    """Bind the builder of the registered record `hint` (as `_b_<var>`, its tag `_t_<var>`)."""
    spec = _record_spec(hint)
    if spec is None:
        return None
    if spec.build is not None:
        build = spec.build
    elif spec.tag in _COMPILING:  # a record nested in itself: look its builder up per call

        def build(payload: tuple[Any, ...], nested: _Spec = spec) -> Any:
            return (nested.build or _compile_build(nested))(payload)

    else:
        build = _compile_build(spec)
    env[f"_b_{var}"], env[f"_t_{var}"] = build, spec.tag
    return build


def _slot_setters(spec: _Spec) -> list[Callable[[Any, Any], None]] | None:
    """The slots' setters in field order, when setting them is all `spec.cls(*fields)` does:
    its `__init__` is the one dataclasses generated (compiled from a string, not written in a
    file), no `__post_init__`, every field an `__init__` parameter and a slot. Else None."""
    cls = spec.cls
    init = cls.__dict__.get("__init__")
    code = getattr(init, "__code__", None)
    if code is None or code.co_filename != "<string>" or hasattr(cls, "__post_init__"):
        return None
    if not all(f.init for f in dataclasses.fields(cls)):
        return None
    setters = []
    for name in spec.names:
        slot = next((k.__dict__[name] for k in cls.__mro__ if name in k.__dict__), None)
        if type(slot) is not types.MemberDescriptorType:
            return None
        setters.append(slot.__set__)
    return setters
