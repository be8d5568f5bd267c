"""Pure rules: :class:`~.facts.Facts` in, :class:`Finding` tuples out.

Every rule is a function of the facts alone (no I/O, no environment, no clock), so tests describe
any machine — eight GPUs without NVLink, a 64 MB ``/dev/shm``, a GPU held by a stale run — and
assert what ``check-env`` says about it. A finding is one line of the report: its area, a stable
name, pass/warn/fail, the value observed, and a one-line fix when something is to be done.

``fail`` means the launch as planned will not work (``check-env`` exits 1, ``train`` refuses to
start); ``warn`` means it may work but is a known trap or leaves performance on the table.
See ``docs/check-env.md`` for the table of checks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from isaaclab_mgpu.launcher.diagnostics.facts import UNLIMITED, Facts, Gpu, Package
from isaaclab_mgpu.launcher.resolve import GPU_UUID

PASS, WARN, FAIL = "pass", "warn", "fail"
STATUSES = (PASS, WARN, FAIL)
#: Report order of the areas.
AREAS = ("system", "gpu", "topology", "nccl", "launch", "libraries")

MIB = 2**20
GIB = 2**30
#: /dev/shm below this warns; below SHM_FAIL fails a multi-rank GPU launch (NCCL's shared-memory
#: transport cannot extend its segments: "failed to extend /dev/shm/nccl-…").
SHM_WARN = 1 * GIB
SHM_FAIL = 512 * MIB
NOFILE_WARN = 4096
#: Share of a GPU's memory in use at which the launch cannot be expected to fit.
GPU_FULL = 0.95

#: NCCL variables that are workarounds from the troubleshooting table: left set, they change every run.
WORKAROUND_VARS = frozenset(
    {
        "NCCL_P2P_DISABLE",
        "NCCL_P2P_LEVEL",
        "NCCL_SHM_DISABLE",
        "NCCL_CUMEM_HOST_ENABLE",
        "NCCL_CUMEM_ENABLE",
        "NCCL_IB_DISABLE",
        "NCCL_ALGO",
        "NCCL_PROTO",
        "NCCL_NVLS_ENABLE",
        "NCCL_NET_GDR_LEVEL",
        "NCCL_BUFFSIZE",
    }
)
#: Command-line fragments of processes an mgpu / torchrun launch leaves behind.
STALE_MARKERS = ("isaaclab_mgpu.worker", "isaaclab_mgpu.jaxrun", "torch.distributed.run", "torchrun")


@dataclass(frozen=True)
class Finding:
    """One judged check: a row of the report and an entry of ``--json``'s ``checks``."""

    area: str
    """One of :data:`AREAS`."""

    name: str
    """Stable identifier within the area; per-item checks add ``:item`` (``gpu_in_use:0``)."""

    status: str
    """``pass``, ``warn`` or ``fail``."""

    observed: str
    """The value seen, in words."""

    fix: str | None = None
    """One line saying what to do; None when nothing is."""


def _f(area: str, name: str, status: str, observed: str, fix: str | None = None) -> Finding:
    return Finding(area, name, status, observed, fix if status != PASS else None)


def evaluate(facts: Facts) -> tuple[Finding, ...]:
    """Judge ``facts`` with every rule; findings ordered by area, then rule order."""
    found: list[Finding] = []
    for rule in RULES:
        found.extend(rule(facts))
    order = {a: i for i, a in enumerate(AREAS)}
    return tuple(sorted(found, key=lambda x: order[x.area]))


def failures(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """The failing findings."""
    return tuple(f for f in findings if f.status == FAIL)


# -- helpers -----------------------------------------------------------------------------------


def _size(n: int) -> str:
    if n == UNLIMITED:
        return "unlimited"
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", 1024)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value >= 10 or value == int(value) else f"{value:.1f} {unit}"
    return f"{n} B"


def _pkg(facts: Facts, name: str) -> Package | None:
    for p in facts.packages:
        if p.name == name and p.version is not None:
            return p
    return None


def _major(version: str | None) -> int | None:
    m = re.match(r"\s*(\d+)", version or "")
    return int(m.group(1)) if m else None


def _uses_gpus(facts: Facts) -> bool:
    return facts.plan.device == "cuda"


def used_gpus(facts: Facts) -> tuple[Gpu, ...]:
    """The NVML GPUs this node's ranks would run on (all of them when that cannot be told)."""
    gpus = facts.gpu.gpus
    if not _uses_gpus(facts):
        return ()
    entries = facts.plan.visible_entries
    if not entries and facts.cuda_visible_devices is not None and facts.plan.error is None:
        return ()  # CUDA_VISIBLE_DEVICES hides every GPU
    if not entries:
        chosen = list(gpus)
    else:
        chosen = []
        for e in entries:
            g = _match(gpus, e)
            if g is not None and g not in chosen:
                chosen.append(g)
    if facts.plan.nproc is not None:
        chosen = chosen[: facts.plan.nproc]
    return tuple(chosen)


def _match(gpus: tuple[Gpu, ...], entry: str) -> Gpu | None:
    if entry.isdigit():
        i = int(entry)
        return gpus[i] if i < len(gpus) else None
    hits = [g for g in gpus if g.uuid.startswith(entry)]
    return hits[0] if len(hits) == 1 else None


# -- system ------------------------------------------------------------------------------------


def python_rule(f: Facts) -> list[Finding]:
    """Python version (3.10+; Isaac Lab 3 wants 3.12)."""
    major_minor = tuple(int(x) for x in f.python_version.split(".")[:2])
    observed = f"{f.python_version} ({f.python_executable})"
    if major_minor < (3, 10):
        return [_f("system", "python", FAIL, observed, "use Python 3.10 or newer")]
    if _pkg(f, "isaaclab") and major_minor < (3, 12):
        return [_f("system", "python", WARN, observed, "Isaac Lab 3 expects Python 3.12; use a 3.12 env")]
    return [_f("system", "python", PASS, observed)]


def threads_rule(f: Facts) -> list[Finding]:
    """CPUs against ranks × OMP_NUM_THREADS."""
    lim, nproc = f.limits, f.plan.nproc or 1
    out = []
    if f.plan.device == "cpu" and nproc > lim.cpu_count:
        out.append(
            _f(
                "system",
                "cpu_ranks",
                WARN,
                f"{nproc} CPU ranks on {lim.cpu_count} CPUs",
                f"use --num_gpus {lim.cpu_count} or fewer CPU ranks; more only time-slice",
            )
        )
    omp = lim.omp_num_threads
    if omp is None:
        note = (
            "torchrun sets 1 per rank" if nproc > 1 and f.plan.launcher == "torchrun" else "library default"
        )
        out.append(_f("system", "omp_num_threads", PASS, f"unset ({note}); {lim.cpu_count} CPUs"))
        return out
    if not omp.strip().isdigit() or int(omp) < 1:
        out.append(
            _f(
                "system",
                "omp_num_threads",
                WARN,
                f"OMP_NUM_THREADS={omp!r}",
                "set a positive integer or unset",
            )
        )
        return out
    total = int(omp) * nproc
    if total > lim.cpu_count:
        out.append(
            _f(
                "system",
                "omp_num_threads",
                WARN,
                f"{nproc} rank(s) × OMP_NUM_THREADS={omp} = {total} threads on {lim.cpu_count} CPUs",
                f"export OMP_NUM_THREADS={max(1, lim.cpu_count // nproc)} (CPUs per rank)",
            )
        )
    else:
        out.append(_f("system", "omp_num_threads", PASS, f"{omp} × {nproc} rank(s) on {lim.cpu_count} CPUs"))
    return out


def shm_rule(f: Facts) -> list[Finding]:
    """/dev/shm size: NCCL's shared-memory transport needs room (Docker's 64 MB default fails)."""
    shm = f.limits.shm_bytes
    fix = "docker run --shm-size=8g (or --ipc=host); Kubernetes: an emptyDir with medium Memory at /dev/shm"
    if shm is None:
        return [_f("system", "dev_shm", WARN, "/dev/shm is not mounted", fix)]
    multi_gpu = _uses_gpus(f) and (f.plan.nproc is None or f.plan.nproc > 1)
    if shm < SHM_FAIL:
        status = FAIL if multi_gpu else WARN
        why = "NCCL cannot extend /dev/shm/nccl-* segments" if multi_gpu else "too small for NCCL"
        return [_f("system", "dev_shm", status, f"{_size(shm)} ({why})", fix)]
    if shm < SHM_WARN:
        return [_f("system", "dev_shm", WARN, f"{_size(shm)} (under 1 GiB)", fix)]
    return [_f("system", "dev_shm", PASS, _size(shm))]


def memlock_rule(f: Facts) -> list[Finding]:
    """ulimit -l: InfiniBand/RDMA transports between nodes pin memory and want it unlimited."""
    soft = f.limits.memlock_soft
    if soft == UNLIMITED:
        return [_f("system", "memlock", PASS, "unlimited")]
    if f.plan.nnodes > 1:
        return [
            _f(
                "system",
                "memlock",
                WARN,
                f"{_size(soft)} (InfiniBand/RDMA across nodes needs unlimited)",
                "ulimit -l unlimited (docker --ulimit memlock=-1; SLURM: raise it in limits.conf)",
            )
        ]
    return [_f("system", "memlock", PASS, f"{_size(soft)} (only matters for RDMA across nodes)")]


def nofile_rule(f: Facts) -> list[Finding]:
    """Open-files limit: ranks, NCCL and data loaders open many descriptors."""
    soft, hard = f.limits.nofile_soft, f.limits.nofile_hard
    if soft == UNLIMITED or soft >= NOFILE_WARN:
        return [_f("system", "open_files", PASS, "unlimited" if soft == UNLIMITED else str(soft))]
    target = "65536" if hard == UNLIMITED or hard >= 65536 else str(hard)
    return [_f("system", "open_files", WARN, f"{soft} (hard limit {hard})", f"ulimit -n {target}")]


# -- GPUs --------------------------------------------------------------------------------------


def driver_rule(f: Facts) -> list[Finding]:
    """An NVIDIA driver answering NVML, its version and the CUDA version it supports."""
    g = f.gpu
    if not g.nvml:
        if not _uses_gpus(f):
            return [_f("gpu", "driver", PASS, f"none ({g.error}); not needed for --device cpu")]
        return [
            _f(
                "gpu",
                "driver",
                FAIL,
                f"no NVIDIA driver ({g.error})",
                "run on a GPU node with the NVIDIA driver loaded, or use --device cpu",
            )
        ]
    return [_f("gpu", "driver", PASS, f"{g.driver_version} (supports CUDA {g.cuda_driver_version or '?'})")]


def gpus_rule(f: Facts) -> list[Finding]:
    """GPU count, models and memory."""
    g = f.gpu
    if not g.nvml:
        return []
    if not g.gpus:
        status = FAIL if _uses_gpus(f) else PASS
        return [_f("gpu", "gpus", status, "NVML reports no GPU", "run on a GPU node, or use --device cpu")]
    names = sorted({x.name for x in g.gpus})
    mem = sorted({x.memory_total_mib for x in g.gpus})
    observed = f"{len(g.gpus)} × {', '.join(names)} ({', '.join(f'{m} MiB' for m in mem)})"
    if len(names) > 1 and _uses_gpus(f):
        return [
            _f(
                "gpu",
                "gpus",
                WARN,
                observed + " — mixed models",
                "ranks wait for the slowest GPU; pick one model with CUDA_VISIBLE_DEVICES",
            )
        ]
    return [_f("gpu", "gpus", PASS, observed)]


def _stale(proc_cmd: str | None) -> bool:
    return bool(proc_cmd) and any(m in proc_cmd for m in STALE_MARKERS)


def gpu_in_use_rule(f: Facts) -> list[Finding]:
    """Memory already in use on the GPUs the launch would use, and who holds it."""
    used = used_gpus(f)
    if not used:
        return []
    out = []
    for g in used:
        procs = g.processes
        share = g.memory_used_mib / g.memory_total_mib if g.memory_total_mib else 0.0
        held = ", ".join(
            f"PID {p.pid} {p.name or '?'}" + (f" {p.used_mib} MiB" if p.used_mib is not None else "")
            for p in procs
        )
        observed = f"GPU {g.index}: {g.memory_used_mib}/{g.memory_total_mib} MiB used" + (
            f" by {held}" if held else ""
        )
        pids = " ".join(str(p.pid) for p in procs)
        if any(_stale(p.cmdline) for p in procs):
            out.append(
                _f(
                    "gpu",
                    f"gpu_in_use:{g.index}",
                    FAIL,
                    observed + " — a previous mgpu/torchrun run",
                    f"a previous run still holds this GPU: kill {pids} (or wait for it to exit)",
                )
            )
        elif share >= GPU_FULL:
            out.append(
                _f(
                    "gpu",
                    f"gpu_in_use:{g.index}",
                    FAIL,
                    observed,
                    f"the GPU is full: stop {pids or 'the process using it'} or exclude it with "
                    "CUDA_VISIBLE_DEVICES",
                )
            )
        elif procs:
            out.append(
                _f(
                    "gpu",
                    f"gpu_in_use:{g.index}",
                    WARN,
                    observed,
                    f"another process shares this GPU: stop {pids} or exclude it with CUDA_VISIBLE_DEVICES",
                )
            )
        else:
            out.append(_f("gpu", f"gpu_in_use:{g.index}", PASS, observed))
    return out


def cuda_visible_devices_rule(f: Facts) -> list[Finding]:
    """CUDA_VISIBLE_DEVICES: duplicates, -1, unknown UUIDs, indices out of range, malformed entries."""
    value = f.cuda_visible_devices
    name = "cuda_visible_devices"
    total = len(f.gpu.gpus) if f.gpu.nvml else None
    if value is None:
        if total is None:
            seen = "no GPU visible: no NVIDIA driver"
        else:
            seen = f"all {total} GPU(s) visible" if total else "no GPU found"
        return [_f("gpu", name, PASS, f"unset ({seen})")]
    cuda = _uses_gpus(f)
    bad = FAIL if cuda else WARN
    shown = f"CUDA_VISIBLE_DEVICES={value!r}"
    entries = [e.strip() for e in value.split(",")] if value.strip() else []
    problems: list[tuple[str, str, str]] = []  # (status, what, fix)
    valid: list[str] = []
    for i, e in enumerate(entries):
        if re.fullmatch(r"-\d+", e):
            if i == 0:
                problems.append((bad, "-1 hides every GPU", "unset it, or list the GPUs to use (e.g. 0,1)"))
            else:
                problems.append(
                    (WARN, f"{e} hides the entries after it", "remove it and list only the GPUs to use")
                )
            break
        if e.isdigit():
            if total is not None and int(e) >= total:
                problems.append(
                    (bad, f"index {e} is out of range (GPUs 0..{total - 1})", f"use indices 0..{total - 1}")
                )
                continue
            key = str(int(e))
        elif GPU_UUID.match(e):
            key = e
            if e.startswith("GPU-") and f.gpu.nvml:
                hits = [g for g in f.gpu.gpus if g.uuid.startswith(e)]
                if not hits:
                    problems.append(
                        (bad, f"{e} is not a GPU of this machine", "use a UUID from nvidia-smi -L")
                    )
                    continue
                if len(hits) > 1:
                    problems.append((bad, f"{e} matches several GPUs", "give the full UUID"))
                    continue
                key = str(hits[0].index)
        else:
            problems.append((bad, f"{e!r} is neither an index nor a GPU-/MIG- UUID", "fix or unset it"))
            continue
        if key in valid:
            problems.append((bad, f"{e} is listed twice", "list each GPU once"))
            continue
        valid.append(key)
    if not entries:
        problems.append((bad, "empty: hides every GPU", "unset it, or list the GPUs to use"))
    if not problems:
        return [_f("gpu", name, PASS, f"{shown} ({len(valid)} visible)")]
    worst = FAIL if any(p[0] == FAIL for p in problems) else WARN
    what = "; ".join(p[1] for p in problems)
    fix = "; ".join(dict.fromkeys(p[2] for p in problems))
    return [_f("gpu", name, worst, f"{shown}: {what}", fix)]


def device_order_rule(f: Facts) -> list[Finding]:
    """CUDA_DEVICE_ORDER: with mixed models CUDA's default order differs from nvidia-smi's."""
    order = f.cuda_device_order
    models = {g.name for g in f.gpu.gpus}
    if order == "PCI_BUS_ID":
        return [_f("gpu", "cuda_device_order", PASS, "PCI_BUS_ID (CUDA indices match nvidia-smi)")]
    if order not in (None, "FASTEST_FIRST"):
        return [
            _f(
                "gpu",
                "cuda_device_order",
                WARN,
                f"CUDA_DEVICE_ORDER={order!r} is not a CUDA value",
                "export CUDA_DEVICE_ORDER=PCI_BUS_ID",
            )
        ]
    shown = "unset (FASTEST_FIRST)" if order is None else "FASTEST_FIRST"
    if len(models) > 1 and _uses_gpus(f):
        return [
            _f(
                "gpu",
                "cuda_device_order",
                WARN,
                f"{shown} with mixed GPU models: CUDA indices differ from nvidia-smi's",
                "export CUDA_DEVICE_ORDER=PCI_BUS_ID",
            )
        ]
    return [_f("gpu", "cuda_device_order", PASS, shown)]


# -- topology ----------------------------------------------------------------------------------

_P2P_FIXES = ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL")


def topology_rule(f: Facts) -> list[Finding]:
    """NVLink or PCIe between the GPUs in use; world size 2 over PCIe is where known hangs occur."""
    used = used_gpus(f)
    if len(used) < 2:
        why = "not used (--device cpu)" if not _uses_gpus(f) else f"{len(used)} GPU in use on this node"
        return [_f("topology", "gpu_links", PASS, why)]
    idx = {g.index for g in used}
    links = [x for x in f.gpu.links if x.a in idx and x.b in idx]
    if not links:
        return [
            _f(
                "topology",
                "gpu_links",
                WARN,
                f"unknown for {len(used)} GPUs (NVML topology unavailable, no nvidia-smi)",
                "run nvidia-smi topo -m to see NVLink/PCIe paths; mgpu probe-nccl measures them",
            )
        ]
    nv = [x for x in links if x.nvlink]
    paths = sorted({x.path for x in links if not x.nvlink})
    if len(nv) == len(links):
        return [_f("topology", "gpu_links", PASS, f"NVLink between all {len(used)} GPUs")]
    saved = [k for k, _ in f.saved_workarounds if k in _P2P_FIXES]
    if nv:
        pairs = ", ".join(f"{x.a}-{x.b}" for x in nv)
        return [
            _f(
                "topology",
                "gpu_links",
                WARN,
                f"NVLink only between {pairs}; other pairs over PCIe ({', '.join(paths)})",
                "pick GPUs joined by NVLink with CUDA_VISIBLE_DEVICES; all-reduce runs at the slowest link",
            )
        ]
    observed = f"PCIe only, no NVLink between {len(used)} GPUs (paths {', '.join(paths)})"
    if len(used) == 2:
        if saved:
            return [_f("topology", "gpu_links", PASS, observed + f"; saved workaround {saved[0]} applies")]
        return [
            _f(
                "topology",
                "gpu_links",
                WARN,
                observed + " — world size 2 over PCIe without NVLink is where NCCL hangs are known",
                "if it hangs: mgpu probe-nccl, then NCCL_P2P_DISABLE=1 (or NCCL_P2P_LEVEL=LOC); "
                "keep what works with --save-workaround",
            )
        ]
    cross = " crossing CPU sockets (SYS)" if "SYS" in paths else ""
    return [
        _f(
            "topology",
            "gpu_links",
            WARN,
            observed + cross,
            "expect all-reduce at PCIe speed (≈63 GB/s Gen5 per direction); measure with mgpu probe-nccl"
            + ("; on timeouts try NCCL_CUMEM_HOST_ENABLE=0" if cross else ""),
        )
    ]


# -- NCCL --------------------------------------------------------------------------------------


def nccl_env_rule(f: Facts) -> list[Finding]:
    """NCCL_* / TORCH_NCCL_* variables set: a workaround or debug setting left set is a warning."""
    if not f.nccl_env:
        observed = "no NCCL_* or TORCH_NCCL_* setting"
        if f.env_labels:
            shown = ", ".join(f"{k}={v}" for k, v in f.env_labels)
            observed += f" ({shown}: the image's label, read by neither NCCL nor PyTorch)"
        return [_f("nccl", "nccl_env", PASS, observed)]
    saved = dict(f.saved_workarounds)
    nvlink = any(x.nvlink for x in f.gpu.links)
    out = []
    for key, value in f.nccl_env:
        name, shown = f"nccl_env:{key}", f"{key}={value}"
        if key in WORKAROUND_VARS:
            if saved.get(key) == value:
                out.append(_f("nccl", name, PASS, shown + " (the saved workaround for this machine)"))
                continue
            extra = ""
            if key == "NCCL_P2P_DISABLE" and value.strip() not in ("0", "") and nvlink:
                extra = "; it turns off NVLink peer-to-peer on this machine"
            out.append(
                _f(
                    "nccl",
                    name,
                    WARN,
                    f"{shown}: a workaround left set changes every run{extra}",
                    f"unset {key} unless mgpu probe-nccl shows this machine needs it "
                    "(then keep it with --save-workaround)",
                )
            )
        elif key == "NCCL_DEBUG" and value.upper() in ("INFO", "TRACE"):
            out.append(
                _f("nccl", name, WARN, f"{shown}: every rank logs NCCL internals", f"unset {key} when done")
            )
        elif key == "TORCH_NCCL_ASYNC_ERROR_HANDLING" and value.strip() == "0":
            out.append(
                _f(
                    "nccl",
                    name,
                    WARN,
                    f"{shown}: a failed collective hangs instead of raising",
                    f"unset {key} (torchrun sets 1)",
                )
            )
        else:
            out.append(_f("nccl", name, PASS, shown))
    return out


def saved_workarounds_rule(f: Facts) -> list[Finding]:
    """Workarounds saved for this machine (``train`` applies them), and conflicts with the env."""
    if not f.saved_workarounds:
        return [_f("nccl", "saved_workarounds", PASS, f"none saved for {f.machine_key}")]
    env = dict(f.nccl_env)
    shown = ", ".join(f"{k}={v}" for k, v in f.saved_workarounds)
    clash = [f"{k} (env {env[k]}, saved {v})" for k, v in f.saved_workarounds if k in env and env[k] != v]
    if clash:
        return [
            _f(
                "nccl",
                "saved_workarounds",
                WARN,
                f"{shown}; the environment disagrees: {', '.join(clash)}",
                f"unset the variable or remove the entry from {f.workaround_store}",
            )
        ]
    return [_f("nccl", "saved_workarounds", PASS, f"{shown} (train applies them)")]


def nccl_version_rule(f: Facts) -> list[Finding]:
    """The NCCL wheel(s) installed, and whether torch loads the same version (--deep)."""
    wheels = [p for p in f.packages if p.name.startswith("nvidia-nccl-") and p.version]
    deep_nccl = None
    if f.deep is not None and f.deep.torch.error is None:
        deep_nccl = f.deep.torch.values.get("nccl")
    if len(wheels) > 1:
        return [
            _f(
                "nccl",
                "nccl_version",
                WARN,
                ", ".join(f"{p.name} {p.version}" for p in wheels) + ": more than one NCCL wheel",
                "uninstall the NCCL wheel whose CUDA major differs from torch's",
            )
        ]
    if not wheels:
        seen = f"{deep_nccl} (loaded by torch)" if deep_nccl else "no nvidia-nccl wheel (torch may bundle it)"
        return [_f("nccl", "nccl_version", PASS, seen)]
    w = wheels[0]
    observed = f"{w.version} ({w.name})"
    if deep_nccl and not str(w.version).startswith(str(deep_nccl)):
        return [
            _f(
                "nccl",
                "nccl_version",
                WARN,
                observed + f"; torch loads NCCL {deep_nccl}",
                "a different libnccl is found first: check LD_LIBRARY_PATH",
            )
        ]
    return [_f("nccl", "nccl_version", PASS, observed)]


# -- launch ------------------------------------------------------------------------------------


def _split_fix(message: str) -> tuple[str, str]:
    head, sep, tail = message.partition("; ")
    return (head, tail) if sep else (message, "fix the options or the environment as described")


def plan_rule(f: Facts) -> list[Finding]:
    """The launch the options describe can be built, and resolve found nothing that stops ``train``."""
    p = f.plan
    if p.error is not None:
        observed, fix = _split_fix(p.error)
        return [_f("launch", "plan", FAIL, observed, fix)]
    ranks = f"{p.nproc} rank(s)" if p.nproc is not None else "ranks unknown"
    observed = f"{p.launcher}, {ranks} × {p.nnodes} node(s) on {p.device}, {p.library}/{p.framework}"
    # A busy --master_port is judged by the port rule; report the rest here.
    other = [w for w in p.warnings if "--master_port" not in w]
    if other:
        observed_w, fix = _split_fix(other[0])
        more = f" (+{len(other) - 1} more)" if len(other) > 1 else ""
        return [_f("launch", "plan", FAIL, f"{observed}: {observed_w}{more}", fix)]
    return [_f("launch", "plan", PASS, observed)]


def endpoint_rule(f: Facts) -> list[Finding]:
    """Rendezvous endpoints: the port free where it is served, the address resolving and reachable."""
    if not f.net.endpoints:
        if f.plan.launcher == "jaxrun":
            return [_f("launch", "rendezvous", PASS, "JAX coordinator on 127.0.0.1, a free port picked")]
        return [_f("launch", "rendezvous", PASS, "--standalone: torchrun picks a free port")]
    out = []
    for e in f.net.endpoints:
        where = f"{e.host}:{e.port}"
        opt = {
            "master": "--master_port",
            "coordinator": "--coordinator_address",
            "rdzv_endpoint": "--rdzv_endpoint",
        }
        if e.local and e.port_free is False:
            out.append(
                _f(
                    "launch",
                    f"port:{e.role}",
                    FAIL,
                    f"{where}: port {e.port} is already in use on this host",
                    f"pick another port with {opt[e.role]}, or stop the process listening on {e.port}"
                    + (
                        " (leave --master_port out: --standalone picks a free one)"
                        if e.role == "master"
                        else ""
                    ),
                )
            )
        elif e.local:
            out.append(_f("launch", f"port:{e.role}", PASS, f"{where}: port free on this host"))
        if e.resolves is False:
            out.append(
                _f(
                    "launch",
                    f"address:{e.role}",
                    FAIL,
                    f"{e.host} does not resolve",
                    "give node 0's IP address, or fix DNS / /etc/hosts",
                )
            )
        elif e.reachable is not None:
            r = e.reachable
            if r == "open":
                out.append(_f("launch", f"address:{e.role}", PASS, f"{where}: node 0 is listening"))
            elif r == "refused":
                out.append(
                    _f("launch", f"address:{e.role}", PASS, f"{where}: host answers, nothing listens yet")
                )
            else:
                out.append(
                    _f(
                        "launch",
                        f"address:{e.role}",
                        WARN if r == "timeout" else FAIL,
                        f"{where}: {'no TCP answer within 1 s' if r == 'timeout' else 'unreachable'}",
                        f"check the address, that port {e.port} is open between the nodes, and the network",
                    )
                )
    return out


def hostname_rule(f: Facts) -> list[Finding]:
    """This host's name resolves (to a non-loopback address when other nodes must reach it); warnings only."""
    n = f.net
    multi = f.plan.nnodes > 1
    if n.hostname_address is None:
        return [
            _f(
                "launch",
                "hostname",
                WARN,
                f"{n.hostname} does not resolve ({n.hostname_error})",
                "add the host name to /etc/hosts or DNS",
            )
        ]
    observed = f"{n.hostname} → {n.hostname_address}"
    loopback = n.hostname_address.startswith("127.") or n.hostname_address == "::1"
    if multi and f.plan.node_rank == 0 and loopback:
        return [
            _f(
                "launch",
                "hostname",
                WARN,
                observed + ": other nodes cannot reach a loopback address",
                "give --master_addr as this node's network IP, or map the name to it in /etc/hosts",
            )
        ]
    return [_f("launch", "hostname", PASS, observed)]


def slurm_rule(f: Facts) -> list[Finding]:
    """SLURM context: what it fills in, and one mgpu per node."""
    s = dict(f.slurm)
    if "SLURM_JOB_ID" not in s:
        return [_f("launch", "slurm", PASS, "not in a SLURM job")]
    observed = (
        f"job {s['SLURM_JOB_ID']}, {s.get('SLURM_NNODES', '?')} node(s), node {s.get('SLURM_NODEID', '?')}"
    )
    if f.plan.filled:
        observed += "; filled " + ", ".join(f.plan.filled)
    per_node = s.get("SLURM_NTASKS_PER_NODE", "").split("(")[0]
    ntasks, nnodes = s.get("SLURM_NTASKS", ""), s.get("SLURM_NNODES", "")
    many = (per_node.isdigit() and int(per_node) > 1) or (
        ntasks.isdigit() and nnodes.isdigit() and int(ntasks) > int(nnodes)
    )
    if many:
        return [
            _f(
                "launch",
                "slurm",
                WARN,
                observed + "; several tasks per node, each would start every rank",
                "srun --ntasks-per-node=1 mgpu train ... (mgpu starts the ranks of a node itself)",
            )
        ]
    return [_f("launch", "slurm", PASS, observed)]


# -- libraries ---------------------------------------------------------------------------------


def _cuda_major_of_driver(f: Facts) -> int | None:
    return _major(f.gpu.cuda_driver_version) if f.gpu.nvml else None


def torch_rule(f: Facts) -> list[Finding]:
    """torch installed (the torchrun path needs it), CUDA build matching the driver."""
    p = _pkg(f, "torch")
    needed = f.plan.launcher == "torchrun" or f.plan.framework == "torch"
    if p is None:
        if needed:
            return [
                _f("libraries", "torch", FAIL, "not installed", "pip install torch (a CUDA build for GPUs)")
            ]
        return [_f("libraries", "torch", PASS, "not installed (not needed for skrl JAX)")]
    build = p.cuda if p.cuda not in (None, "none") else None
    observed = f"{p.version} ({'CUDA ' + build + ' build' if build else 'CPU build'})"
    out = []
    driver = _cuda_major_of_driver(f)
    if _uses_gpus(f) and needed and build is None and p.cuda == "none":
        out.append(
            _f(
                "libraries",
                "torch",
                FAIL,
                observed + ": cannot use GPUs",
                "install a CUDA build of torch (pip install torch from the matching CUDA index)",
            )
        )
    elif build and driver is not None and _major(build) is not None and _major(build) > driver:
        out.append(
            _f(
                "libraries",
                "torch",
                FAIL,
                observed + f": the driver supports CUDA {f.gpu.cuda_driver_version} only",
                f"update the NVIDIA driver, or install torch built for CUDA {driver}.x",
            )
        )
    else:
        out.append(_f("libraries", "torch", PASS, observed))
    out.extend(_torch_deep(f))
    return out


def _torch_deep(f: Facts) -> list[Finding]:
    if f.deep is None or not f.deep.torch.ran:
        return []
    t = f.deep.torch
    if t.error is not None:
        return [
            _f(
                "libraries",
                "torch_runtime",
                FAIL,
                f"importing torch failed: {t.error}",
                "reinstall torch; a timeout points at a broken CUDA install or driver",
            )
        ]
    v = t.values
    observed = (
        f"CUDA runtime {v.get('cuda_build') or 'none'}, available={v.get('cuda_available')}, "
        f"{v.get('device_count', 0)} device(s), cuDNN {v.get('cudnn') or 'none'}, "
        f"NCCL {v.get('nccl') or 'none'} "
        f"({t.seconds:.1f} s)"
    )
    visible = len(used_gpus(f)) if f.gpu.nvml else 0
    if _uses_gpus(f) and visible and not v.get("cuda_available"):
        return [
            _f(
                "libraries",
                "torch_runtime",
                FAIL,
                observed + ": torch cannot use the GPUs NVML shows",
                "match torch's CUDA build to the driver; check CUDA_VISIBLE_DEVICES and LD_LIBRARY_PATH",
            )
        ]
    if _uses_gpus(f) and v.get("cuda_available") and not v.get("nccl_available"):
        return [
            _f(
                "libraries",
                "torch_runtime",
                FAIL,
                observed + ": torch has no NCCL",
                "install a CUDA build of torch",
            )
        ]
    return [_f("libraries", "torch_runtime", PASS, observed)]


def rl_library_rule(f: Facts) -> list[Finding]:
    """The RL library the built-in worker imports, in the supported major versions."""
    out = []
    supported = {"rsl-rl-lib": (5, "rsl_rl"), "skrl": (2, "skrl")}
    for dist, (major, lib) in supported.items():
        p = _pkg(f, dist)
        needed = f.plan.builtin_worker and f.plan.library == lib
        if p is None:
            status = FAIL if needed else PASS
            out.append(
                _f(
                    "libraries",
                    dist,
                    status,
                    "not installed" + ("" if needed else " (not used)"),
                    f"pip install {dist}",
                )
            )
        elif _major(p.version) != major:
            out.append(
                _f(
                    "libraries",
                    dist,
                    WARN if needed else PASS,
                    f"{p.version} (mgpu supports {major}.x)",
                    f"pip install '{dist}>={major},<{major + 1}'",
                )
            )
        else:
            out.append(_f("libraries", dist, PASS, p.version or ""))
    return out


def jax_rule(f: Facts) -> list[Finding]:
    """jax, jaxlib and the jax CUDA plugin: versions agree, CUDA major supported by the driver."""
    jax, jaxlib = _pkg(f, "jax"), _pkg(f, "jaxlib")
    needed = f.plan.framework == "jax"
    plugins = [p for p in f.packages if p.name.startswith("jax-cuda") and p.version]
    if jax is None:
        status = FAIL if needed else PASS
        return [
            _f(
                "libraries",
                "jax",
                status,
                "not installed" + ("" if needed else " (not used)"),
                "pip install 'skrl[jax]'",
            )
        ]
    shown = f"jax {jax.version}, jaxlib {jaxlib.version if jaxlib else 'missing'}"
    if plugins:
        shown += ", " + ", ".join(f"{p.name} {p.version}" for p in plugins)
    out = []
    driver = _cuda_major_of_driver(f)
    problems: list[tuple[str, str]] = []
    if jaxlib is None:
        problems.append(("jaxlib is missing", "pip install jaxlib"))
    majors = sorted({_major(p.cuda) for p in plugins if p.cuda})
    if len(majors) > 1:
        problems.append(
            (f"plugins for CUDA {' and '.join(map(str, majors))} both installed", "uninstall all but one")
        )
    for p in plugins:
        if jaxlib is not None and p.version != jaxlib.version:
            problems.append(
                (
                    f"{p.name} {p.version} does not match jaxlib {jaxlib.version}",
                    f"pip install -U 'jax[cuda{p.cuda}]'",
                )
            )
        m = _major(p.cuda)
        if m is not None and driver is not None and m > driver:
            problems.append(
                (
                    f"{p.name} needs CUDA {m}, the driver supports {f.gpu.cuda_driver_version}",
                    f"pip install 'jax[cuda{driver}]' (or update the driver)",
                )
            )
    if needed and _uses_gpus(f) and not plugins:
        cu = driver or 12
        problems.append(("no jax CUDA plugin: ranks would run on CPU", f"pip install 'jax[cuda{cu}]'"))
    if problems:
        status = FAIL if needed else WARN
        what = "; ".join(p[0] for p in problems)
        fix = "; ".join(dict.fromkeys(p[1] for p in problems))
        out.append(_f("libraries", "jax", status, f"{shown}: {what}", fix))
    else:
        out.append(_f("libraries", "jax", PASS, shown))
    if f.deep is not None and f.deep.jax.ran:
        j = f.deep.jax
        if j.error is not None:
            out.append(
                _f(
                    "libraries",
                    "jax_runtime",
                    FAIL if needed else WARN,
                    f"importing jax failed: {j.error}",
                    "reinstall jax",
                )
            )
        else:
            devs = j.values.get("devices") or []
            observed = f"backend {j.values.get('backend')}, devices {', '.join(map(str, devs)) or 'none'}"
            if needed and _uses_gpus(f) and j.values.get("backend") != "gpu":
                out.append(
                    _f(
                        "libraries",
                        "jax_runtime",
                        FAIL,
                        observed + ": jax does not see the GPUs",
                        "install the jax CUDA plugin matching the driver",
                    )
                )
            else:
                out.append(_f("libraries", "jax_runtime", PASS, observed))
    return out


def optional_packages_rule(f: Facts) -> list[Finding]:
    """warp-lang and isaaclab: reported, optional."""
    out = []
    for name in ("warp-lang", "isaaclab"):
        p = _pkg(f, name)
        out.append(_f("libraries", name, PASS, p.version if p else "not installed (optional)"))
    return out


RULES: tuple[Callable[[Facts], list[Finding]], ...] = (
    python_rule,
    threads_rule,
    shm_rule,
    memlock_rule,
    nofile_rule,
    driver_rule,
    gpus_rule,
    gpu_in_use_rule,
    cuda_visible_devices_rule,
    device_order_rule,
    topology_rule,
    nccl_env_rule,
    saved_workarounds_rule,
    nccl_version_rule,
    plan_rule,
    endpoint_rule,
    hostname_rule,
    slurm_rule,
    torch_rule,
    rl_library_rule,
    jax_rule,
    optional_packages_rule,
)
