"""gloo's small collectives on one node's CPU ranks, moved to shared memory (why: :mod:`..localcomm`).

``torch.distributed.all_reduce`` and ``broadcast`` are what rsl-rl 5.5's PPO (``PPO.update``'s KL
all-reduce and learning-rate broadcast, ``PPO.broadcast_parameters``,
``rsl_rl.utils.reduce_gradients_in_buckets``) and skrl 2.1 torch (``Model.reduce_parameters``, the
KL all-reduce) call, synchronously, on the default group. :func:`install` replaces the two in
``torch.distributed`` by versions that carry a call through the process's
:class:`~isaaclab_mgpu.rank.localcomm.LocalChannel` when the channel does it exactly the same: the
default group, ``async_op=False``, ``SUM`` (all-reduce), a contiguous CPU tensor of a plain numeric
dtype that fits a slot. Any other call goes to gloo unchanged. Every rank decides alike (only the
call's arguments count, and they agree across ranks). :func:`uninstall` restores the originals.
"""

from __future__ import annotations

from typing import Any

from isaaclab_mgpu.rank.localcomm import LocalChannel

_originals: dict[str, Any] = {}


def install(channel: LocalChannel) -> None:
    """Route eligible default-group all-reduces and broadcasts through ``channel`` (idempotent)."""
    import torch
    import torch.distributed as dist

    if _originals:
        return
    plain = {torch.float32, torch.float64, torch.int32, torch.int64, torch.uint8, torch.int8, torch.int16}
    original_all_reduce, original_broadcast = dist.all_reduce, dist.broadcast
    sum_op = dist.ReduceOp.SUM

    def eligible(tensor: Any, group: Any, async_op: bool) -> bool:
        return (
            (group is None or group is dist.group.WORLD)
            and not async_op
            and isinstance(tensor, torch.Tensor)
            and tensor.device.type == "cpu"
            and tensor.dtype in plain
            and tensor.is_contiguous()
            and not tensor.requires_grad
            and tensor.numel() * tensor.element_size() <= channel.slot_bytes
        )

    def all_reduce(tensor: Any, op: Any = sum_op, group: Any = None, async_op: bool = False) -> Any:
        # torch.distributed.all_reduce, shared-memory path for the calls described above.
        if op == sum_op and eligible(tensor, group, async_op):
            channel.all_reduce_(tensor.numpy())
            return None
        return original_all_reduce(tensor, op=op, group=group, async_op=async_op)

    def broadcast(tensor: Any, src: int | None = None, group: Any = None, async_op: bool = False,
                  group_src: int | None = None) -> Any:  # fmt: skip
        # torch.distributed.broadcast, shared-memory path for the calls described above.
        if src is not None and group_src is None and eligible(tensor, group, async_op):
            channel.broadcast_(tensor.numpy(), src)
            return None
        return original_broadcast(tensor, src=src, group=group, async_op=async_op, group_src=group_src)

    _originals.update(all_reduce=original_all_reduce, broadcast=original_broadcast)
    dist.all_reduce, dist.broadcast = all_reduce, broadcast


def uninstall() -> None:
    """Put gloo's own functions back (idempotent)."""
    import torch.distributed as dist

    for name, function in _originals.items():
        setattr(dist, name, function)
    _originals.clear()


def installed() -> bool:
    """True while the shared-memory path is in place."""
    return bool(_originals)
