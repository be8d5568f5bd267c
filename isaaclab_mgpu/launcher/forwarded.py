"""Refuse, before anything is spawned, the training arguments mgpu's own worker would refuse.

:func:`check_training_args` runs the built-in worker's own parser
(:func:`isaaclab_mgpu.contract.worker_args.parse`: argparse only, no torch) on exactly the
arguments the builder hands to every rank (:func:`isaaclab_mgpu.launcher.build.worker_tail`), so
an unknown option, a bad value or an unknown task name fails ``train``, ``dry-run`` and
``check-env`` alike with exit status 2 and one line, instead of every rank failing seconds after
the launch.

An unknown option is answered with the closest spelling (:mod:`difflib`) among the worker's
options and, for items before ``--``, the command's own: ``--num_gpu 2`` is a misspelt launcher
option. Items after ``--`` are forwarded verbatim (only the worker's verdict applies to them). A
user ``--script`` or ``-m`` module's arguments are not checked.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from isaaclab_mgpu.contract.errors import UsageError
from isaaclab_mgpu.contract.worker_args import WorkerArgsError, option_strings, parse
from isaaclab_mgpu.launcher.build import WORKER_MODULE, worker_tail
from isaaclab_mgpu.launcher.spec import LaunchSpec


def worker_argv(spec: LaunchSpec) -> list[str]:
    """The arguments every rank's built-in worker receives for ``spec`` (after ``-m MODULE``)."""
    tail = worker_tail(spec)
    assert tail[:2] == ["-m", WORKER_MODULE], tail
    return tail[2:]


def _underscored(option: str) -> str:
    return "--" + option[2:].replace("-", "_") if option.startswith("--") else option


def suggest(option: str, candidates: Iterable[str]) -> str | None:
    """The candidate closest to ``option`` (hyphens read as underscores), or None."""
    # Compared without the leading "--", which would make any two short names look alike.
    names = sorted({_underscored(c)[2:] for c in candidates if c.startswith("--")})
    close = difflib.get_close_matches(_underscored(option)[2:], names, n=1, cutoff=0.75)
    return "--" + close[0] if close else None


def check_training_args(
    spec: LaunchSpec,
    *,
    launcher_options: Iterable[str] = (),
    verbatim: int = 0,
    command: str = "train",
) -> None:
    """Raise a UsageError when the built-in worker would refuse ``spec.training_args``."""
    # launcher_options: the command's own (suggested for misspellings); verbatim: how many came after --.
    if not spec.builtin_worker:
        return
    try:
        parse(worker_argv(spec), add_help=False)
    except WorkerArgsError as exc:
        raise UsageError(_explain(exc, spec, set(launcher_options), verbatim, command)) from None


def check_misspelt_options(args: Iterable[str], options: Iterable[str], command: str) -> None:
    """For a command that forwards nothing (probe-nccl): refuse a close misspelling of its options."""
    names = set(options)
    for item in args:
        name = item.split("=", 1)[0]
        if name.startswith("--") and (close := suggest(name, names)) is not None:
            raise UsageError(f"{name} is not an option of mgpu {command}; did you mean {close}?")


def _explain(exc: WorkerArgsError, spec: LaunchSpec, launcher: set[str], verbatim: int, command: str) -> str:
    item = exc.unknown
    if item is None:
        message = str(exc)
        return "training " + message if message.startswith("argument ") else f"training argument {message}"
    listed = f"the worker's options are listed by mgpu {command} --help"
    if not item.startswith("-"):
        return f"training argument {item!r} is neither an option nor a key=value override; {listed}"
    name = item.split("=", 1)[0]
    args = spec.training_args
    after_dashes = item in args and args.index(item) >= len(args) - verbatim
    if after_dashes:
        if _underscored(name) in launcher:
            return f"{name} is an option of mgpu {command}, not of the training worker: put it before --"
        close = suggest(name, option_strings())
        hint = f"did you mean {close}?" if close else listed
        return f"{name} (after --) is not an option of the training worker; {hint}"
    close = suggest(name, option_strings() | launcher)
    if close is not None:
        whose = f"mgpu {command}" if close in launcher else "the training worker"
        hint = f"did you mean {close} (an option of {whose})?"
    else:
        hint = listed
    return f"{name} is not an option of mgpu {command} nor of the training worker; {hint}"
