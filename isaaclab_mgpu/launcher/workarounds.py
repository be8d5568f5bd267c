"""NCCL workarounds: the documented candidates, and the ones saved for this machine.

:data:`CANDIDATES` is Isaac Lab's documented list of NCCL variables (one at a time,
machine-specific). How ``probe-nccl --try-workarounds`` confirms one, where ``--save-workaround``
stores it and which saved ones a launch applies (a variable set in the environment wins):
docs/probe-nccl.md, "Workarounds".

The store (:func:`store_path`, never the project) is a JSON object ``{machine_key: {VAR: VALUE,
...}}``; the key names the host and its GPU topology (:func:`machine_key`), so a variable confirmed
on one box never leaks to another, nor to the same host after its GPUs changed. Anyone with the
user's config folder may have edited the store, so a launch takes only :data:`SAVABLE` pairs from
it; what it leaves out, and a store that cannot be read, are lines of data (:class:`Saved`), which
the command layer prints.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from isaaclab_mgpu.contract import files
from isaaclab_mgpu.contract.errors import EnvironmentProblem
from isaaclab_mgpu.launcher import nvml


@dataclass(frozen=True)
class Candidate:
    """One documented NCCL workaround."""

    name: str
    """Environment variable."""

    value: str
    """Value to set."""

    symptom: str
    """What it is known to fix."""

    @property
    def assignment(self) -> str:
        """``NAME=VALUE``."""
        return f"{self.name}={self.value}"


#: Isaac Lab's documented NCCL workarounds, in the order to try them.
CANDIDATES: tuple[Candidate, ...] = (
    Candidate("NCCL_P2P_DISABLE", "1", "world size 2 hangs on PCIe without NVLink"),
    Candidate("NCCL_P2P_LEVEL", "LOC", "world size 2 hangs on PCIe without NVLink"),
    Candidate("NCCL_SHM_DISABLE", "1", "illegal memory access in ProcessGroupNCCL"),
    Candidate("NCCL_CUMEM_HOST_ENABLE", "0", "timeouts across NUMA nodes"),
    Candidate("NCCL_CUMEM_ENABLE", "0", "timeouts across NUMA nodes"),
    Candidate("NCCL_IB_DISABLE", "1", "communicator init / transport failures"),
    Candidate("NCCL_ALGO", "Ring", "communicator init / transport failures"),
    Candidate("NCCL_NVLS_ENABLE", "0", "hangs on NVSwitch systems (NVLS)"),
    Candidate("CUDA_DEVICE_ORDER", "PCI_BUS_ID", "ranks pick GPUs in a different order than NCCL"),
)


def store_path(environ: Mapping[str, str]) -> Path:
    """Where saved workarounds live for the user of ``environ``."""
    # A relative XDG_CONFIG_HOME is ignored, as the XDG spec says: a store per working directory.
    base = environ.get("XDG_CONFIG_HOME") or ""
    if not os.path.isabs(base):
        base = os.path.join(environ.get("HOME", "~"), ".config")
    return Path(os.path.expanduser(base)) / "isaaclab-mgpu" / "workarounds.json"


def machine_key(hostname: str, gpu_names: tuple[str, ...]) -> str:
    """Key of this machine: host and GPU topology (count and models)."""
    gpus = ",".join(gpu_names) if gpu_names else "no-gpu"
    return f"{hostname}|{len(gpu_names)}x|{gpus}"


def this_machine() -> str:
    """The key of the machine this process runs on (every GPU NVML lists, whatever is visible)."""
    return machine_key(socket.gethostname(), tuple(name for name, _ in nvml.list_gpus() or ()))


@dataclass(frozen=True)
class Saved:
    """What the store holds for one machine: the variables to apply, and what was not applied."""

    variables: Mapping[str, str]
    """Documented NCCL variables with a value mgpu itself could have saved (:data:`CANDIDATES`)."""

    ignored: tuple[str, ...] = ()
    """One line per problem: an unreadable store, or the entries of this machine left out."""


#: The only name/value pairs a launch takes from the store: the ones ``--save-workaround`` writes.
SAVABLE = frozenset((c.name, c.value) for c in CANDIDATES)


def read(path: Path) -> tuple[dict[str, Any], str | None]:
    """The store's JSON object, or ``{}`` and one line saying why it could not be read."""
    why = None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}, None
    except OSError as exc:
        why = f"cannot be read ({exc.strerror or exc})"
    except UnicodeDecodeError:
        why = "is not UTF-8 text"
    except ValueError as exc:
        why = f"is not valid JSON ({exc})"
    else:
        if not isinstance(data, dict):
            why = "is not a JSON object"
    if why is not None:
        return {}, f"saved workarounds: {path} {why}; none applied, fix or delete it"
    return data, None


def load(path: Path) -> dict[str, dict[str, str]]:
    """Every machine's entries as saved (strings only); empty when nothing is saved or readable."""
    data, _ = read(path)
    return {
        key: {n: v for n, v in entry.items() if isinstance(v, str)}
        for key, entry in data.items()
        if isinstance(entry, dict)
    }


def saved_for(path: Path, key: str) -> Saved:
    """The workarounds saved for machine ``key``: only pairs in :data:`SAVABLE` are kept."""
    data, problem = read(path)
    if problem is not None:
        return Saved({}, (problem,))
    entry = data.get(key, {})
    if not isinstance(entry, dict):
        return Saved(
            {}, (f"saved workarounds: the entry for this machine in {path} is not an object; ignored",)
        )
    kept = {n: v for n, v in entry.items() if _savable(n, v)}
    strangers = [_entry(n, v) for n, v in entry.items() if not _savable(n, v)]
    if not strangers:
        return Saved(kept)
    line = (
        f"saved workarounds: ignoring {', '.join(strangers)} in {path}: mgpu applies only the NCCL "
        "variables probe-nccl --save-workaround writes"
    )
    return Saved(kept, (line,))


def _savable(name: str, value: object) -> bool:
    return isinstance(value, str) and (name, value) in SAVABLE


def _entry(name: str, value: object) -> str:
    text = f"{name}={value if isinstance(value, str) else json.dumps(value)}"
    return text if len(text) <= 80 else text[:77] + "..."


def save(path: Path, key: str, name: str, value: str) -> None:
    """Store ``name=value`` for machine ``key``, atomically; an unwritable store is one error line."""
    data = load(path)
    data.setdefault(key, {})[name] = value
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        files.write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
    except OSError as exc:
        raise EnvironmentProblem(
            f"cannot save the workaround in {path}: {exc.strerror or exc}; fix or remove that path"
        ) from None


def to_apply(saved: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """The saved variables a launch should add: those the user's environment does not set."""
    return {name: value for name, value in saved.items() if name not in environ}


def for_launch(environ: Mapping[str, str], *, device: str, enabled: bool) -> Saved:
    """Saved workarounds to add to a launch on this machine (GPU launches only; none if disabled)."""
    if not enabled or device != "cuda":
        return Saved({})
    saved = saved_for(store_path(environ), this_machine())
    return Saved(to_apply(saved.variables, environ), saved.ignored)
