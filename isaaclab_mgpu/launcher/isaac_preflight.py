"""Refuse a bad Isaac Lab request before anything is spawned, in well under a second.

``mgpu train`` with ``--task Isaac-...`` checks, in this order, each failure one
:class:`~isaaclab_mgpu.contract.errors.UsageError` line (exit 2) with the fix:

1. the Python running mgpu (and therefore the ranks) is at least Isaac Lab's (3.12);
2. Isaac Lab is installed (``isaaclab``, ``isaaclab_rl``, ``isaaclab_tasks`` findable) in a
   supported release (:func:`isaaclab_mgpu.contract.isaaclab_version.check_version`);
3. the task id is registered, else the closest registered ids are suggested;
4. the task has an agent config for the chosen library (``<library>_cfg_entry_point``).

Importing Isaac Lab's task registry takes seconds to minutes (torch, warp, every task module), so
3 and 4 read the registry's source instead: each ``gym.register(id=..., kwargs={...})`` call under
``isaaclab_tasks`` (and ``isaaclab_tasks_experimental``) is parsed with :mod:`ast`, without
importing anything. Nothing here imports torch or Isaac Lab. A task registered elsewhere
(``--external_callback``) or a custom ``--agent`` entry point skips 3 and 4.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from isaaclab_mgpu.contract.errors import UsageError
from isaaclab_mgpu.contract.isaaclab_version import check_version

#: Isaac Lab 3's oldest Python.
MIN_PYTHON = (3, 12)
#: Packages whose ``__init__`` files register Isaac Lab's tasks.
TASK_PACKAGES = ("isaaclab_tasks", "isaaclab_tasks_experimental")
INSTALL_HINT = "install it on Python 3.12: `uv pip install -e '.[isaaclab]'` (README: Isaac Lab environment)"


@dataclass(frozen=True)
class IsaacRequest:
    """The parts of the forwarded training arguments the pre-spawn check needs."""

    task: str
    """The task id (after any ``module:`` prefix)."""

    library: str
    """``rsl_rl``, ``skrl`` or ``rl_games``."""

    agent: str | None = None
    """A custom ``--agent`` entry point, if given."""

    algorithm: str | None = None
    """skrl's ``--algorithm``, if given."""

    external_callback: bool = False
    """True when ``--external_callback`` may register more tasks."""


def _value(args: Sequence[str], flag: str) -> str | None:
    found = None
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            found = args[i + 1]
        elif a.startswith(flag + "="):
            found = a.split("=", 1)[1]
    return found


def request_from(training_args: Sequence[str], library: str) -> IsaacRequest | None:
    """The Isaac Lab request in ``training_args``, or None when no ``Isaac-`` task is named."""
    task = _value(training_args, "--task")
    if task is None or not task.split(":")[-1].startswith("Isaac-"):
        return None
    return IsaacRequest(
        task=task.split(":")[-1],
        library=library,
        agent=_value(training_args, "--agent"),
        algorithm=_value(training_args, "--algorithm"),
        external_callback=_value(training_args, "--external_callback") is not None,
    )


def agent_entry_point(library: str, algorithm: str | None) -> str:
    """The registry key of a library's agent config (skrl: per algorithm, PPO by default)."""
    if library == "skrl" and algorithm and algorithm.lower() != "ppo":
        return f"skrl_{algorithm.lower()}_cfg_entry_point"
    return f"{library}_cfg_entry_point"


def _package_dir(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _registrations(source: str) -> dict[str, frozenset[str]]:
    found: dict[str, frozenset[str]] = {}
    if "register(" not in source:
        return found
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if name != "register":
            continue
        kw = {k.arg: k.value for k in node.keywords}
        task = kw.get("id")
        if not (isinstance(task, ast.Constant) and isinstance(task.value, str)):
            continue
        keys: set[str] = set()
        kwargs = kw.get("kwargs")
        if isinstance(kwargs, ast.Dict):
            keys = {k.value for k in kwargs.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        found[task.value] = frozenset(keys)
    return found


@lru_cache(maxsize=4)
def registry(roots: tuple[str, ...]) -> dict[str, frozenset[str]]:
    """Task id → its registered kwargs keys, from the ``gym.register`` calls under ``roots``."""
    tasks: dict[str, frozenset[str]] = {}
    for root in roots:
        for path in sorted(Path(root).rglob("__init__.py")):
            try:
                tasks.update(_registrations(path.read_text(encoding="utf-8")))
            except (OSError, SyntaxError, UnicodeDecodeError):
                continue
    return tasks


def check(request: IsaacRequest, *, python: tuple[int, int] | None = None) -> None:
    """Raise a one-line UsageError when ``request`` cannot run; return when it may."""
    python = python or (sys.version_info[0], sys.version_info[1])
    if python < MIN_PYTHON:
        raise UsageError(
            f"--task {request.task}: Isaac Lab needs Python {'.'.join(map(str, MIN_PYTHON))}+, and mgpu runs "
            f"on {python[0]}.{python[1]}; install mgpu with Isaac Lab into a Python 3.12 environment "
            "(README: Isaac Lab environment)"
        )
    missing = [m for m in ("isaaclab", "isaaclab_rl", "isaaclab_tasks") if _package_dir(m) is None]
    if missing:
        raise UsageError(
            f"--task {request.task}: Isaac Lab is not installed ({missing[0]} missing); {INSTALL_HINT}"
        )
    check_version()
    roots = tuple(str(p) for p in (_package_dir(n) for n in TASK_PACKAGES) if p is not None)
    tasks = registry(roots)
    if request.task not in tasks:
        if request.external_callback or not tasks:
            return
        close = difflib.get_close_matches(request.task, list(tasks), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else "; Isaac Lab's task ids start with Isaac-"
        raise UsageError(f"--task {request.task} is not an Isaac Lab task{hint}")
    if request.agent is not None:
        return
    key = agent_entry_point(request.library, request.algorithm)
    if key not in tasks[request.task]:
        usable = [
            lib for lib in ("rl_games", "rsl_rl", "skrl") if f"{lib}_cfg_entry_point" in tasks[request.task]
        ]
        raise UsageError(
            f"--task {request.task} has no {request.library} agent config ({key}); "
            f"choose --rl_library {' or '.join(usable) if usable else '... (none of mgpu libraries)'}"
        )
