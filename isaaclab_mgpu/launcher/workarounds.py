"""NCCL workarounds: the documented candidates, and the ones saved for this machine.

:data:`CANDIDATES` is Isaac Lab's documented list of NCCL variables (one at a time,
machine-specific). ``probe-nccl --try-workarounds`` tries them against a failing world size and
``--save-workaround`` stores one it confirmed; ``train`` (and ``probe-nccl``) apply the variables
saved for this machine with a visible notice unless ``--no_saved_workarounds``. A variable the
user already set in the environment always wins over a saved one.

The store is ``$XDG_CONFIG_HOME/isaaclab-mgpu/workarounds.json`` (``~/.config/...`` when unset),
never the project: a JSON object ``{machine_key: {VAR: VALUE, ...}}``. The machine key names the
host and its GPU topology (count and model), so a variable confirmed on one box never leaks to
another, nor to the same host after its GPUs changed.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from isaaclab_mgpu.contract import files
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
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(environ.get("HOME", "~"), ".config")
    return Path(os.path.expanduser(base)) / "isaaclab-mgpu" / "workarounds.json"


def machine_key(hostname: str, gpu_names: tuple[str, ...]) -> str:
    """Key of this machine: host and GPU topology (count and models)."""
    gpus = ",".join(gpu_names) if gpu_names else "no-gpu"
    return f"{hostname}|{len(gpu_names)}x|{gpus}"


def gpu_names() -> tuple[str, ...]:
    """Model names of this machine's GPUs from NVML (all of them, ignoring CUDA_VISIBLE_DEVICES)."""
    return nvml.gpu_names() or ()


def this_machine() -> str:
    """The key of the machine this process runs on."""
    return machine_key(socket.gethostname(), gpu_names())


def load(path: Path) -> dict[str, dict[str, str]]:
    """Every saved workaround by machine key; empty when nothing is saved."""
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: {str(n): str(v) for n, v in val.items()} for k, val in data.items() if isinstance(val, dict)}


def saved_for(path: Path, key: str) -> dict[str, str]:
    """The workarounds saved for machine ``key``."""
    return load(path).get(key, {})


def save(path: Path, key: str, name: str, value: str) -> None:
    """Store ``name=value`` for machine ``key``, atomically."""
    data = load(path)
    data.setdefault(key, {})[name] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    files.write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def to_apply(saved: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """The saved variables a launch should add: those the user's environment does not set."""
    return {name: value for name, value in saved.items() if name not in environ}


def for_launch(environ: Mapping[str, str], *, device: str, enabled: bool) -> dict[str, str]:
    """Saved workarounds to add to a launch on this machine (GPU launches only; none if disabled)."""
    if not enabled or device != "cuda":
        return {}
    return to_apply(saved_for(store_path(environ), this_machine()), environ)
