"""Each option is declared once, and the commands' options come from that one declaration.

A declaration is an ``option(...)`` field (``isaaclab_mgpu/launcher/options.py``) or a
``typer.Option(...)`` call; the AST of the whole package is read, so a second declaration of a
name anywhere (a Typer option repeating a spec field, two fields with one spelling) fails here.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections import Counter
from pathlib import Path

import click
import pytest
import typer

from isaaclab_mgpu.cli import app
from isaaclab_mgpu.launcher.jobfiles import JobOptions
from isaaclab_mgpu.launcher.options import Opt, declared, flag_of, from_text, read_number
from isaaclab_mgpu.launcher.probe.config import ProbeOptions
from isaaclab_mgpu.launcher.scale_options import ScaleOptions
from isaaclab_mgpu.launcher.spec import LaunchSpec

PACKAGE = Path(__file__).resolve().parent.parent / "isaaclab_mgpu"
#: Command-local flags that several commands declare, each with help of its own.
PER_COMMAND = {"--json", "--world_sizes", "--no_saved_workarounds"}


def _text(node: ast.AST) -> list[str]:
    """The string constants in ``node`` (a literal, a tuple of them)."""
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _norm(name: str) -> str:
    """``--num-gpus`` and ``num_gpus`` as ``num_gpus``; a short name (``-m``) as it is."""
    return name if re.fullmatch(r"-\w", name) else name.lstrip("-").replace("-", "_")


def _name(call: ast.Call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")


def declarations() -> list[tuple[str, str]]:
    """(where, option name) of every declaration in the package, names in their underscore form."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        where = str(path.relative_to(PACKAGE))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.value, ast.Call)
                and _name(node.value) == "option"
            ):
                kw = {k.arg: k.value for k in node.value.keywords}
                field = node.target.id  # type: ignore[attr-defined]
                names = [_text(kw["flag"])[0] if "flag" in kw else field]
                names += [n for key in ("names", "aliases") if key in kw for n in _text(kw[key])]
                names += _text(kw["off"])[:1] if "off" in kw else []
                found += [(f"{where}:{field}", n) for n in names]
            elif isinstance(node, ast.Call) and _name(node) == "Option":
                # typer.Option("--a", "-b", help=...): its positional strings are its names.
                found += [
                    (where, a.value) for a in node.args if isinstance(a, ast.Constant) and a.value[:1] == "-"
                ]
    return [(where, _norm(n)) for where, n in found]


def test_each_option_name_is_declared_once():
    counts = Counter(name for _, name in declarations())
    twice = {n: [w for w, m in declarations() if m == n] for n, c in counts.items() if c > 1}
    allowed = {_norm(n) for n in PER_COMMAND}
    assert {n: w for n, w in twice.items() if n not in allowed} == {}
    # The per-command flags are no launch option: none of them may be a launch spec field's name.
    fields = {n for w, n in declarations() if w.startswith("launcher/spec.py:")}
    assert allowed & fields == set()


def test_the_declarations_are_read_as_the_code_sees_them():
    """The AST reading above finds exactly the runtime's declarations (or it would check nothing)."""
    seen = {n for w, n in declarations() if ":" in w}
    runtime = set()
    for cls in (LaunchSpec, JobOptions, ScaleOptions, ProbeOptions):
        for f, opt in declared(cls):
            names = {flag_of(f, opt), *opt.names, *opt.aliases, *(opt.off[:1] if opt.off else ())}
            runtime |= {_norm(n) for n in names}
    assert seen == runtime


def _commands() -> dict[str, click.Command]:
    """Every command of ``mgpu`` by its name (``skills check`` included)."""
    out, todo = {}, [("", typer.main.get_command(app))]
    while todo:
        prefix, group = todo.pop()
        for name in group.list_commands(typer.Context(group)):
            sub = group.get_command(typer.Context(group), name)
            if isinstance(sub, click.Group):
                todo.append((f"{prefix}{name} ", sub))
            else:
                out[prefix + name] = sub
    return out


#: The option dataclasses and the commands that take them.
TAKES = {
    LaunchSpec: ("train", "dry-run", "submit", "check-env", "probe-nccl", "scale"),
    JobOptions: ("dry-run", "submit"),
    ScaleOptions: ("scale",),
    ProbeOptions: ("probe-nccl",),
}


def _declarations(command: str) -> dict[str, Opt]:
    """The declared options ``command`` takes, by each of their names."""
    return {
        _norm(n): opt
        for cls, commands in TAKES.items()
        if command in commands
        for f, opt in declared(cls)
        if opt.commands is None or command in opt.commands
        for n in (flag_of(f, opt), *opt.names, *opt.aliases, *(opt.off[:1] if opt.off else ()))
    }


def test_no_command_declares_an_option_a_second_time():
    """Read from the commands as Click has them: a name declared twice, whatever the code's shape
    (a helper building ``"--" + name``), is caught here."""
    helps: dict[str, set[str]] = {}
    for command_name, command in _commands().items():
        registry = _declarations(command_name)
        names = [(_norm(o), p) for p in command.params for o in (*p.opts, *p.secondary_opts)]
        assert [n for n, c in Counter(n for n, _ in names).items() if c > 1] == [], command_name
        for n, p in names:
            if n in registry:  # made from its declaration, not declared again
                assert p.help in (registry[n].help, registry[n].off and registry[n].off[1]), (command_name, n)
            elif n != "help":
                helps.setdefault(n, set()).add(p.help)
    again = {n for n, h in helps.items() if len(h) > 1} - {_norm(n) for n in PER_COMMAND}
    assert again == set(), "declared twice with different help: declare it once, with option()"


@pytest.mark.parametrize("name", ["train", "dry-run", "submit", "check-env", "probe-nccl", "scale"])
def test_every_command_option_comes_from_its_declaration(name):
    command = _commands()[name]
    by_flag = {p.opts[0]: p for p in command.params if p.opts}
    for cls in (LaunchSpec, JobOptions, ScaleOptions, ProbeOptions):
        for f, opt in declared(cls):
            param = by_flag.get(flag_of(f, opt) if opt.on else "--" + opt.off[0])  # type: ignore[index]
            if opt.commands is not None and name not in opt.commands:
                assert param is None, f"{name} takes {flag_of(f, opt)}"
            elif name in TAKES[cls]:
                assert param is not None and param.help == (opt.help if opt.on else opt.off[1]), (
                    name,
                    f.name,
                )  # type: ignore[index]


def test_numbers_follow_one_rule_everywhere():
    """ASCII digits, finite: the spec's parser and Click's type both use read_number."""
    for text in ("\uff15", "1_000", "nan", "inf", ""):
        with pytest.raises(ValueError):
            read_number(text, float)
    assert read_number(" +29500 ", int) == 29500
    assert from_text(LaunchSpec, master_port="29500", startup_timeout="5").startup_timeout == 5.0
    spec_fields = {f.name for f in dataclasses.fields(LaunchSpec)}
    assert {"training_args", "command_line"} <= spec_fields
