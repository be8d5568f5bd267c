"""Typed records as JSON: one reader and one writer for every dataclass that crosses a process or a file.

A record is a dataclass. Its fields' annotations (resolved with :func:`typing.get_type_hints`) say
what each JSON value must be, and ``typing.Annotated`` marks on them add what a type cannot:

=======================  ===========================================================================
``int``                  a JSON integer (``true`` is no number here)
``float``                a finite JSON number (an integer reads as a float); NaN and infinities,
                         which Python's ``json`` reads and writes by default, are unknown
``str``, ``bool``        a string; ``true`` or ``false``
``X | None``             also ``null``; such a field needs no default (absent, it reads as None)
``tuple[X, ...]``        a JSON array of ``X``; an element that does not read, in a tuple whose
                         elements may be None, reads as None (one bad reward keeps the others)
``Mapping[str, Any]``    a JSON object, kept as it is
``Any``                  anything
a dataclass              a JSON object read by these same rules, strictly: one field of it that
                         does not read makes the whole value not read (the record it belongs to
                         then knows it only as unknown); keys it does not know are dropped unless
                         it has an ``extra`` field
:class:`Range`           a number at least ``lo`` and at most ``hi``
:class:`OneOf`           one of the values given
:class:`Older`           a function that turns an older writer's shape into today's (applied first)
:data:`ROW`              a dataclass written as a JSON array of its fields in order (compact, for
                         many rows); a shorter array, from an older writer, leaves the later fields
                         at their defaults, and positions past the last field are ignored
=======================  ===========================================================================

:func:`read` reads the top level tolerantly: a field that is missing or ``null`` takes its default,
one present but not of its type (or out of range) takes its default too, is named in
:attr:`Reading.invalid` with the reason in :attr:`Reading.problems`, and a field that has no
default and may not be None leaves no record at all when it does not read (:attr:`Reading.record`
is None). A record with a field
named ``extra`` gets the keys it does not know there, and one with ``invalid`` gets the names of
the fields that did not read. What a caller makes of a partly read record is its own policy:
``summary.json`` keeps it (``mgpu runs`` shows what is known), a progress report or a checkpoint's
metadata is refused whole (:func:`strict`, :meth:`Reading.whole`).

:func:`plain` is the writer's half: a record as strict-JSON-ready data (nested records as objects,
or arrays where marked :data:`ROW`; tuples as lists; a non-finite float as ``null``), ``extra``'s keys
first and written back unchanged, ``invalid`` never written.

Standard library only.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar, get_args, get_origin

__all__ = [
    "ROW",
    "Count",
    "NonNegative",
    "Older",
    "OneOf",
    "Range",
    "Reading",
    "RecordError",
    "plain",
    "read",
    "strict",
]

T = TypeVar("T")

#: The field that keeps the keys a record does not know, and the one naming the fields that did not read.
EXTRA, INVALID = "extra", "invalid"


@dataclass(frozen=True)
class Range:
    """A number's bounds, both inclusive (None: unbounded)."""

    lo: float | None = None
    hi: float | None = None


@dataclass(frozen=True)
class OneOf:
    """The values a field may hold."""

    values: tuple[Any, ...]


@dataclass(frozen=True)
class Older:
    """Turns an older writer's shape of a value into today's before it is checked."""

    upgrade: Callable[[Any], Any]


class _Row:
    def __repr__(self) -> str:
        return "ROW"


#: A dataclass written as a JSON array of its fields (see the module docstring).
ROW: Any = _Row()

#: Non-negative integers and numbers, the commonest ranges.
Count = Annotated[int, Range(0)]
NonNegative = Annotated[float, Range(0)]


class RecordError(ValueError):
    """A record that does not read; the message names the first field that does not, and why."""


@dataclass(frozen=True)
class Reading(Generic[T]):
    """What :func:`read` made of a JSON value."""

    record: T | None
    """The record; None when the value is no object or a field without a default did not read."""

    invalid: tuple[str, ...] = ()
    """Fields present that did not read (they hold their defaults)."""

    problems: tuple[str, ...] = ()
    """One sentence per field that did not read, in field order: ``'pid' is "x", not an integer``."""

    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Keys the record does not know, as read."""

    def whole(self) -> T | None:
        """The record when every field read, else None."""
        return self.record if not self.problems else None


class _Bad(Exception):
    """A value that does not read; the message names where (``timing.per_rank[0].rank``) and why."""


def _bad(where: str, value: Any, need: str) -> _Bad:
    return _Bad(f"{where!r} is {_shown(value)}, {need}")


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


Check = Callable[[Any, str], Any]
_NONE = type(None)


@dataclass(frozen=True)
class _Field:
    name: str
    check: Check
    required: bool  # no default, and None is no value of it
    none_when_absent: bool  # no default, but None is a value of it: that is its "unknown"


@dataclass(frozen=True)
class _Spec:
    fields: tuple[_Field, ...]
    names: frozenset[str]


@functools.cache
def _spec(cls: type) -> _Spec:
    hints = _hints(cls)
    fields = []
    for f in dataclasses.fields(cls):
        if f.name in (EXTRA, INVALID):
            continue
        nullable = _admits_none(hints[f.name])
        defaulted = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        fields.append(
            _Field(f.name, _checker(hints[f.name]), not (defaulted or nullable), nullable and not defaulted)
        )
    return _Spec(tuple(fields), frozenset(f.name for f in dataclasses.fields(cls)))


def _checker(tp: Any) -> Check:
    """A function that returns a JSON value read as ``tp``, or raises :class:`_Bad`."""
    marks: tuple[Any, ...] = ()
    if get_origin(tp) is Annotated:
        tp, *rest = get_args(tp)
        marks = tuple(rest)
    check = _base(tp, row=ROW in marks)
    for mark in marks:
        if isinstance(mark, Range):
            check = _ranged(check, mark)
        elif isinstance(mark, OneOf):
            check = _one_of(check, mark)
    upgrades = [m.upgrade for m in marks if isinstance(m, Older)]
    if upgrades:
        inner, upgrade = check, upgrades[0]
        check = lambda v, where: inner(upgrade(v), where)  # noqa: E731
    return check


def _base(tp: Any, row: bool = False) -> Check:
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return _union(get_args(tp))
    if tp is Any:
        return lambda v, where: v
    if tp in _PLAIN:
        return _PLAIN[tp]
    if tp is float:
        return _float
    if origin is tuple:
        args = get_args(tp)
        if len(args) != 2 or args[1] is not Ellipsis:
            raise TypeError(f"records read tuple[X, ...] only, not {tp}")
        return _tuple(args[0])
    if origin in (Mapping, dict) or tp in (Mapping, dict):
        return _mapping
    if dataclasses.is_dataclass(tp):
        return _nested(tp, row)
    raise TypeError(f"records cannot read {tp!r}")


def _union(args: tuple[Any, ...]) -> Check:
    nullable = _NONE in args
    checks = [_checker(a) for a in args if a is not _NONE]

    def check(v: Any, where: str) -> Any:
        if v is None and nullable:
            return None
        error: _Bad | None = None
        for c in checks:
            try:
                return c(v, where)
            except _Bad as exc:
                error = error or exc
        raise error or _bad(where, v, "not null")

    return check


def _is(kind: type, message: str) -> Check:
    def check(v: Any, where: str) -> Any:
        if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):  # JSON's true is no count
            raise _bad(where, v, message)
        return v

    return check


_mapping = _is(Mapping, "not an object")
_PLAIN: dict[Any, Check] = {
    bool: _is(bool, "not true or false"),
    int: _is(int, "not an integer"),
    str: _is(str, "not a string"),
}


def _float(v: Any, where: str) -> Any:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise _bad(where, v, "not a number")
    if not math.isfinite(v):
        raise _bad(where, v, "not a finite number")
    return float(v)


def _ranged(inner: Check, r: Range) -> Check:
    def check(v: Any, where: str) -> Any:
        v = inner(v, where)
        if v is not None and r.lo is not None and v < r.lo:
            raise _bad(where, v, f"below {r.lo:g}")
        if v is not None and r.hi is not None and v > r.hi:
            raise _bad(where, v, f"above {r.hi:g}")
        return v

    return check


def _one_of(inner: Check, choices: OneOf) -> Check:
    def check(v: Any, where: str) -> Any:
        v = inner(v, where)
        if v is not None and v not in choices.values:
            raise _bad(where, v, "not one of " + ", ".join(map(str, choices.values)))
        return v

    return check


def _tuple(element: Any) -> Check:
    item = _checker(element)
    lenient = _admits_none(element)

    def check(v: Any, where: str) -> Any:
        if not isinstance(v, list | tuple):
            raise _bad(where, v, "not a list")
        out = []
        for i, x in enumerate(v):
            try:
                out.append(item(x, f"{where}[{i}]"))
            except _Bad:
                if not lenient:
                    raise
                out.append(None)
        return tuple(out)

    return check


def _admits_none(tp: Any) -> bool:
    if get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    return get_origin(tp) in (typing.Union, types.UnionType) and _NONE in get_args(tp)


def _nested(cls: type, row: bool) -> Check:
    def check(v: Any, where: str) -> Any:
        if row and isinstance(v, list | tuple):
            v = dict(zip((f.name for f in dataclasses.fields(cls)), v, strict=False))
        if not isinstance(v, Mapping):
            raise _bad(where, v, "not a list" if row else "not an object")
        spec = _spec(cls)
        values, problems = _fields(spec, v, where + ".")
        if problems:
            raise problems[0][1]
        return _build(cls, spec, values, {k: x for k, x in v.items() if k not in spec.names}, ())

    return check


def _fields(spec: _Spec, data: Mapping[str, Any], prefix: str = "") -> tuple[dict[str, Any], list]:
    """Each field's value read from ``data``, and (field, problem) of those that did not."""
    values: dict[str, Any] = {}
    problems: list[tuple[_Field, _Bad]] = []
    for f in spec.fields:
        v = data.get(f.name)
        if v is None:
            if f.required:
                need = "missing" if f.name not in data else "null, not allowed here"
                problems.append((f, _Bad(f"{prefix + f.name!r} is {need}")))
            elif f.none_when_absent:
                values[f.name] = None
            continue
        try:
            values[f.name] = f.check(v, prefix + f.name)
        except _Bad as exc:
            problems.append((f, exc))
            if f.none_when_absent:
                values[f.name] = None
    return values, problems


def _build(
    cls: type, spec: _Spec, values: dict[str, Any], extra: dict[str, Any], invalid: tuple[str, ...]
) -> Any:
    if EXTRA in spec.names:
        values[EXTRA] = extra
    if INVALID in spec.names:
        values[INVALID] = invalid
    return cls(**values)


def read(cls: type[T], data: object) -> Reading[T]:
    """``data`` (parsed JSON) read as a ``cls`` record, tolerantly (see the module docstring)."""
    if not isinstance(data, Mapping):
        return Reading(None, problems=(f"not a JSON object but {_shown(data)}",))
    spec = _spec(cls)
    values, problems = _fields(spec, data)
    invalid = tuple(f.name for f, _ in problems if data.get(f.name) is not None)
    extra = {k: v for k, v in data.items() if k not in spec.names}
    lost = any(f.required for f, _ in problems)  # a field without a default did not read
    record = None if lost else _build(cls, spec, values, extra, invalid)
    return Reading(record, invalid, tuple(str(p) for _, p in problems), extra)


def strict(cls: type[T], data: object) -> T:
    """``data`` read as a ``cls`` record in which every field reads, else :class:`RecordError`."""
    reading = read(cls, data)
    if reading.record is None or reading.problems:
        raise RecordError(reading.problems[0])
    return reading.record


def plain(value: Any) -> Any:
    """``value`` (a record, or anything in one) as strict-JSON-ready data."""
    return _plain(value, Any)


def _plain_record(record: Any, row: bool) -> Any:
    hints = _hints(type(record))
    if row:
        return [_plain(getattr(record, f.name), hints[f.name]) for f in dataclasses.fields(record)]
    out: dict[str, Any] = dict(getattr(record, EXTRA, None) or {}) if EXTRA in hints else {}
    for f in dataclasses.fields(record):
        if f.name not in (EXTRA, INVALID):
            out[f.name] = _plain(getattr(record, f.name), hints[f.name])
    return out


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def _plain(value: Any, tp: Any) -> Any:
    if isinstance(value, float):  # numpy's float64 too
        return value if math.isfinite(value) else None
    if value is None or type(value) in (int, str, bool):
        return value
    row = False
    if get_origin(tp) is Annotated:
        row = ROW in get_args(tp)[1:]
        tp = get_args(tp)[0]
    if get_origin(tp) in (typing.Union, types.UnionType):
        # The writer's unions are X | None; the type of a non-null value is X.
        rest = [a for a in get_args(tp) if a is not _NONE]
        return _plain(value, rest[0] if len(rest) == 1 else Any)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain_record(value, row)
    if isinstance(value, tuple | list):
        args = get_args(tp) if get_origin(tp) is tuple else ()
        element = args[0] if len(args) == 2 and args[1] is Ellipsis else Any
        return [_plain(v, element) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v, Any) for k, v in value.items()}
    return value
