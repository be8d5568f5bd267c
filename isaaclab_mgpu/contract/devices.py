"""The one reader of a GPU device list, with CUDA's rules for ``CUDA_VISIBLE_DEVICES``.

The launcher reads device lists in three places: ``CUDA_VISIBLE_DEVICES`` before a launch
(resolve) and in ``check-env`` (diagnostics), and ``--gpu_ids``, written in the same notation. All
of them read it here, so a list means one thing everywhere: what CUDA makes of it, as torch's own
reader (``torch.cuda._parse_visible_devices``) does:

- entries are comma-separated GPU indices (``0,2``; ``01`` is 1) or UUIDs: ``GPU-…`` (a unique
  prefix is enough) or ``MIG-…``; white space around an entry does not count;
- CUDA reads the list up to its first invalid entry and ignores the rest: a negative index
  (``-1``, the usual way to hide every GPU), an index or ``GPU-`` UUID this machine does not have
  (known only when its GPUs are), or anything else (``abc``, an empty entry in ``0,,1``);
- an empty value means no GPU (unset means every GPU, which the caller knows);
- a GPU listed twice, by index or UUID, leaves no GPU visible at all.

:func:`parse_device_list` returns what was read and where and why reading stopped, with the
problem in words; each caller decides what the problem means for it (resolve refuses the launch,
``check-env`` reports a finding). Standard library only: both sides of a launch may import it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

#: A GPU or MIG instance UUID (or a unique prefix) as CUDA_VISIBLE_DEVICES accepts it.
GPU_UUID = re.compile(r"^(GPU|MIG)-[0-9A-Za-z][0-9A-Za-z/-]*$")

#: Why reading stopped (:attr:`DeviceList.reason`).
NEGATIVE, MALFORMED, OUT_OF_RANGE = "negative", "malformed", "out of range"
UNKNOWN, AMBIGUOUS, REPEATED = "unknown", "ambiguous", "repeated"


@dataclass(frozen=True)
class DeviceList:
    """A device list as CUDA reads it: the entries before the first invalid one, and why it stopped."""

    value: str
    """The list as written."""

    entries: tuple[str, ...]
    """The entries read, in order: indices normalised (``01`` → ``1``), UUIDs as written."""

    stop: str | None = None
    """The entry at which reading stopped (stripped), or None when the whole list was read."""

    reason: str | None = None
    """Why it stopped (:data:`NEGATIVE`, :data:`REPEATED`, …); None when the whole list was read."""

    hidden: tuple[str, ...] = ()
    """The entries after :attr:`stop`, which CUDA ignores."""

    problem: str | None = None
    """What is wrong, in words (``0 is listed twice``); None when fine or a negative index ends it."""

    fix: str | None = None
    """One line saying what to do about :attr:`problem`."""

    @property
    def visible(self) -> tuple[str, ...]:
        """The GPUs CUDA would see: :attr:`entries`, or none when a GPU is listed twice."""
        return () if self.reason == REPEATED else self.entries

    @property
    def valid(self) -> bool:
        """True when every entry read is a GPU of this machine, once (a negative index may end it)."""
        return self.problem is None


def index_entry(item: str) -> str | None:
    """``item`` as a normalised GPU index (``01`` → ``1``), or None when it is not one."""
    # ASCII only: int() also reads full-width digits, which CUDA does not.
    return str(int(item)) if item.isascii() and item.isdigit() else None


def identity(entry: str, uuids: Sequence[str] | None) -> str | None:
    """One name per physical GPU: its full UUID among ``uuids`` (None: no one GPU), else ``entry``."""
    # A MIG- instance is not in NVML's device list: it names itself.
    if uuids is None:
        return entry
    if entry.isdigit():
        return uuids[int(entry)] if int(entry) < len(uuids) else None
    if entry.startswith("MIG-"):
        return entry
    hits = [u for u in uuids if u.startswith(entry)]
    return hits[0] if len(hits) == 1 else None


def parse_device_list(
    value: str, *, uuids: Sequence[str] | None = None, count: int | None = None
) -> DeviceList:
    """Read ``value`` as CUDA reads ``CUDA_VISIBLE_DEVICES`` with these GPUs (NVML's UUIDs, or a count)."""
    count = len(uuids) if count is None and uuids is not None else count
    items = [raw.strip() for raw in value.split(",")] if value.strip() else []
    entries: list[str] = []
    seen: list[str] = []
    for i, item in enumerate(items):
        entry = index_entry(item) or item
        found = _invalid(item, uuids, count)
        if found is None and (identity(entry, uuids) or entry) in seen:
            found = (REPEATED, f"{item} is listed twice", "list each GPU once")
        if found is not None:
            reason, problem, fix = found
            return DeviceList(value, tuple(entries), item, reason, tuple(items[i + 1 :]), problem, fix)
        seen.append(identity(entry, uuids) or entry)
        entries.append(entry)
    return DeviceList(value, tuple(entries))


def _invalid(
    item: str, uuids: Sequence[str] | None, count: int | None
) -> tuple[str, str | None, str | None] | None:
    """(reason, problem, fix) when CUDA stops reading at ``item``, else None."""
    if re.fullmatch(r"-\d+", item, re.ASCII):
        return NEGATIVE, None, None
    if index_entry(item) is not None:
        if count is not None and int(item) >= count:
            if not count:
                return OUT_OF_RANGE, f"index {item} is out of range (no GPU here)", "unset the variable"
            return (
                OUT_OF_RANGE,
                f"index {item} is out of range (GPUs 0..{count - 1})",
                f"use indices 0..{count - 1}",
            )
        return None
    if not GPU_UUID.match(item):
        return MALFORMED, f"{item!r} is neither a GPU index nor a GPU-/MIG- UUID", "fix or unset the variable"
    if item.startswith("GPU-") and uuids is not None:
        hits = sum(u.startswith(item) for u in uuids)
        if hits == 0:
            return UNKNOWN, f"{item} is not a GPU of this machine", "use a UUID from nvidia-smi -L"
        if hits > 1:
            return AMBIGUOUS, f"{item} matches several GPUs", "give the full UUID"
    return None
