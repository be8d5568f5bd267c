"""Launch commands made from the one declaration of each option (:mod:`isaaclab_mgpu.launcher.options`).

:func:`launch_command` registers a command whose function takes such dataclasses as keyword
parameters (``spec`` always, others named in the call): each becomes, where it stands in the
signature, the Typer options its class declares for that command, and the function receives the
instance built from them and validated. A ``debug`` parameter receives ``--debug``. The function's
other parameters are its own Typer options.

Unknown options and ``key=value`` overrides are training arguments, checked for a
:class:`~.command.LaunchCommand` by :mod:`isaaclab_mgpu.launcher.forwarded`. The command line as
typed reaches the spec through the context (:class:`Invocation`, made by
:func:`isaaclab_mgpu.cli.main`), never through a global.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any

import click
import typer

from isaaclab_mgpu.cli.command import PASSTHROUGH, VERBATIM, LaunchCommand, option_names
from isaaclab_mgpu.contract.errors import EXIT_INTERRUPTED, Interrupted, UsageError
from isaaclab_mgpu.launcher.options import Opt, declared, flag_of, from_text, kind, read_number
from isaaclab_mgpu.launcher.spec import LAUNCH, LaunchSpec, in_user_order

__all__ = ["FLOAT", "INT", "PASSTHROUGH", "Invocation", "launch_command", "spec_for"]


@dataclasses.dataclass
class Invocation:
    """One run of the command line: ``Context.obj`` of every command it reaches."""

    argv: tuple[str, ...] = ()
    """The command line as typed after ``mgpu``."""

    debug: bool = False
    """``--debug`` given or ``MGPU_DEBUG`` set: tracebacks are shown."""


class Number(click.ParamType):
    """Click's integer or float, read by :func:`~isaaclab_mgpu.launcher.options.read_number`."""

    def __init__(self, kind: type) -> None:
        self.kind = kind
        self.name = "integer" if kind is int else "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, self.kind) and not isinstance(value, bool):
            return value
        try:
            return read_number(value, self.kind)
        except ValueError:
            self.fail(f"{value!r} is not a valid {self.name} (a finite number in ASCII digits)", param, ctx)


#: The type of each numeric option that is not a launch option (``click_type=``).
INT, FLOAT = Number(int), Number(float)


def _set_debug(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value and isinstance(ctx.obj, Invocation):
        ctx.obj.debug = True
    return value


#: Shared by every launch command (not a spec field: it changes what is shown, not the launch).
DEBUG = Annotated[
    bool,
    typer.Option(
        "--debug", help="Show tracebacks.", callback=_set_debug, is_eager=True, rich_help_panel=LAUNCH
    ),
]

#: Shared by train, dry-run and probe-nccl (not a launch-spec field: it selects the environment).
NO_SAVED_WORKAROUNDS = typer.Option(
    "--no_saved_workarounds",
    help="Do not apply the NCCL workarounds probe-nccl saved for this machine.",
)
GRACE_PERIOD = Annotated[
    float,
    typer.Option(
        "--grace_period",
        metavar="SECONDS",
        click_type=FLOAT,
        help="After Ctrl-C/SIGTERM: time for the launcher's own shutdown, then SIGTERM to all.",
    ),
]
KILL_AFTER = Annotated[
    float,
    typer.Option(
        "--kill_after",
        metavar="SECONDS",
        click_type=FLOAT,
        help="Then SIGKILL whatever survives SIGTERM this long.",
    ),
]


_KW = inspect.Parameter.KEYWORD_ONLY


def _params(field: dataclasses.Field[Any], opt: Opt) -> list[inspect.Parameter]:
    """The Typer parameters of one declared option (two for a flag with an ``off`` flag)."""
    out = []
    if kind(field) == "bool":
        flags = ([(field.name, flag_of(field, opt), opt.help)] if opt.on else []) + (
            [(opt.off[0], "--" + opt.off[0], opt.off[1])] if opt.off else []
        )
        for name, flag, help in flags:
            ann = Annotated[bool, typer.Option(flag, help=help, rich_help_panel=opt.panel, hidden=opt.hidden)]
            out.append(inspect.Parameter(name, _KW, annotation=ann, default=False))
        return out
    # Values arrive as text; the declaration's parser reads them (LaunchSpec.from_options, from_text).
    metavar = opt.metavar or (None if opt.parse else {"int": "INTEGER", "float": "FLOAT"}.get(kind(field)))
    typed = typer.Option(
        flag_of(field, opt),
        *opt.names,
        help=opt.help,
        rich_help_panel=opt.panel,
        metavar=metavar,
        hidden=opt.hidden,
    )
    ann = Annotated[str | None, typed]
    return [inspect.Parameter(field.name, _KW, annotation=ann, default=field.default)]


def _options(cls: Any, command: str) -> list[tuple[dataclasses.Field[Any], Opt]]:
    return [(f, opt) for f, opt in declared(cls) if opt.commands is None or command in opt.commands]


def _values(cls: Any, command: str, params: dict[str, Any]) -> dict[str, Any]:
    """The field values of ``cls`` given on the command line (a flag pair read as True/False/None)."""
    values = {}
    for f, opt in _options(cls, command):
        if kind(f) != "bool":
            values[f.name] = params.get(f.name)
            continue
        on, off = opt.on and params.get(f.name), opt.off is not None and params.get(opt.off[0])
        if on and off:
            raise UsageError(f"{flag_of(f, opt)} and --{opt.off[0]} both given; choose one")  # type: ignore[index]
        # Neither of a pair: the field's default (None: it depends, see the field's help).
        values[f.name] = True if on else False if off else f.default if opt.off else False
    return values


def spec_for(ctx: click.Context, params: dict[str, Any]) -> LaunchSpec:
    """The LaunchSpec of a parsed command; a launch command's training arguments checked too."""
    invocation = ctx.find_object(Invocation)
    argv = invocation.argv if invocation is not None else None
    values = _values(LaunchSpec, ctx.info_name or "train", params)
    training_args = list(ctx.args)
    program = values.get("module") or values.get("script")
    if program and argv is not None:
        training_args = list(in_user_order(argv, training_args, program))
    spec = LaunchSpec.from_options(tuple(training_args), command_line=tuple(argv or ()), **values)
    if isinstance(ctx.command, LaunchCommand):
        from isaaclab_mgpu.launcher.forwarded import check_training_args

        check_training_args(
            spec,
            launcher_options=option_names(ctx.command),
            verbatim=ctx.meta.get(VERBATIM, 0),
            command=ctx.info_name or "train",
        )
    elif spec.training_args and ctx.command is not None:
        from isaaclab_mgpu.launcher.forwarded import check_misspelt_options

        check_misspelt_options(spec.training_args, option_names(ctx.command), ctx.info_name or "mgpu")
    return spec


def _built(cls: Any, command: str, params: dict[str, Any], defaults: dict[str, Any]) -> Any:
    """``cls`` from a parsed command: each value given, else the command's default, else the class's."""
    given = {k: v for k, v in _values(cls, command, params).items() if v is not None}
    return from_text(cls, **{**defaults, **given})


def launch_command(
    app: typer.Typer, name: str, *, cls: type | None = LaunchCommand, **groups: Any
) -> Callable:
    """Register ``fn(..., spec, <groups>)`` as command ``name`` of ``app`` (see the module docstring)."""
    # A group is a dataclass of options, or (dataclass, this command's defaults): submit's job is sbatch.
    defaults = {g: v[1] if isinstance(v, tuple) else {} for g, v in {"spec": LaunchSpec, **groups}.items()}
    classes = {g: v[0] if isinstance(v, tuple) else v for g, v in {"spec": LaunchSpec, **groups}.items()}

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(fn).parameters
        own = [p for p in signature.values() if p.name not in (*classes, "debug")]
        wanted = [g for g in classes if g in signature]
        params = [inspect.Parameter("ctx", _KW, annotation=typer.Context)]
        for p in signature.values():
            if p.name in classes:
                params += [q for f, opt in _options(classes[p.name], name) for q in _params(f, opt)]
            if p.name == "spec":  # --debug: in the launch options' panel, after them
                params.append(inspect.Parameter("debug", _KW, annotation=DEBUG, default=False))
            elif p in own:
                params.append(p.replace(kind=_KW))

        @functools.wraps(fn)
        def command(ctx: typer.Context, **kwargs: Any) -> Any:
            built = {
                g: spec_for(ctx, kwargs) if g == "spec" else _built(classes[g], name, kwargs, defaults[g])
                for g in wanted
            }
            debug = kwargs["debug"] or bool(getattr(ctx.obj, "debug", False))
            try:
                return fn(
                    **{p.name: kwargs[p.name] for p in own},
                    **built,
                    **({"debug": debug} if "debug" in signature else {}),
                )
            except KeyboardInterrupt:  # outside supervision (which handles its own); Typer would swallow it
                raise Interrupted("stopped by Ctrl-C", exit_code=EXIT_INTERRUPTED) from None

        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        app.command(name, context_settings=PASSTHROUGH, **({"cls": cls} if cls is not None else {}))(command)
        return fn

    return register
