"""What the patch modules share: the :class:`Observer` they report to, a scoped attribute swap
(:func:`replaced`), a module seen through a :class:`Proxy`, :class:`StopTraining`, running normalizer
statistics over every rank (:func:`all_moments`, :func:`pool_statistics`), and durable checkpoint writes.

**Durable saves.** The libraries write their checkpoints in place (``torch.save(obj, path)``,
``open(path, "wb")``, ``pickle.dump``): a crash while saving leaves a torn newest checkpoint. While
mgpu drives a library's save (:func:`durable_saves`), the saving module's ``torch`` is
:class:`DurableTorch` and its ``open`` writes whole files, both through
:func:`isaaclab_mgpu.contract.files.atomic_open` with ``durable=True``.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import math
import os
from collections.abc import Callable, Iterator
from typing import IO, Any

from isaaclab_mgpu.contract import files


class StopTraining(Exception):
    """Leaves a library's training loop once it saved on mgpu's request (caught by the loop's patch)."""


class Observer:
    """What the observation patches report to (implemented by the rank's Bookkeeper)."""

    def run_folder(self, rank_dir: str) -> None:
        """Isaac Lab named this rank's folder."""

    def synced(self, modules: list[Any]) -> None:
        """Parameters were broadcast from rank 0; ``modules`` hold them."""

    def state(self, source: Any) -> None:
        """Where this rank's training state is (a :class:`isaaclab_mgpu.rank.drift.Source`)."""

    def resumed(self, iteration: int, checkpoint: str) -> None:
        """The library loaded ``checkpoint``; training goes on at completed iteration ``iteration``."""

    def iteration(self, steps: int, reward: float | None) -> bool:
        """One iteration ended (its env steps, mean reward); True on every rank: save and stop here."""
        return False

    def saved(self, iteration: int) -> None:
        """The library wrote a checkpoint after ``iteration`` completed iterations (rank 0)."""

    def finished(self) -> None:
        """Training returned normally (the process group still exists)."""


@contextlib.contextmanager
def replaced(target: Any, name: str, value: Any) -> Iterator[None]:
    """``target.name`` is ``value`` inside the block and what it was before after it."""
    saved = getattr(target, name)
    setattr(target, name, value)
    try:
        yield
    finally:
        setattr(target, name, saved)


def all_moments(mean: Any, var: Any, count: int | float) -> tuple[Any, Any, Any]:
    """A batch's mean, variance and size over every rank's batch (one all-reduce; as given alone)."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return mean, var, count
    mean64, var64 = mean.to(torch.float64), var.to(torch.float64)
    n = torch.full_like(mean64.reshape(-1)[:1], float(count))
    packed = moment_sums(n, mean64, var64, torch.cat)
    dist.all_reduce(packed)
    new_mean, new_var = pooled_moments(packed, mean.shape)
    return new_mean.to(mean.dtype), new_var.to(var.dtype), packed[0].item()


def moment_sums(n: Any, mean: Any, var: Any, cat: Callable[[list[Any]], Any]) -> Any:
    """``[n, n·mean, n·(var + mean²)]`` flat (numpy or torch; ``cat`` joins): what ranks sum to pool."""
    return cat([n, (n * mean).reshape(-1), (n * (var + mean**2)).reshape(-1)])


def pooled_moments(total: Any, shape: tuple[int, ...]) -> tuple[Any, Any]:
    """The mean and variance (at least 0), of ``shape``, from :func:`moment_sums` summed over ranks."""
    k = math.prod(shape)
    mean = total[1 : 1 + k] / total[0]
    return mean.reshape(shape), (total[1 + k :] / total[0] - mean**2).clip(min=0).reshape(shape)


def pool_statistics(mean: Any, var: Any) -> None:
    """Equal-count running statistics replaced in place by all ranks' pooled ones (one all-reduce)."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return
    m, v = mean.to(torch.float64).reshape(-1), var.to(torch.float64).reshape(-1)
    packed = torch.cat([m, v + m**2])
    dist.all_reduce(packed)
    packed /= dist.get_world_size()
    pooled = packed[: m.numel()]
    with torch.no_grad():
        mean.copy_(pooled.reshape(mean.shape).to(mean.dtype))
        var.copy_((packed[m.numel() :] - pooled**2).clamp_min(0).reshape(var.shape).to(var.dtype))


class Proxy:
    """A module seen through a patch: what the subclass does not define is the module's own."""

    def __init__(self, wrapped: Any) -> None:
        self._wrapped = wrapped

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wrapped, name)


class DurableTorch(Proxy):
    """``torch`` inside :func:`durable_saves`: ``save`` to a path is atomic and fsynced."""

    def save(self, obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        if not isinstance(f, (str, os.PathLike)):
            return self._wrapped.save(obj, f, *args, **kwargs)
        buffer = io.BytesIO()  # serialised first: a full disk then fails in a write naming the file
        self._wrapped.save(obj, buffer, *args, **kwargs)
        with files.atomic_open(f, "wb", durable=True) as out:
            out.write(buffer.getbuffer())
        return None


def _durable_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
    """``open`` inside :func:`durable_saves`: a whole-file ``"wb"``/``"w"`` write is atomic and fsynced."""
    if mode in ("wb", "w") and isinstance(file, (str, os.PathLike)) and not args and not kwargs:
        return files.atomic_open(file, mode, durable=True)
    return builtins.open(file, mode, *args, **kwargs)


@contextlib.contextmanager
def durable_saves(module: Any) -> Iterator[None]:
    """Inside the block, ``module``'s ``torch.save`` and ``open(path, "wb")`` write atomically and durably."""
    with contextlib.ExitStack() as stack:
        if hasattr(module, "torch"):
            stack.enter_context(replaced(module, "torch", DurableTorch(module.torch)))
        had_open = "open" in vars(module)
        saved_open: IO[Any] | Any = vars(module).get("open")
        module.open = _durable_open  # a module global shadows the builtin for that module's code
        try:
            yield
        finally:
            if had_open:
                module.open = saved_open
            else:
                del module.open
