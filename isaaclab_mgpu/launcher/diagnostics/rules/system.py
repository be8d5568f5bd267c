"""System rules: Python, CPUs and threads, ``/dev/shm``, memlock and open-files limits, free disk
space where the run writes its checkpoints."""

from __future__ import annotations

from isaaclab_mgpu.launcher.diagnostics.facts import UNLIMITED, Facts
from isaaclab_mgpu.launcher.diagnostics.rules.base import (
    FAIL,
    GIB,
    MIB,
    PASS,
    WARN,
    Finding,
    finding,
    package,
    size,
    uses_gpus,
)

#: /dev/shm below this warns; below SHM_FAIL fails a multi-rank GPU launch (NCCL's shared-memory
#: transport cannot extend its segments: "failed to extend /dev/shm/nccl-…").
SHM_WARN = 1 * GIB
SHM_FAIL = 512 * MIB
NOFILE_WARN = 4096


def python_rule(f: Facts) -> list[Finding]:
    """Python version (3.10+; Isaac Lab 3 wants 3.12)."""
    major_minor = tuple(int(x) for x in f.python_version.split(".")[:2])
    observed = f"{f.python_version} ({f.python_executable})"
    if major_minor < (3, 10):
        return [finding("system", "python", FAIL, observed, "use Python 3.10 or newer")]
    if package(f, "isaaclab") and major_minor < (3, 12):
        fix = "Isaac Lab 3 expects Python 3.12; use a 3.12 env"
        return [finding("system", "python", WARN, observed, fix)]
    return [finding("system", "python", PASS, observed)]


def threads_rule(f: Facts) -> list[Finding]:
    """CPUs against ranks × OMP_NUM_THREADS."""
    lim, nproc = f.limits, f.plan.nproc or 1
    out = []
    if f.plan.device == "cpu" and nproc > lim.cpu_count:
        fix = f"use --num_gpus {lim.cpu_count} or fewer CPU ranks; more only time-slice"
        out.append(finding("system", "cpu_ranks", WARN, f"{nproc} CPU ranks on {lim.cpu_count} CPUs", fix))
    omp = lim.omp_num_threads
    if omp is None:
        torchrun = nproc > 1 and f.plan.launcher == "torchrun"
        note = "torchrun sets 1 per rank" if torchrun else "library default"
        out.append(finding("system", "omp_num_threads", PASS, f"unset ({note}); {lim.cpu_count} CPUs"))
    elif not omp.strip().isdigit() or int(omp) < 1:
        fix = "set a positive integer or unset"
        out.append(finding("system", "omp_num_threads", WARN, f"OMP_NUM_THREADS={omp!r}", fix))
    elif (total := int(omp) * nproc) > lim.cpu_count:
        observed = f"{nproc} rank(s) × OMP_NUM_THREADS={omp} = {total} threads on {lim.cpu_count} CPUs"
        fix = f"export OMP_NUM_THREADS={max(1, lim.cpu_count // nproc)} (CPUs per rank)"
        out.append(finding("system", "omp_num_threads", WARN, observed, fix))
    else:
        observed = f"{omp} × {nproc} rank(s) on {lim.cpu_count} CPUs"
        out.append(finding("system", "omp_num_threads", PASS, observed))
    return out


def shm_rule(f: Facts) -> list[Finding]:
    """/dev/shm size: NCCL's shared-memory transport needs room (Docker's 64 MB default fails)."""
    shm = f.limits.shm_bytes
    fix = "docker run --shm-size=8g (or --ipc=host); Kubernetes: an emptyDir with medium Memory at /dev/shm"
    if shm is None:
        return [finding("system", "dev_shm", WARN, "/dev/shm is not mounted", fix)]
    multi_gpu = uses_gpus(f) and (f.plan.nproc is None or f.plan.nproc > 1)
    if shm < SHM_FAIL:
        status = FAIL if multi_gpu else WARN
        why = "NCCL cannot extend /dev/shm/nccl-* segments" if multi_gpu else "too small for NCCL"
        return [finding("system", "dev_shm", status, f"{size(shm)} ({why})", fix)]
    if shm < SHM_WARN:
        return [finding("system", "dev_shm", WARN, f"{size(shm)} (under 1 GiB)", fix)]
    return [finding("system", "dev_shm", PASS, size(shm))]


def memlock_rule(f: Facts) -> list[Finding]:
    """ulimit -l: InfiniBand/RDMA transports between nodes pin memory and want it unlimited."""
    soft = f.limits.memlock_soft
    if soft == UNLIMITED:
        return [finding("system", "memlock", PASS, "unlimited")]
    if f.plan.nnodes > 1:
        observed = f"{size(soft)} (InfiniBand/RDMA across nodes needs unlimited)"
        fix = "ulimit -l unlimited (docker --ulimit memlock=-1; SLURM: raise it in limits.conf)"
        return [finding("system", "memlock", WARN, observed, fix)]
    return [finding("system", "memlock", PASS, f"{size(soft)} (only matters for RDMA across nodes)")]


def nofile_rule(f: Facts) -> list[Finding]:
    """Open-files limit: ranks, NCCL and data loaders open many descriptors."""
    soft, hard = f.limits.nofile_soft, f.limits.nofile_hard
    if soft == UNLIMITED or soft >= NOFILE_WARN:
        return [finding("system", "open_files", PASS, "unlimited" if soft == UNLIMITED else str(soft))]
    target = "65536" if hard == UNLIMITED or hard >= 65536 else str(hard)
    return [finding("system", "open_files", WARN, f"{soft} (hard limit {hard})", f"ulimit -n {target}")]


def disk_rule(f: Facts) -> list[Finding]:
    """Free space on the log root's file system: below 1 GiB, or on a resume below 3 checkpoints, warns."""
    from isaaclab_mgpu.contract import space

    d = f.disk
    if d is None:
        return []
    where = f"{d.log_root} (file system at {d.mount})"
    if d.free_bytes is None:
        return [finding("system", "disk_space", WARN, f"free space of {where} unknown", "check it with df")]
    free = f"{space.size_text(d.free_bytes)} free on {where}"
    fix = (
        "free space there, or train with --log_root on a larger file system; "
        "--keep_checkpoints N bounds how many checkpoints a run keeps"
    )
    if d.checkpoint_bytes is not None:
        need = space.RESUME_CHECKPOINTS * d.checkpoint_bytes
        if d.free_bytes < need:
            observed = (
                f"{free}: less than {space.RESUME_CHECKPOINTS} checkpoints of the resumed run "
                f"({space.size_text(d.checkpoint_bytes)} each, {d.resume_checkpoint})"
            )
            return [finding("system", "disk_space", WARN, observed, fix)]
    if d.free_bytes < space.FREE_FLOOR:
        observed = f"{free}: below {space.size_text(space.FREE_FLOOR)}"
        return [finding("system", "disk_space", WARN, observed, fix)]
    return [finding("system", "disk_space", PASS, free)]


RULES = (python_rule, threads_rule, shm_rule, memlock_rule, nofile_rule, disk_rule)
