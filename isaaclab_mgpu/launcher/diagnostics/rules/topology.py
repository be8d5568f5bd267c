"""Topology rule: NVLink or PCIe between the GPUs in use."""

from __future__ import annotations

from isaaclab_mgpu.launcher.diagnostics.facts import Facts
from isaaclab_mgpu.launcher.diagnostics.rules.base import PASS, WARN, Finding, finding, used_gpus, uses_gpus

_P2P_FIXES = ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL")


def topology_rule(f: Facts) -> list[Finding]:
    """NVLink or PCIe between the GPUs in use; world size 2 over PCIe is where known hangs occur."""
    used = used_gpus(f)
    if len(used) < 2:
        why = "not used (--device cpu)" if not uses_gpus(f) else f"{len(used)} GPU in use on this node"
        return [finding("topology", "gpu_links", PASS, why)]
    idx = {g.index for g in used}
    links = [x for x in f.gpu.links if x.a in idx and x.b in idx]
    if not links:
        observed = f"unknown for {len(used)} GPUs (NVML topology unavailable, no nvidia-smi)"
        fix = "run nvidia-smi topo -m to see NVLink/PCIe paths; mgpu probe-nccl measures them"
        return [finding("topology", "gpu_links", WARN, observed, fix)]
    nv = [x for x in links if x.nvlink]
    paths = sorted({x.path for x in links if not x.nvlink})
    if len(nv) == len(links):
        return [finding("topology", "gpu_links", PASS, f"NVLink between all {len(used)} GPUs")]
    saved = [k for k, _ in f.saved_workarounds if k in _P2P_FIXES]
    if nv:
        pairs = ", ".join(f"{x.a}-{x.b}" for x in nv)
        observed = f"NVLink only between {pairs}; other pairs over PCIe ({', '.join(paths)})"
        fix = "pick GPUs joined by NVLink with CUDA_VISIBLE_DEVICES; all-reduce runs at the slowest link"
        return [finding("topology", "gpu_links", WARN, observed, fix)]
    observed = f"PCIe only, no NVLink between {len(used)} GPUs (paths {', '.join(paths)})"
    if len(used) == 2 and saved:
        return [finding("topology", "gpu_links", PASS, observed + f"; saved workaround {saved[0]} applies")]
    if len(used) == 2:
        observed += " — world size 2 over PCIe without NVLink is where NCCL hangs are known"
        fix = (
            "if it hangs: mgpu probe-nccl, then NCCL_P2P_DISABLE=1 (or NCCL_P2P_LEVEL=LOC); "
            "keep what works with --save-workaround"
        )
        return [finding("topology", "gpu_links", WARN, observed, fix)]
    cross = " crossing CPU sockets (SYS)" if "SYS" in paths else ""
    fix = "expect all-reduce at PCIe speed (≈63 GB/s Gen5 per direction); measure with mgpu probe-nccl"
    if cross:
        fix += "; on timeouts try NCCL_CUMEM_HOST_ENABLE=0"
    return [finding("topology", "gpu_links", WARN, observed + cross, fix)]


RULES = (topology_rule,)
