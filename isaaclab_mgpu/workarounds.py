"""Saved NCCL workarounds: per machine, in the user's config directory, never in the project.

``probe-nccl --save-workaround`` stores a variable that it confirmed fixes a failure on this
machine; ``train`` applies the saved variables for this machine with a visible notice unless
``--no_saved_workarounds``. The store is ``$XDG_CONFIG_HOME/isaaclab-mgpu/workarounds.json``
(``~/.config/...`` when unset), a JSON object ``{machine_key: {VAR: VALUE, ...}}``. The machine key
names the host and its GPU topology (count and model), so a variable confirmed on one box never
leaks to another.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path


def store_path(environ: Mapping[str, str]) -> Path:
    """Where saved workarounds live for the user of ``environ``."""
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(environ.get("HOME", "~"), ".config")
    return Path(os.path.expanduser(base)) / "isaaclab-mgpu" / "workarounds.json"


def machine_key(hostname: str, gpu_names: tuple[str, ...]) -> str:
    """Key of this machine: host and GPU topology (count and models)."""
    gpus = ",".join(gpu_names) if gpu_names else "no-gpu"
    return f"{hostname}|{len(gpu_names)}x|{gpus}"


def load(path: Path) -> dict[str, dict[str, str]]:
    """Every saved workaround by machine key; empty when nothing is saved."""
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return {k: dict(v) for k, v in data.items() if isinstance(v, dict)}


def saved_for(path: Path, key: str) -> dict[str, str]:
    """The workarounds saved for machine ``key``."""
    return load(path).get(key, {})


def save(path: Path, key: str, name: str, value: str) -> None:
    """Store ``name=value`` for machine ``key``, atomically."""
    data = load(path)
    data.setdefault(key, {})[name] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
