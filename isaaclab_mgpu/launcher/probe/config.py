"""What a probe run was asked to do: parsed, validated, frozen. Pure: no I/O, no torch.

``--sizes`` takes a range ``LO:HI`` (doubling steps, as nccl-tests' ``-b LO -e HI -f 2``), a range
with its own factor ``LO:HI:F``, or a comma list; each size is a byte count with an optional
binary unit (``8``, ``4K``, ``64M``, ``1G``; K = 1024). ``--world-sizes`` is a comma list.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from isaaclab_mgpu.contract.errors import UsageError
from isaaclab_mgpu.contract.probe_channel import ELEMENT_BYTES, element_count
from isaaclab_mgpu.launcher.options import at_least, check_options, option, to_argv

#: Default message sizes: nccl-tests' sweep on GPUs, a shorter one for gloo on CPU ranks.
DEFAULT_SIZES_GPU = "8:64M"
DEFAULT_SIZES_CPU = "8:1M"
DEFAULT_ITERS = 20
DEFAULT_WARMUP = 5
DEFAULT_TIMEOUT = 60.0
#: Largest message the probe accepts (one buffer per rank, two for out-of-place).
MAX_SIZE = 8 << 30
BACKENDS = ("nccl", "gloo")
PROBE = "Probe options"

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20}
_UNITS |= {"MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}
_SIZE = re.compile(r"^\s*(\d+)\s*([A-Za-z]*)\s*$")


@dataclass(frozen=True)
class ProbeOptions:
    """A validated probe request (the launch options aside: a LaunchSpec); each option's help documents it."""

    world_size: int | None = option(help="Probe one world size.", panel=PROBE)
    world_sizes: tuple[int, ...] | None = option(
        help="World sizes to sweep, e.g. 1,2,4 (default: 1, 2, 4, … all GPUs).", panel=PROBE,
        parse=lambda text, _: parse_world_sizes(text),
    )  # fmt: skip
    backend: str | None = option(
        help="nccl (default on GPUs) or gloo (default with --device cpu).", panel=PROBE, choices=BACKENDS
    )
    sizes: tuple[int, ...] | None = option(
        help="Message sizes: LO:HI (×2 steps) or A,B,C (default 8:64M; 8:1M on CPU).", panel=PROBE,
        parse=lambda text, _: parse_sizes(text),
    )  # fmt: skip
    iters: int = option(
        DEFAULT_ITERS,
        "Timed all-reduces per size and mode.",
        panel=PROBE,
        check=at_least(1, "must be at least 1"),
    )
    warmup: int = option(
        DEFAULT_WARMUP,
        "Untimed all-reduces before them.",
        panel=PROBE,
        check=at_least(0, "must be 0 or more"),
    )
    timeout: float = option(DEFAULT_TIMEOUT, "Seconds per launch before it counts as a hang.", panel=PROBE)
    pairs: bool = option(False, "Also all-reduce between every pair of GPUs.", panel=PROBE)
    try_workarounds: bool = option(
        False, "On a failure, try each documented NCCL variable and confirm fixes.", panel=PROBE
    )
    save_workaround: bool = option(
        False, "Store a confirmed fix for this machine (train applies it).", panel=PROBE
    )

    saved_workarounds: bool = True
    """Apply this machine's saved workarounds to every launch (off: ``--no_saved_workarounds``)."""

    def __post_init__(self) -> None:
        check_options(self)
        if self.world_size is not None:  # one world size: the sweep of just it
            if self.world_sizes is not None and self.world_sizes != (self.world_size,):
                raise UsageError("--world-size and --world-sizes both given; use one")
            if self.world_size < 1:
                raise UsageError(f"--world-size {self.world_size} must be at least 1")
            object.__setattr__(self, "world_sizes", (self.world_size,))
        if self.world_sizes is not None and (not self.world_sizes or min(self.world_sizes) < 1):
            raise UsageError("--world-sizes must list positive integers, e.g. 1,2,4")
        if self.save_workaround:
            object.__setattr__(self, "try_workarounds", True)
        if not self.timeout > 0:
            raise UsageError(f"--timeout {self.timeout} must be a positive number of seconds")

    def argv(self) -> list[str]:
        """These options as ``probe-nccl`` reads them back (those not at their default), for a job file."""
        implied = {"--try_workarounds"} if self.save_workaround else set()  # --save_workaround's
        out = [a for a in to_argv(dataclasses.replace(self, world_size=None)) if a not in implied]
        return out + ([] if self.saved_workarounds else ["--no_saved_workarounds"])

    def backend_for(self, device: str) -> str:
        """The backend with the default applied for ``device``; raise on nccl without GPUs."""
        backend = self.backend or ("gloo" if device == "cpu" else "nccl")
        if backend == "nccl" and device == "cpu":
            raise UsageError("--backend nccl needs GPUs; use --backend gloo with --device cpu")
        return backend

    def sizes_for(self, device: str) -> tuple[int, ...]:
        """The message sizes with the default applied for ``device``, in whole float32 elements."""
        sizes = self.sizes or parse_sizes(DEFAULT_SIZES_CPU if device == "cpu" else DEFAULT_SIZES_GPU)
        return tuple(sorted({element_count(s) * ELEMENT_BYTES for s in sizes}))


def parse_size(text: str) -> int:
    """Parse one byte count such as ``8``, ``4K``, ``64M``, ``1GiB``."""
    m = _SIZE.match(text)
    unit = m.group(2).upper() if m else ""
    if not m or unit not in _UNITS:
        raise UsageError(f"--sizes {text!r} is not a size; use bytes with an optional unit, e.g. 8, 4K, 64M")
    value = int(m.group(1)) * _UNITS[unit]
    if not ELEMENT_BYTES <= value <= MAX_SIZE:
        raise UsageError(f"--sizes {text!r} is out of range; sizes run from 4 bytes to 8G")
    return value


def parse_sizes(text: str) -> tuple[int, ...]:
    """Parse ``LO:HI`` (×2 steps), ``LO:HI:F`` or ``A,B,C`` into byte counts, ascending."""
    if ":" in text:
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise UsageError(f"--sizes {text!r} is malformed; use LO:HI, LO:HI:FACTOR or a list A,B,C")
        lo, hi = parse_size(parts[0]), parse_size(parts[1])
        factor = _factor(parts[2], text) if len(parts) == 3 else 2
        if lo > hi:
            raise UsageError(f"--sizes {text!r}: the first size is larger than the last; swap them")
        sizes = [lo]
        while sizes[-1] * factor <= hi:
            sizes.append(sizes[-1] * factor)
        return tuple(sizes)
    sizes = sorted({parse_size(part) for part in text.split(",") if part.strip()})
    if not sizes:
        raise UsageError("--sizes is empty; give e.g. 8:64M or 1K,1M")
    return tuple(sizes)


def _factor(text: str, whole: str) -> int:
    if not text.strip().isdigit() or int(text) < 2:
        raise UsageError(f"--sizes {whole!r}: the step factor must be an integer of 2 or more")
    return int(text)


def parse_world_sizes(text: str) -> tuple[int, ...]:
    """Parse ``1,2,4`` into world sizes, in the given order without repeats."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) < 1:
            raise UsageError(f"--world-sizes {text!r}: {part!r} is not a positive integer; use e.g. 1,2,4")
        out.append(int(part))
    return tuple(dict.fromkeys(out))


def default_world_sizes(devices: int, nnodes: int = 1, *, cpu: bool = False) -> tuple[int, ...]:
    """Per node 1, 2, then powers of two up to ``devices``, and ``devices`` (CPU: 1, 2); times ``nnodes``."""
    if cpu:
        sizes = [1, 2]
    else:
        sizes = [1 << k for k in range(max(1, devices.bit_length()))]
        if devices > 1 and devices not in sizes:
            sizes.append(devices)
    return tuple(n * nnodes for n in sizes)
