"""Collectives among the CPU ranks of one node through shared memory, for the small and frequent ones.

Why: on CPU ranks every PPO mini-batch of rsl-rl and skrl ends in collectives, 45-60 per iteration
at our defaults. Through gloo each costs 0.3-0.8 ms on a 2-core VM even for ten floats: hand-offs
to a worker thread, loopback TCP, the peer's event-loop thread, and back, each waking an idle CPU.
Two ranks spent more time in those hand-offs than the second rank's work saved
(``benchmarks/stages.py``).

:class:`LocalChannel` is one file in ``/dev/shm`` mapped by every rank: a 64-byte header line per
rank holding its collective counter, and two banks of one slot per rank (collective ``n`` uses bank
``n % 2``). A collective copies this rank's array into its slot, bumps its counter, wakes waiters
with ``FUTEX_WAKE`` and waits with ``FUTEX_WAIT`` (no spinning) until every peer's counter has
reached ``n``, then reads the slots. Two banks are enough: a peer can only write bank ``n % 2``
again at collective ``n + 2``, which it cannot enter before this rank has posted ``n + 1``, after
it finished reading ``n``. Every rank sums in rank order, so results are identical on every rank.

Where it applies (:func:`usable`): several ranks, all on this node, on CPU, on x86-64 Linux (the
counters rely on x86's ordering of stores and loads), with room in ``/dev/shm``, unless
``MGPU_CPU_COLLECTIVES=gloo``. :func:`open_channel` opens it once per process (rank 0 creates the
file, the others map it, rank 0 removes its name once all have it); :func:`current` reaches it.
Arrays larger than a slot (:data:`SLOT_BYTES`) are left to the caller's fallback. A wait past the
timeout (the process group's) raises :class:`TimeoutError` naming the rank that did not arrive.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import platform
import secrets
import time
from collections.abc import Callable, Mapping

import numpy as np

from isaaclab_mgpu.contract import env

#: Bytes of one rank's slot: the largest array one collective carries here (larger ones use gloo).
SLOT_BYTES = 1 << 20
#: What rank 0 says when the channel is in use.
NOTE = "small collectives go through shared memory (all ranks are CPU ranks on this node)"
#: Where the channel's file lives while the ranks map it.
SHM_DIR = "/dev/shm"
_LINE = 64
_SYS_FUTEX = 202  # x86-64 syscall number
_FUTEX_WAIT, _FUTEX_WAKE = 0, 1
_WAIT_S = 1.0  # each FUTEX_WAIT returns at least this often, to check the deadline


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def usable(world_size: int, local_world_size: int | None, cpu: bool, environ: Mapping[str, str]) -> bool:
    """True when this run's collectives may go through a :class:`LocalChannel`."""
    return (
        world_size > 1
        and local_world_size == world_size
        and cpu
        and environ.get(env.CPU_COLLECTIVES, "") != "gloo"
        and platform.system() == "Linux"
        and platform.machine() in ("x86_64", "AMD64")
        and os.path.isdir(SHM_DIR)
    )


def channel_bytes(world_size: int, slot_bytes: int = SLOT_BYTES) -> int:
    """Size of the shared file for ``world_size`` ranks."""
    return _LINE * world_size + 2 * world_size * slot_bytes


class LocalChannel:
    """One rank's end of the shared-memory channel (see the module docstring)."""

    def __init__(self, path: str, rank: int, world_size: int, *, slot_bytes: int = SLOT_BYTES,
                 timeout_s: float = 1800.0) -> None:  # fmt: skip
        self.rank, self.world_size, self.slot_bytes, self.timeout_s = rank, world_size, slot_bytes, timeout_s
        size = channel_bytes(world_size, slot_bytes)
        fd = os.open(path, os.O_RDWR)
        try:
            if os.fstat(fd).st_size != size:
                raise OSError(f"{path}: {os.fstat(fd).st_size} bytes, expected {size}")
            self._map = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        header = np.frombuffer(self._map, dtype=np.int32, count=_LINE // 4 * world_size)
        self._counters = header.reshape(world_size, _LINE // 4)[:, 0]
        self._banks = np.frombuffer(self._map, dtype=np.uint8, offset=_LINE * world_size).reshape(
            2, world_size, slot_bytes
        )
        base = ctypes.addressof(ctypes.c_char.from_buffer(self._map))
        self._addresses = [ctypes.c_void_p(base + _LINE * r) for r in range(world_size)]
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._step = _Timespec(int(_WAIT_S), int((_WAIT_S % 1) * 1e9))
        self._count = int(self._counters[rank])

    def fits(self, array: np.ndarray) -> bool:
        """True when ``array`` fits one slot."""
        return array.nbytes <= self.slot_bytes

    def all_reduce_(self, array: np.ndarray) -> None:
        """Sum ``array`` (contiguous) over the ranks, in place; every rank gets the same bits."""
        flat = array.reshape(-1)
        slots = self._exchange(flat, write=True)
        np.copyto(flat, slots[0])
        for r in range(1, self.world_size):
            np.add(flat, slots[r], out=flat)

    def broadcast_(self, array: np.ndarray, src: int) -> None:
        """Overwrite ``array`` (contiguous) with rank ``src``'s, in place."""
        flat = array.reshape(-1)
        slots = self._exchange(flat, write=self.rank == src)
        if self.rank != src:
            np.copyto(flat, slots[src])

    def all_gather(self, array: np.ndarray) -> np.ndarray:
        """Every rank's ``array`` stacked in rank order, shape ``(world_size, *array.shape)``."""
        array = np.ascontiguousarray(array)
        slots = self._exchange(array.reshape(-1), write=True)
        return slots.copy().reshape(self.world_size, *array.shape)

    def close(self) -> None:
        """Unmap the channel (after the last collective)."""
        self._counters = self._banks = None  # type: ignore[assignment]
        with contextlib.suppress(BufferError):  # a caller still holds a view: it goes with the process
            self._map.close()

    def _exchange(self, flat: np.ndarray, *, write: bool) -> np.ndarray:
        if flat.nbytes > self.slot_bytes:
            raise ValueError(f"{flat.nbytes} bytes do not fit a {self.slot_bytes}-byte slot")
        self._count = (self._count + 1) & 0x7FFFFFFF
        bank = self._banks[self._count & 1]
        slots = bank[:, : flat.nbytes].view(flat.dtype)
        if write:
            slots[self.rank] = flat
        # Data first, then the counter: x86 keeps stores in order, so a peer that sees the new
        # counter sees the data.
        self._counters[self.rank] = self._count
        self._futex(self.rank, _FUTEX_WAKE, 0x7FFFFFFF, None)
        self._wait_all(self._count)
        return slots

    def _wait_all(self, count: int) -> None:
        deadline: float | None = None
        for r in range(self.world_size):
            while True:
                seen = int(self._counters[r])
                if (seen - count) & 0x7FFFFFFF < 0x40000000:  # reached, modulo the counter's wrap
                    break
                now = time.monotonic()
                deadline = deadline or now + self.timeout_s
                if now > deadline:
                    raise TimeoutError(
                        f"rank {r} did not reach collective {count} within {self.timeout_s:.0f} s "
                        f"(shared-memory channel of rank {self.rank})"
                    )
                # Returns at once if the counter moved since we read it (no lost wake-up).
                self._futex(r, _FUTEX_WAIT, seen, ctypes.byref(self._step))

    def _futex(self, r: int, op: int, value: int, timeout: object) -> None:
        self._libc.syscall(_SYS_FUTEX, self._addresses[r], op, value, timeout, None, 0)


_current: LocalChannel | None = None


def current() -> LocalChannel | None:
    """This process's open channel, if any."""
    return _current


def open_channel(
    rank: int,
    world_size: int,
    gather: Callable[[np.ndarray], np.ndarray],
    *,
    timeout_s: float = 1800.0,
) -> LocalChannel | None:
    """Open the run's channel on every rank together (a collective over ``gather``); None if one can't."""
    # gather (the run's all-gather of a small uint32 vector) carries rank 0's random name, then
    # every rank's verdict, so all ranks agree on using the channel.
    global _current
    token = secrets.randbits(63) if rank == 0 else 0
    path = os.path.join(SHM_DIR, f"isaaclab-mgpu-{token:016x}")
    ok = _create(path, channel_bytes(world_size)) if rank == 0 else 1
    words = np.array([token >> 32, token & 0xFFFFFFFF, ok], dtype=np.uint32)
    first = gather(words)[0]
    token, ok = (int(first[0]) << 32) | int(first[1]), int(first[2])
    path = os.path.join(SHM_DIR, f"isaaclab-mgpu-{token:016x}")
    channel: LocalChannel | None = None
    if ok:
        with contextlib.suppress(OSError):
            channel = LocalChannel(path, rank, world_size, timeout_s=timeout_s)
    verdicts = gather(np.array([1 if channel is not None else 0], dtype=np.uint32))
    if rank == 0 and ok:
        os.unlink(path)  # every rank has mapped it (or given up): the name is no longer needed
    if channel is not None and int(verdicts.min()) == 0:
        channel.close()
        channel = None
    _current = channel
    return channel


def close_channel() -> None:
    """Close this process's channel (idempotent)."""
    global _current
    if _current is not None:
        _current.close()
        _current = None


def _create(path: str, size: int) -> int:
    """Create and allocate the file (1), or 0 when ``/dev/shm`` has no room."""
    # Allocated up front: writing to unbacked tmpfs pages would kill the rank with SIGBUS.
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return 0
    try:
        os.posix_fallocate(fd, 0, size)
        return 1
    except OSError:
        os.unlink(path)
        return 0
    finally:
        os.close(fd)
