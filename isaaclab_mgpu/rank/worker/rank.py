"""Who this rank is, where it computes, where it writes, and how it talks to its peers.

- :func:`rank_context` reads the launcher's environment once (torchrun's ``RANK``/``LOCAL_RANK``/
  ``WORLD_SIZE``, or the ``JAX_`` ones for skrl JAX); the seed is offset by the global rank so ranks
  explore differently while starting from rank 0's parameters.
- :func:`run_dir_of` is the run folder (``MGPU_RUN_DIR``, or by hand
  :func:`isaaclab_mgpu.contract.layout.run_folder`). Rank 0 owns it; rank ``r > 0`` writes only
  inside ``rank_<r>/``.
- :class:`Comm` is the handful of collectives the worker itself needs, over torch.distributed, JAX's
  multi-process runtime, or the node's shared-memory channel (:mod:`isaaclab_mgpu.rank.localcomm`).
- :func:`init_torch_group` joins the process group and, on one node's CPU ranks, opens that channel
  with :mod:`..patches.gloo` on it (:func:`open_local_channel` for skrl JAX once JAX is up);
  :func:`leave_torch_group` / :func:`close_local_channel` undo it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from isaaclab_mgpu.contract import env, layout, progress, resume
from isaaclab_mgpu.contract.errors import UsageError
from isaaclab_mgpu.contract.worker_args import WorkerArgs
from isaaclab_mgpu.rank import localcomm
from isaaclab_mgpu.rank.patches import gloo, timing


@dataclass(frozen=True)
class RankContext:
    """This process's place in the run."""

    rank: int
    """Global rank."""

    local_rank: int
    """Rank on this node."""

    world_size: int
    """Number of ranks in the run."""

    device: str
    """Torch-style device string: ``cpu`` or ``cuda:N``."""

    seed: int
    """Seed of this rank: the base seed plus the global rank."""

    shared_memory: bool = False
    """All ranks are CPU ranks on this node and may talk through shared memory (``localcomm.usable``)."""

    @property
    def distributed(self) -> bool:
        """True when more than one rank trains."""
        return self.world_size > 1

    @property
    def is_cuda(self) -> bool:
        """True when this rank computes on a GPU."""
        return self.device.startswith("cuda")


def rank_context(args: WorkerArgs, environ: Mapping[str, str]) -> RankContext:
    """Read rank, world size and device for ``args`` from the launcher's environment; refuse a missing GPU."""
    import torch

    cuda_available = torch.cuda.is_available()
    jax = args.rl_library == "skrl" and args.ml_framework == "jax"
    if args.distributed:
        prefix = "JAX_" if jax and "JAX_WORLD_SIZE" in environ else ""
        world = int(environ.get(f"{prefix}WORLD_SIZE", "1"))
        rank = int(environ.get(f"{prefix}RANK", "0"))
        local = int(environ.get(f"{prefix}LOCAL_RANK", "0"))
    else:
        world, rank, local = 1, 0, 0
    device = args.device or ("cuda" if cuda_available else "cpu")
    if device == "cuda":
        device = f"cuda:{local}"
    if device.startswith("cuda") and not cuda_available:
        raise UsageError(f"--device {args.device or 'cuda'}: no CUDA device here; use --device cpu")
    local_world = environ.get(env.LOCAL_WORLD_SIZE)  # torchrun and our jaxrun set it
    shared = localcomm.usable(world, int(local_world) if local_world else None, device == "cpu", environ)
    return RankContext(
        rank=rank, local_rank=local, world_size=world, device=device, seed=args.seed + rank,
        shared_memory=shared,
    )  # fmt: skip


def identity(args: WorkerArgs, ctx: RankContext, environ: Mapping[str, str]) -> dict[str, Any]:
    """What rank 0's account says the attempt is (the worker's and the Isaac Lab path's alike)."""
    return {
        "attempt": resume.attempt(environ),
        "world_size": ctx.world_size,
        "backend": args.rl_library,
        "framework": args.ml_framework,
        "device": "cuda" if ctx.is_cuda else "cpu",
        "task": args.task,
        "seed": args.seed,
    }


def run_stamp(environ: Mapping[str, str]) -> str:
    """The run's timestamp: the launcher's ``MGPU_RUN_STAMP``, else now."""
    return environ.get(env.RUN_STAMP) or time.strftime(layout.STAMP_FORMAT)


def run_dir_of(args: WorkerArgs, environ: Mapping[str, str]) -> Path:
    """This run's folder: mgpu's ``MGPU_RUN_DIR``, else the one every rank names from the stamp."""
    if given := environ.get(env.RUN_DIR):
        return Path(given)
    stamp = args.run_timestamp or run_stamp(environ)
    return layout.run_folder(args.log_root, args.rl_library, args.experiment, stamp, args.run_name)


class Comm:
    """Collectives over the run's ranks; a single rank needs none."""

    def __init__(self, ctx: RankContext, kind: str) -> None:
        self.ctx = ctx
        self.kind = kind if ctx.distributed else "local"

    def gather(self, values: np.ndarray) -> np.ndarray:
        """Every rank's 1-D ``values`` (same length and dtype on all) in rank order: ``(world, n)``."""
        values = np.ascontiguousarray(values)
        if self.kind == "local":
            return values[None, :]
        t0 = time.perf_counter()  # the worker's own collective counts as waiting, as the libraries' do
        try:
            channel = localcomm.current()
            if channel is not None and channel.fits(values):
                return channel.all_gather(values)
            return _gather(self.kind, values, self.ctx.world_size)
        finally:
            progress.waited(time.perf_counter() - t0)

    def broadcast_bytes(self, data: bytes | None) -> bytes:
        """Rank 0's ``data`` on every rank (what the others pass is ignored)."""
        if self.kind == "local":
            return data or b""
        # Only rank 0's bytes count: every other rank receives into a buffer of rank 0's size.
        # (A collective whose buffers differ in shape across ranks never completes on JAX.)
        mine = (data or b"") if self.ctx.rank == 0 else b""
        size = np.array([len(mine)], dtype=np.int32 if self.kind == "jax" else np.int64)  # JAX: no int64
        n = int(self._from_rank0(size)[0])
        if n == 0:
            return b""
        buf = np.frombuffer(bytearray(mine), dtype=np.uint8) if self.ctx.rank == 0 else np.zeros(n, np.uint8)
        return self._from_rank0(buf).tobytes()

    def _from_rank0(self, values: np.ndarray) -> np.ndarray:
        """Rank 0's ``values`` on every rank, in their dtype (each passes a writable array of that shape)."""
        if self.kind == "jax":
            from jax.experimental import multihost_utils

            return np.asarray(multihost_utils.broadcast_one_to_all(values), dtype=values.dtype)
        import torch
        import torch.distributed as dist

        tensor = torch.from_numpy(values).to(self.ctx.device if self.ctx.is_cuda else "cpu")  # NCCL: GPU only
        dist.broadcast(tensor, src=0)
        return tensor.cpu().numpy()

    def any(self, flag: bool) -> bool:
        """True on every rank when ``flag`` is true on any rank."""
        return bool(self.gather(np.array([1.0 if flag else 0.0], dtype=np.float32)).max() > 0)


def gather_floats(comm: Comm, values: np.ndarray) -> np.ndarray:
    """``comm.gather`` as float64; JAX's goes as float32 (it gathers no 64-bit values by default)."""
    sent = values.astype(np.float32) if comm.kind == "jax" else values
    return np.asarray(comm.gather(sent), dtype=np.float64)


def _gather(kind: str, values: np.ndarray, world_size: int) -> np.ndarray:
    """All-gather over the run's own runtime: JAX's, or a tensor all-gather of the raw bytes (gloo/NCCL)."""
    if kind == "jax":
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(values)).reshape(world_size, -1)
    import torch
    import torch.distributed as dist

    # Bytes, not pickles: all_gather_object pickles, sizes and copies twice (1.5-7 ms per call on
    # 2 CPU ranks, against ~0.5 ms here); uint8 goes through gloo and NCCL alike.
    mine = torch.from_numpy(values.view(np.uint8).copy())
    if dist.get_backend() == "nccl":
        mine = mine.cuda()
    parts = [torch.empty_like(mine) for _ in range(world_size)]
    dist.all_gather(parts, mine)
    return np.stack([p.cpu().numpy().view(values.dtype) for p in parts])


def init_torch_group(ctx: RankContext) -> bool:
    """Join the torch.distributed group (NCCL on CUDA, gloo on CPU); True when this call created it."""
    import torch
    import torch.distributed as dist

    if ctx.is_cuda:
        torch.cuda.set_device(int(ctx.device.split(":")[1]))
    if ctx.distributed and not dist.is_initialized():
        # The second line of defence behind mgpu's stall watch: a hung collective fails after the
        # start-up bound plus a margin (shortened to the stall bound once training starts).
        timeout = progress.process_group_timeout(startup=True)
        extra = {"timeout": timeout} if timeout is not None else {}
        backend = "nccl" if ctx.is_cuda else "gloo"
        dist.init_process_group(backend=backend, rank=ctx.rank, world_size=ctx.world_size, **extra)
        channel = open_local_channel(ctx, "torch")  # None unless every rank is a CPU rank of this node
        if channel is not None:
            gloo.install(channel)
        timing.install()  # after gloo's shared-memory path, so that path is timed as well
        return True
    return False


def open_local_channel(ctx: RankContext, kind: str) -> localcomm.LocalChannel | None:
    """Open the node's shared-memory channel on every rank (collective); None where it does not apply."""
    if not ctx.shared_memory:
        return None
    if localcomm.current() is not None:
        return localcomm.current()
    timeout = progress.process_group_timeout()
    return localcomm.open_channel(
        ctx.rank,
        ctx.world_size,
        lambda v: _gather(kind, v, ctx.world_size),
        timeout_s=timeout.total_seconds() if timeout is not None else 1800.0,
    )


def close_local_channel() -> None:
    """Put gloo's collectives back and close the channel (idempotent; after the last collective)."""
    timing.uninstall()  # first: what it put back is gloo's path, which gloo.uninstall then removes
    gloo.uninstall()
    localcomm.close_channel()


def leave_torch_group() -> None:
    """Leave the process group in step with the other ranks (else a peer's gloo teardown can SIGABRT)."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()
        close_local_channel()
        dist.destroy_process_group()
