"""GPU rules: the driver, the GPUs and who holds them, ``CUDA_VISIBLE_DEVICES`` and ``CUDA_DEVICE_ORDER``."""

from __future__ import annotations

from isaaclab_mgpu.contract.devices import NEGATIVE, REPEATED, parse_device_list
from isaaclab_mgpu.launcher.diagnostics.facts import Facts
from isaaclab_mgpu.launcher.diagnostics.rules.base import (
    FAIL,
    PASS,
    WARN,
    Finding,
    finding,
    used_gpus,
    uses_gpus,
)
from isaaclab_mgpu.launcher.nvml import GpuProcess

#: Share of a GPU's memory in use at which the launch cannot be expected to fit.
GPU_FULL = 0.95
#: Command-line fragments of processes an mgpu / torchrun launch leaves behind.
STALE_MARKERS = ("isaaclab_mgpu.worker", "isaaclab_mgpu.jaxrun", "torch.distributed.run", "torchrun")


def driver_rule(f: Facts) -> list[Finding]:
    """An NVIDIA driver answering NVML, its version and the CUDA version it supports."""
    g = f.gpu
    if g.nvml:
        observed = f"{g.driver_version} (supports CUDA {g.cuda_driver_version or '?'})"
        return [finding("gpu", "driver", PASS, observed)]
    if not uses_gpus(f):
        return [finding("gpu", "driver", PASS, f"none ({g.error}); not needed for --device cpu")]
    fix = "run on a GPU node with the NVIDIA driver loaded, or use --device cpu"
    return [finding("gpu", "driver", FAIL, f"no NVIDIA driver ({g.error})", fix)]


def gpus_rule(f: Facts) -> list[Finding]:
    """GPU count, models and memory."""
    g = f.gpu
    if not g.nvml:
        return []
    if not g.gpus:
        fix = "run on a GPU node, or use --device cpu"
        return [finding("gpu", "gpus", FAIL if uses_gpus(f) else PASS, "NVML reports no GPU", fix)]
    names = sorted({x.name for x in g.gpus})
    mem = sorted({x.memory_total_mib for x in g.gpus})
    observed = f"{len(g.gpus)} × {', '.join(names)} ({', '.join(f'{m} MiB' for m in mem)})"
    if len(names) > 1 and uses_gpus(f):
        fix = "ranks wait for the slowest GPU; pick one model with CUDA_VISIBLE_DEVICES"
        return [finding("gpu", "gpus", WARN, observed + " — mixed models", fix)]
    return [finding("gpu", "gpus", PASS, observed)]


def _leftover(p: GpuProcess) -> bool:
    """A process of this user's own mgpu run whose launcher is gone: safe to kill."""
    stale = bool(p.cmdline) and any(m in p.cmdline for m in STALE_MARKERS)
    return bool(p.mine) and bool(p.run_id or stale) and p.orphan


def _who(p: GpuProcess) -> str:
    owner = "you" if p.mine else (p.user or "an unknown user")
    run = f", mgpu run {p.run_id[:8]}" if p.run_id else ""
    memory = f" {p.used_mib} MiB" if p.used_mib is not None else ""
    return f"PID {p.pid} {p.name or '?'} ({owner}{run}){memory}"


def gpu_in_use_rule(f: Facts) -> list[Finding]:
    """Memory in use on the launch's GPUs, and who holds it (a kill command only for own mgpu leftovers)."""
    avoid = "choose other GPUs with --gpu_ids (or CUDA_VISIBLE_DEVICES)"
    out = []
    for g in used_gpus(f):
        procs = g.processes
        share = g.memory_used_mib / g.memory_total_mib if g.memory_total_mib else 0.0
        held = ", ".join(_who(p) for p in procs)
        observed = f"GPU {g.index}: {g.memory_used_mib}/{g.memory_total_mib} MiB used" + (
            f" by {held}" if held else ""
        )
        leftovers = [p for p in procs if _leftover(p)]
        others = [p for p in procs if not _leftover(p)]
        users = sorted({"you" if p.mine else (p.user or "an unknown user") for p in others})
        status, fix = PASS, None
        if leftovers:
            pids = " ".join(str(p.pid) for p in leftovers)
            observed += " — left over from your earlier mgpu run"
            status, fix = FAIL, f"your earlier run's processes still hold this GPU: kill {pids}"
        elif share >= GPU_FULL:
            status, fix = FAIL, f"the GPU is full, in use by {', '.join(users) or 'a process'}: {avoid}"
        elif others:
            status, fix = WARN, f"in use by {', '.join(users)}: share it, or {avoid}"
        out.append(finding("gpu", f"gpu_in_use:{g.index}", status, observed, fix))
    return out


def cuda_visible_devices_rule(f: Facts) -> list[Finding]:
    """CUDA_VISIBLE_DEVICES as CUDA reads it: where it stops reading, a GPU listed twice, none left."""
    value = f.cuda_visible_devices
    name = "cuda_visible_devices"
    total = len(f.gpu.gpus) if f.gpu.nvml else None
    if value is None:
        if total is None:
            seen = "no GPU visible: no NVIDIA driver"
        else:
            seen = f"all {total} GPU(s) visible" if total else "no GPU found"
        return [finding("gpu", name, PASS, f"unset ({seen})")]
    bad = FAIL if uses_gpus(f) else WARN
    shown = f"CUDA_VISIBLE_DEVICES={value!r}"
    devices = parse_device_list(value, uuids=tuple(g.uuid for g in f.gpu.gpus) if f.gpu.nvml else None)
    if devices.problem is not None:
        ignored = f"; CUDA reads no further ({','.join(devices.hidden)})" if devices.hidden else ""
        if devices.reason == REPEATED:
            ignored = ": CUDA then sees no GPU"
        return [finding("gpu", name, bad, f"{shown}: {devices.problem}{ignored}", devices.fix)]
    if not devices.entries:
        what = "empty:" if devices.stop is None else devices.stop
        fix = "unset it, or list the GPUs to use (e.g. 0,1)"
        return [finding("gpu", name, bad, f"{shown}: {what} hides every GPU", fix)]
    if devices.reason == NEGATIVE:
        observed = f"{shown}: {devices.stop} hides the entries after it ({len(devices.entries)} visible)"
        return [finding("gpu", name, WARN, observed, "remove it and list only the GPUs to use")]
    return [finding("gpu", name, PASS, f"{shown} ({len(devices.entries)} visible)")]


def device_order_rule(f: Facts) -> list[Finding]:
    """CUDA_DEVICE_ORDER: with mixed models CUDA's default order differs from nvidia-smi's."""
    order = f.cuda_device_order
    name, fix = "cuda_device_order", "export CUDA_DEVICE_ORDER=PCI_BUS_ID"
    if order == "PCI_BUS_ID":
        return [finding("gpu", name, PASS, "PCI_BUS_ID (CUDA indices match nvidia-smi)")]
    if order not in (None, "FASTEST_FIRST"):
        return [finding("gpu", name, WARN, f"CUDA_DEVICE_ORDER={order!r} is not a CUDA value", fix)]
    shown = "unset (FASTEST_FIRST)" if order is None else "FASTEST_FIRST"
    if len({g.name for g in f.gpu.gpus}) > 1 and uses_gpus(f):
        observed = f"{shown} with mixed GPU models: CUDA indices differ from nvidia-smi's"
        return [finding("gpu", name, WARN, observed, fix)]
    return [finding("gpu", name, PASS, shown)]


RULES = (
    driver_rule,
    gpus_rule,
    gpu_in_use_rule,
    cuda_visible_devices_rule,
    device_order_rule,
)
