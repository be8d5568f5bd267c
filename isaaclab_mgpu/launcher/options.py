"""The one form of a command-line option: a field of a frozen dataclass, declared once.

An option is a dataclass field whose default is :func:`option`. The field's name and annotation
are the option's name and type; the declaration holds everything else, once:

- ``help``: what ``--help`` shows and the field's documentation (the dataclass repeats it nowhere);
- ``panel``: the ``--help`` panel; ``metavar``: the value's name in it;
- ``flag``: the spelling when it is not ``--<field>`` (``--num_gpus`` for ``nproc_per_node``);
  ``names``: other spellings listed in ``--help`` (``--gpus``, ``-m``); ``aliases``: names accepted
  but not listed (torchrun's ``--nproc_per_node``). Every hyphen spelling is accepted too;
- ``off``: for a flag, a second flag (name, help) that sets the field False; ``on=False`` when
  only that one exists (``--no_ceiling``);
- ``parse``: the text as typed → the field's value (the default reads numbers for ``int`` and
  ``float`` fields by :func:`read_number`, the one number rule); ``choices`` and ``check`` judge
  the value however it came (typed, filled from a scheduler's variables, or given in code);
- ``commands``: the commands that take it (None: every command given the dataclass).

:func:`from_text` builds such a dataclass from values as typed; :func:`check_options` is what its
``__post_init__`` calls. The command layer (:mod:`isaaclab_mgpu.cli.options`) turns the
declarations into Typer options.

To add an option: give the dataclass it belongs to (``LaunchSpec`` for a launch option,
``JobOptions``, ``ScaleOptions`` for a command's own) a field ``name: type = option(default, help,
panel=..., metavar=..., parse=/choices=/check=..., commands=...)``; a rule that joins it to other
options goes in the class's validation (``spec._validate``); ``docs/commands.md`` gets its row
(``tests/test_docs.py``). Nothing in ``cli/`` changes. A command taking a new dataclass says so
once: ``@launch_command(app, "name", group=Class)`` and a keyword parameter ``group: Class``.

Each failure is a :class:`UsageError` of one line naming the value and the fix. Stdlib only: the
launcher side builds specs without the command line's libraries.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from isaaclab_mgpu.contract.errors import UsageError
from isaaclab_mgpu.contract.text import has_control

#: ``Field.metadata`` key of an option's declaration.
KEY = "mgpu.option"

#: An integer as typed in ASCII digits (``int`` alone also reads full-width digits and ``1_0``).
INTEGER = re.compile(r"^[+-]?[0-9]+$")

#: The launch commands (each takes every launch option whose ``commands`` is None).
LAUNCHING = ("train", "dry-run", "submit", "scale")
RUNNING = ("train", "dry-run", "submit")


@dataclass(frozen=True)
class Opt:
    """One option's declaration (see the module docstring for each part)."""

    help: str
    panel: str | None = None
    flag: str | None = None
    names: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    metavar: str | None = None
    parse: Callable[[str, str], Any] | None = None
    choices: tuple[str, ...] = ()
    check: Callable[[Any, str], object] | None = None
    off: tuple[str, str] | None = None
    on: bool = True
    hidden: bool = False
    commands: tuple[str, ...] | None = None


def option(default: Any = None, help: str = "", **declaration: Any) -> Any:
    """A dataclass field that is a command-line option (see :class:`Opt`)."""
    return dataclasses.field(default=default, metadata={KEY: Opt(help, **declaration)})


def declared(cls: Any) -> Iterator[tuple[dataclasses.Field[Any], Opt]]:
    """The option fields of dataclass ``cls``, in declaration order, with their declarations."""
    for f in dataclasses.fields(cls):
        if KEY in f.metadata:
            yield f, f.metadata[KEY]


def flag_of(f: dataclasses.Field[Any], opt: Opt | None = None) -> str:
    """The spelling ``--help`` lists first for field ``f``."""
    opt = opt or f.metadata.get(KEY)
    return "--" + (opt.flag if opt is not None and opt.flag else f.name)


def to_argv(obj: Any) -> list[str]:
    """The options of dataclass ``obj`` that differ from their defaults, as its command reads them."""
    argv: list[str] = []
    for f, opt in declared(type(obj)):
        value = getattr(obj, f.name)
        if value == f.default:
            continue
        if isinstance(value, bool):  # a flag, or the off flag of a pair (--no_inject_distributed)
            argv.append(flag_of(f, opt) if value else "--" + opt.off[0])  # type: ignore[index]
        elif isinstance(value, tuple):
            argv += [flag_of(f, opt), ",".join(str(v) for v in value)]
        else:
            argv += [flag_of(f, opt), format(value, "g") if isinstance(value, float) else str(value)]
    return argv


def kind(f: dataclasses.Field[Any]) -> str:
    """``bool``, ``int``, ``float`` or ``str``: what the field's annotation holds (None aside)."""
    head = str(f.type).split("|")[0].strip()
    return head if head in ("bool", "int", "float") else "str"


def read_number(text: object, kind: type) -> Any:
    """``text`` as an int or finite float in ASCII digits; ValueError otherwise (the one number rule)."""
    # int/float also read full-width digits, 1_000, nan and inf: no number a user means.
    t = str(text).strip()
    if not t.isascii() or "_" in t or (kind is int and not INTEGER.match(t)):
        raise ValueError(text)
    number = kind(t)
    if kind is float and not math.isfinite(number):
        raise ValueError(text)
    return number


def number(kind: type, what: str | None = None) -> Callable[[str, str], Any]:
    """A ``parse`` reading ``kind`` by :func:`read_number`; the error says ``what`` it must be."""
    shown = what or f"a valid {'integer' if kind is int else 'float'} (a finite number in ASCII digits)"

    def parse(text: str, flag: str) -> Any:
        try:
            return read_number(text, kind)
        except ValueError:
            raise UsageError(f"{flag} {text!r} is not {shown}") from None

    return parse


def parse_one(f: dataclasses.Field[Any], value: Any) -> Any:
    """``value`` for field ``f``: text read by the field's parser, anything else as given."""
    opt = f.metadata.get(KEY)
    if not isinstance(value, str) or opt is None:
        return value
    parse = opt.parse or {"int": number(int), "float": number(float)}.get(kind(f))
    return parse(value, flag_of(f, opt)) if parse is not None else value


def from_text(cls: Any, **values: Any) -> Any:
    """``cls`` built from option values as typed (text is parsed; None, bools and numbers kept)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    return cls(**{name: parse_one(fields[name], v) for name, v in values.items()})


def check_options(obj: Any) -> None:
    """Judge each option value of dataclass ``obj`` on its own (its combinations are the class's)."""
    for f, opt in declared(obj):
        value = getattr(obj, f.name)
        flag = flag_of(f, opt)
        for v in value if isinstance(value, tuple) else (value,):
            if isinstance(v, str) and has_control(v):
                raise UsageError(
                    f"{flag} {v!r} holds a control character (a pasted newline?); "
                    "retype the value on one line"
                )
        if value is None or isinstance(value, bool):
            continue
        if opt.choices and value not in opt.choices:
            *rest, last = opt.choices
            raise UsageError(f"{flag} {value!r} is unknown; choose {', '.join(rest)} or {last}")
        if opt.check is not None:
            opt.check(value, flag)


def at_least(low: float, fix: str) -> Callable[[Any, str], None]:
    """A ``check``: the value is ``low`` or more, else ``FLAG VALUE FIX``."""

    def check(value: Any, flag: str) -> None:
        if not value >= low:
            raise UsageError(f"{flag} {value} {fix}")

    return check
