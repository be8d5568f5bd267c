"""Facts that need torch or jax, gathered in subprocesses with a deadline (``check-env --deep``).

Importing torch initialises its CUDA libraries; on a broken install that can take minutes or hang.
So the main process never imports torch or jax: :func:`collect_deep` runs one short probe script
per framework with ``python -c`` in its own session, both at once, and kills a probe that is
still running at the deadline (the fact then says it timed out, which is itself the finding).
Each probe prints one JSON object on its last stdout line.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

#: Seconds a probe may take; importing torch takes 1.5–5 s on a small machine.
DEEP_TIMEOUT = 60.0

TORCH_PROBE = """
import json
out = {}
try:
    import torch
    out["version"] = torch.__version__
    out["cuda_build"] = torch.version.cuda
    out["cuda_available"] = bool(torch.cuda.is_available())
    out["device_count"] = torch.cuda.device_count() if out["cuda_available"] else 0
    out["devices"] = [torch.cuda.get_device_name(i) for i in range(out["device_count"])]
    try:
        v = torch.backends.cudnn.version()
        out["cudnn"] = None if v is None else str(v)
    except Exception:
        out["cudnn"] = None
    try:
        v = torch.cuda.nccl.version()
        out["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:
        out["nccl"] = None
    import torch.distributed as dist
    out["nccl_available"] = bool(dist.is_available() and dist.is_nccl_available())
    out["gloo_available"] = bool(dist.is_available() and dist.is_gloo_available())
except Exception as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""

JAX_PROBE = """
import json
out = {}
try:
    import jax
    out["version"] = jax.__version__
    out["backend"] = jax.default_backend()
    out["devices"] = [f"{d.platform}:{d.device_kind}" for d in jax.devices()]
except Exception as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


@dataclass(frozen=True)
class ProbeResult:
    """What one framework probe reported."""

    ran: bool
    """False when the framework is not installed (nothing was started)."""

    error: str | None = None
    """Import/initialisation error, ``timed out after N s``, or a crash with its exit status."""

    values: Mapping[str, object] = field(default_factory=dict)
    """The probe's JSON object (see :data:`TORCH_PROBE`, :data:`JAX_PROBE`)."""

    seconds: float = 0.0
    """How long the probe ran."""


@dataclass(frozen=True)
class DeepFacts:
    """torch and jax as they behave when imported in a fresh process."""

    torch: ProbeResult
    """torch: version, CUDA build, CUDA available, devices, cuDNN, NCCL."""

    jax: ProbeResult
    """jax: version, default backend, devices."""


def run_probes(
    probes: Mapping[str, str], environ: Mapping[str, str], timeout: float = DEEP_TIMEOUT
) -> dict[str, ProbeResult]:
    """Run each ``name -> code`` probe in its own session, concurrently, killing it at ``timeout``."""
    started = time.monotonic()
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-c", code],
            env=dict(environ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        for name, code in probes.items()
    }
    results = {}
    for name, proc in procs.items():
        left = max(0.1, timeout - (time.monotonic() - started))
        try:
            out, err = proc.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            results[name] = ProbeResult(
                True, f"timed out after {timeout:g} s", {}, time.monotonic() - started
            )
            continue
        seconds = time.monotonic() - started
        try:
            values = json.loads(out.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            values = None
        values = values if isinstance(values, dict) else {}
        error = values.pop("error", None)
        if not values and error is None:
            tail = (err.strip().splitlines() or ["no output"])[-1]
            error = f"probe exited with status {proc.returncode}: {tail}"
        results[name] = ProbeResult(True, error, values, seconds)
    return results


def collect_deep(environ: Mapping[str, str], timeout: float = DEEP_TIMEOUT) -> DeepFacts:
    """Probe torch and jax in subprocesses (only those installed)."""
    probes = (("torch", TORCH_PROBE), ("jax", JAX_PROBE))
    wanted = {name: code for name, code in probes if importlib.util.find_spec(name) is not None}
    results = run_probes(wanted, environ, timeout)
    absent = ProbeResult(False, "not installed")
    return DeepFacts(torch=results.get("torch", absent), jax=results.get("jax", absent))
