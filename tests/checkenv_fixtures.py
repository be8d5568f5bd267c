"""Fact fixtures for check-env rule tests: describe machines this box cannot show."""

from __future__ import annotations

from dataclasses import replace

from isaaclab_mgpu.launcher.diagnostics.facts import Facts, Limits, NetFacts, Package, Plan
from isaaclab_mgpu.launcher.nvml import Gpu, GpuFacts, GpuLink, GpuProcess

GIB = 2**30


def gpus(n: int, name: str = "NVIDIA H100 80GB HBM3", mem: int = 81559) -> tuple[Gpu, ...]:
    return tuple(Gpu(i, name, f"GPU-{i:08x}-aaaa-bbbb-cccc-0000000000{i:02d}", mem, 1) for i in range(n))


def links(n: int, *, nvlink: bool, path: str = "PXB") -> tuple[GpuLink, ...]:
    return tuple(GpuLink(a, b, nvlink, "NV18" if nvlink else path) for a in range(n) for b in range(a + 1, n))


def gpu_machine(n: int, *, nvlink: bool = True, path: str = "PXB", cuda: str = "12.4") -> GpuFacts:
    return GpuFacts(
        nvml=True,
        driver_version="550.54.15",
        cuda_driver_version=cuda,
        gpus=gpus(n),
        links=links(n, nvlink=nvlink, path=path),
        topology_source="nvml",
    )


PACKAGES = (
    Package("torch", "2.5.1", "12.4"),
    Package("rsl-rl-lib", "5.5.1"),
    Package("skrl", "2.1.1"),
    Package("jax", "0.4.35"),
    Package("jaxlib", "0.4.35"),
    Package("warp-lang", "1.5.0"),
    Package("isaaclab", None),
    Package("tensordict", "0.8.0"),
    Package("nvidia-nccl-cu12", "2.21.5", "12"),
)


def plan(nproc: int = 2, device: str = "cuda", **kw) -> Plan:
    base = dict(
        device=device,
        launcher="torchrun",
        library="rsl_rl",
        framework="torch",
        builtin_worker=True,
        nproc=nproc,
        world_size=nproc,
        nnodes=1,
        node_rank=0,
        command="python -m torch.distributed.run ...",
        argv=("python", "-m", "torch.distributed.run"),
        visible_entries=tuple(str(i) for i in range(nproc)) if device == "cuda" else (),
    )
    base.update(kw)
    return Plan(**base)


def facts(n_gpus: int = 2, *, nvlink: bool = True, nproc: int | None = None, **kw) -> Facts:
    """A healthy machine with ``n_gpus`` GPUs; override any field with keyword arguments."""
    base = Facts(
        python_version="3.11.7",
        python_executable="/usr/bin/python3",
        packages=PACKAGES,
        gpu=gpu_machine(n_gpus, nvlink=nvlink),
        cuda_visible_devices=None,
        cuda_device_order=None,
        nccl_env=(),
        saved_workarounds=(),
        workaround_store="/home/u/.config/isaaclab-mgpu/workarounds.json",
        machine_key=f"node01|{n_gpus}x|H100",
        limits=Limits(
            shm_bytes=32 * GIB,
            memlock_soft=-1,
            memlock_hard=-1,
            nofile_soft=65536,
            nofile_hard=65536,
            cpu_count=64,
            omp_num_threads=None,
        ),
        slurm=(),
        net=NetFacts("node01", "10.0.0.1", None, ()),
        plan=plan(nproc if nproc is not None else n_gpus),
    )
    return replace(base, **kw)


def held(g: Gpu, *procs: GpuProcess, used: int | None = None) -> Gpu:
    return replace(g, processes=procs, memory_used_mib=used if used is not None else 4000)
