"""The launcher's one reader of the NVIDIA driver (NVML): which GPUs this machine has, and more.

:func:`list_gpus` gives resolve the (model, UUID) of every GPU; :func:`gpu_facts` gives
``check-env`` the driver, every GPU with its memory and the processes holding it, and the topology
between GPUs (``nvidia-smi topo -m`` when NVML cannot say); :func:`gpu_state` gives the straggler
line one GPU's clocks, throttle reasons, temperature and PCIe link. Each opens its own session.
The first two ignore ``CUDA_VISIBLE_DEVICES``: NVML lists every GPU, in PCI bus order as
``nvidia-smi`` does. ``pynvml`` (nvidia-ml-py) is imported only when asked; without it or without a
driver the answer says so (None, or a :class:`GpuFacts` with ``nvml=False`` and the reason), never
an error.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from isaaclab_mgpu.contract import env


class NvmlUnavailable(Exception):
    """NVML cannot answer here; the message says why (no nvidia-ml-py, no driver, a driver error)."""


@contextlib.contextmanager
def nvml() -> Iterator[Any]:
    """The initialised ``pynvml`` module for one block of queries, shut down after it."""
    try:
        import pynvml
    except ImportError:
        raise NvmlUnavailable("nvidia-ml-py is not installed") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NvmlUnavailable(f"NVML: {exc}") from None
    try:
        yield pynvml
    except pynvml.NVMLError as exc:
        raise NvmlUnavailable(f"NVML: {exc}") from None
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def text(value: object) -> str:
    """An NVML string as ``str`` (older nvidia-ml-py releases return bytes)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def list_gpus() -> tuple[tuple[str, str], ...] | None:
    """(model name, UUID) of every GPU NVML sees, in index order; None without NVML or a driver."""
    try:
        with nvml() as nv:
            handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
            return tuple((text(nv.nvmlDeviceGetName(h)), text(nv.nvmlDeviceGetUUID(h))) for h in handles)
    except NvmlUnavailable:
        return None


@dataclass(frozen=True)
class GpuProcess:
    """A process holding memory on a GPU."""

    pid: int
    """Process id as NVML reports it (may belong to another PID namespace)."""

    used_mib: int | None
    """GPU memory it holds, MiB (None when the driver does not say)."""

    name: str | None = None
    """Process name, when visible from here."""

    cmdline: str | None = None
    """Command line, when visible from here."""

    user: str | None = None
    """The process's owner (user name), when visible from here."""

    mine: bool | None = None
    """Owned by the user running check-env (None: the owner is not visible from here)."""

    run_id: str | None = None
    """mgpu's run marker (``MGPU_RUN_ID``) in its environment: a process of an mgpu run."""

    orphan: bool = False
    """No launcher (mgpu, torchrun, mgpu's JAX launcher) above it any more: left over."""


@dataclass(frozen=True)
class Gpu:
    """One GPU as NVML reports it."""

    index: int
    """NVML index (PCI bus order, as nvidia-smi shows)."""

    name: str
    """Product name, e.g. ``NVIDIA H100 80GB HBM3``."""

    uuid: str
    """``GPU-…`` UUID (what CUDA_VISIBLE_DEVICES may name)."""

    memory_total_mib: int
    """Total memory, MiB."""

    memory_used_mib: int
    """Memory in use now, MiB."""

    processes: tuple[GpuProcess, ...] = ()
    """Compute processes holding memory on it."""


@dataclass(frozen=True)
class GpuLink:
    """How two GPUs reach each other."""

    a: int
    """NVML index of the first GPU."""

    b: int
    """NVML index of the second GPU."""

    nvlink: bool
    """True when they talk over NVLink (directly or through NVSwitch)."""

    path: str
    """nvidia-smi's name of the PCIe path: PIX, PXB, PHB, NODE, SYS (or NV# / SOC / unknown)."""


@dataclass(frozen=True)
class GpuFacts:
    """What the NVIDIA driver says about this machine."""

    nvml: bool
    """True when NVML could be initialised (a driver is loaded)."""

    error: str | None = None
    """Why NVML is unavailable, when it is."""

    driver_version: str | None = None
    """Driver version, e.g. ``550.54.15``."""

    cuda_driver_version: str | None = None
    """Highest CUDA version the driver supports, ``MAJOR.MINOR``."""

    gpus: tuple[Gpu, ...] = ()
    """Every GPU, visible to this process or not."""

    links: tuple[GpuLink, ...] = ()
    """One entry per GPU pair."""

    topology_source: str = "none"
    """Where ``links`` come from: ``nvml``, ``nvidia-smi`` or ``none``."""


def gpu_facts() -> GpuFacts:
    """Ask NVML about the driver, every GPU, the processes on them and their topology."""
    try:
        with nvml() as nv:
            return _nvml_facts(nv)
    except NvmlUnavailable as exc:
        return GpuFacts(nvml=False, error=str(exc))


def _nvml_facts(nv) -> GpuFacts:  # nv: the pynvml module
    driver = text(nv.nvmlSystemGetDriverVersion())
    cuda = None
    with contextlib.suppress(nv.NVMLError):
        v = int(nv.nvmlSystemGetCudaDriverVersion())
        cuda = f"{v // 1000}.{(v % 1000) // 10}"
    handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
    gpus = []
    for i, h in enumerate(handles):
        mem = nv.nvmlDeviceGetMemoryInfo(h)
        procs: list[GpuProcess] = []
        with contextlib.suppress(nv.NVMLError):
            for p in nv.nvmlDeviceGetComputeRunningProcesses(h):
                used = getattr(p, "usedGpuMemory", None)
                procs.append(_process(int(p.pid), None if used is None else int(used) // 2**20))
        gpus.append(
            Gpu(
                index=i,
                name=text(nv.nvmlDeviceGetName(h)),
                uuid=text(nv.nvmlDeviceGetUUID(h)),
                memory_total_mib=int(mem.total) // 2**20,
                memory_used_mib=int(mem.used) // 2**20,
                processes=tuple(procs),
            )
        )
    links, source = _nvml_links(nv, handles)
    if len(handles) > 1 and source == "none":
        links = smi_links()
        source = "nvidia-smi" if links else "none"
    return GpuFacts(
        nvml=True,
        driver_version=driver,
        cuda_driver_version=cuda,
        gpus=tuple(gpus),
        links=links,
        topology_source=source,
    )


_ANCESTOR = {0: "SOC", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def _nvml_links(nv, handles: list) -> tuple[tuple[GpuLink, ...], str]:
    links = []
    try:
        for a, b in itertools.combinations(range(len(handles)), 2):
            level = int(nv.nvmlDeviceGetTopologyCommonAncestor(handles[a], handles[b]))
            nvlink = False
            with contextlib.suppress(nv.NVMLError):
                status = nv.nvmlDeviceGetP2PStatus(handles[a], handles[b], nv.NVML_P2P_CAPS_INDEX_NVLINK)
                nvlink = status == nv.NVML_P2P_STATUS_OK
            links.append(GpuLink(a, b, nvlink, "NV" if nvlink else _ANCESTOR.get(level, "unknown")))
    except nv.NVMLError:
        return (), "none"
    return tuple(links), "nvml"


def smi_links() -> tuple[GpuLink, ...]:
    """GPU pairs from ``nvidia-smi topo -m`` (when NVML cannot say); none without nvidia-smi."""
    import subprocess

    try:
        out = subprocess.run(
            ["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=5, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return parse_topo_matrix(out)


def parse_topo_matrix(text: str) -> tuple[GpuLink, ...]:
    """Parse the GPU rows of ``nvidia-smi topo -m`` into one :class:`GpuLink` per pair."""
    rows = {}
    for line in text.splitlines():
        cells = re.sub(r"\x1b\[[0-9;]*m", "", line).split()
        if cells and re.fullmatch(r"GPU\d+", cells[0]):
            rows[int(cells[0][3:])] = cells[1:]
    links = []
    for a, cells in sorted(rows.items()):
        for b in range(a + 1, len(rows)):
            path = cells[b] if b < len(cells) else "unknown"
            links.append(GpuLink(a, b, path.startswith("NV"), path))
    return tuple(links)


#: Programs and ``-m`` modules of a launcher above a rank: a rank with none of them above it is
#: left over. Matched as the program or module a command runs, never as a substring: a checkout
#: folder named ``isaaclab-mgpu`` or a uv installed under one is in many command lines.
_LAUNCHER_PROGRAMS = ("mgpu", "torchrun")
_LAUNCHER_MODULES = ("isaaclab_mgpu", "isaaclab_mgpu.cli", "torch.distributed.run", "isaaclab_mgpu.jaxrun")


def is_launcher(argv: list[str]) -> bool:
    """True when ``argv`` runs mgpu, torchrun or mgpu's JAX launcher (as a program, script or module)."""
    if not argv:
        return False
    if os.path.basename(argv[0]) in _LAUNCHER_PROGRAMS:
        return True
    words = iter(enumerate(argv[1:], start=1))
    for i, word in words:
        if word in ("-W", "-X"):  # the interpreter's options that take a value
            next(words, None)
            continue
        if word == "-m":
            return i + 1 < len(argv) and argv[i + 1] in _LAUNCHER_MODULES
        if word.startswith("-m"):
            return word[2:] in _LAUNCHER_MODULES
        if word in ("-c", "-"):
            return False
        if not word.startswith("-"):  # the interpreter's script: a console script such as .venv/bin/mgpu
            return os.path.basename(word) in _LAUNCHER_PROGRAMS
    return False


def _process(pid: int, used_mib: int | None) -> GpuProcess:
    import psutil

    found: dict = {}
    with contextlib.suppress(Exception):
        proc = psutil.Process(pid)
        found["name"] = proc.name()
        found["cmdline"] = " ".join(proc.cmdline())[:300]
        found["user"] = proc.username()
        found["mine"] = proc.uids().real == os.getuid()
        with contextlib.suppress(psutil.Error):
            found["run_id"] = proc.environ().get(env.RUN_ID)  # readable for one's own processes
        found["orphan"] = not any(is_launcher(a.cmdline()) for a in proc.parents() if a.pid != 1)
    return GpuProcess(pid, used_mib, **found)


#: NVML's clock-event (throttle) reason bits (``nvmlClocksEventReason*``), by their meaning.
THROTTLE_REASONS = (
    (0x1, "idle"),
    (0x2, "application clocks setting"),
    (0x4, "software power cap"),
    (0x8, "hardware slowdown"),
    (0x10, "sync boost"),
    (0x20, "software thermal slowdown"),
    (0x40, "hardware thermal slowdown"),
    (0x80, "hardware power brake"),
    (0x100, "display clock setting"),
)


def gpu_state(device: str, visible: str | None) -> str | None:
    """One line on GPU ``cuda:N`` of ``visible`` (CUDA_VISIBLE_DEVICES): clocks, throttle, heat, PCIe."""
    # None without NVML, or when the device matches none NVML lists (a MIG slice).
    if not device.startswith("cuda:"):
        return None
    local = int(device.split(":", 1)[1])
    entries = [e.strip() for e in visible.split(",")] if visible else None
    entry = str(local) if entries is None else (entries[local] if local < len(entries) else "")
    try:
        with nvml() as nv:
            if entry.isdigit():
                handle = nv.nvmlDeviceGetHandleByIndex(int(entry))
            elif entry.startswith("GPU-"):
                handle = nv.nvmlDeviceGetHandleByUUID(entry)
            else:
                return None
            return _state_line(nv, handle)
    except NvmlUnavailable:
        return None


def _state_line(nv, handle) -> str:  # nv: the pynvml module
    parts = [text(nv.nvmlDeviceGetName(handle))]
    with contextlib.suppress(nv.NVMLError):
        sm = nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM)
        top = nv.nvmlDeviceGetMaxClockInfo(handle, nv.NVML_CLOCK_SM)
        parts.append(f"SM clock {sm}/{top} MHz")
    with contextlib.suppress(nv.NVMLError, AttributeError):
        reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
        reasons = reasons or nv.nvmlDeviceGetCurrentClocksThrottleReasons
        mask = int(reasons(handle))
        names = ", ".join(name for bit, name in THROTTLE_REASONS if mask & bit)
        parts.append(f"throttle: {names or 'none'}")
    with contextlib.suppress(nv.NVMLError):
        parts.append(f"{nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU)} °C")
    with contextlib.suppress(nv.NVMLError):
        gen, width = nv.nvmlDeviceGetCurrPcieLinkGeneration(handle), nv.nvmlDeviceGetCurrPcieLinkWidth(handle)
        top_gen, top_width = (
            nv.nvmlDeviceGetMaxPcieLinkGeneration(handle),
            nv.nvmlDeviceGetMaxPcieLinkWidth(handle),
        )
        parts.append(f"PCIe gen {gen} x{width} (max gen {top_gen} x{top_width})")
    return ", ".join(parts)
