"""Library rules: torch, the RL libraries, jax and its CUDA plugin, optional packages."""

from __future__ import annotations

from isaaclab_mgpu.launcher.diagnostics.facts import Facts
from isaaclab_mgpu.launcher.diagnostics.rules.base import (
    FAIL,
    PASS,
    WARN,
    Finding,
    finding,
    major,
    package,
    used_gpus,
    uses_gpus,
)


def _cuda_major_of_driver(f: Facts) -> int | None:
    return major(f.gpu.cuda_driver_version) if f.gpu.nvml else None


def torch_rule(f: Facts) -> list[Finding]:
    """torch installed (the torchrun path needs it), CUDA build matching the driver."""
    p = package(f, "torch")
    needed = f.plan.launcher == "torchrun" or f.plan.framework == "torch"
    if p is None:
        observed = "not installed" if needed else "not installed (not needed for skrl JAX)"
        fix = "uv pip install torch (a CUDA build for GPUs)"
        return [finding("libraries", "torch", FAIL if needed else PASS, observed, fix)]
    build = p.cuda if p.cuda not in (None, "none") else None
    observed = f"{p.version} ({'CUDA ' + build + ' build' if build else 'CPU build'})"
    driver = _cuda_major_of_driver(f)
    if uses_gpus(f) and needed and p.cuda == "none":
        fix = "install a CUDA build of torch (uv pip install torch from the matching CUDA index)"
        found = finding("libraries", "torch", FAIL, observed + ": cannot use GPUs", fix)
    elif build and driver is not None and major(build) is not None and major(build) > driver:
        observed += f": the driver supports CUDA {f.gpu.cuda_driver_version} only"
        fix = f"update the NVIDIA driver, or install torch built for CUDA {driver}.x"
        found = finding("libraries", "torch", FAIL, observed, fix)
    else:
        found = finding("libraries", "torch", PASS, observed)
    return [found, *_torch_deep(f)]


def _torch_deep(f: Facts) -> list[Finding]:
    if f.deep is None or not f.deep.torch.ran:
        return []
    t = f.deep.torch
    if t.error is not None:
        fix = "reinstall torch; a timeout points at a broken CUDA install or driver"
        return [finding("libraries", "torch_runtime", FAIL, f"importing torch failed: {t.error}", fix)]
    v = t.values
    observed = (
        f"CUDA runtime {v.get('cuda_build') or 'none'}, available={v.get('cuda_available')}, "
        f"{v.get('device_count', 0)} device(s), cuDNN {v.get('cudnn') or 'none'}, "
        f"NCCL {v.get('nccl') or 'none'} "
        f"({t.seconds:.1f} s)"
    )
    if used_gpus(f) and not v.get("cuda_available"):
        observed += ": torch cannot use the GPUs NVML shows"
        fix = "match torch's CUDA build to the driver; check CUDA_VISIBLE_DEVICES and LD_LIBRARY_PATH"
        return [finding("libraries", "torch_runtime", FAIL, observed, fix)]
    if uses_gpus(f) and v.get("cuda_available") and not v.get("nccl_available"):
        fix = "install a CUDA build of torch"
        return [finding("libraries", "torch_runtime", FAIL, observed + ": torch has no NCCL", fix)]
    return [finding("libraries", "torch_runtime", PASS, observed)]


def rl_library_rule(f: Facts) -> list[Finding]:
    """The RL library the built-in worker imports, in the supported major versions."""
    out = []
    supported = {"rsl-rl-lib": (5, "rsl_rl"), "skrl": (2, "skrl")}
    for dist, (wanted, lib) in supported.items():
        p = package(f, dist)
        needed = f.plan.builtin_worker and f.plan.library == lib
        if p is None:
            observed = "not installed" + ("" if needed else " (not used)")
            status = FAIL if needed else PASS
            out.append(finding("libraries", dist, status, observed, f"uv pip install {dist}"))
        elif major(p.version) != wanted:
            fix = f"uv pip install '{dist}>={wanted},<{wanted + 1}'"
            observed = f"{p.version} (mgpu supports {wanted}.x)"
            out.append(finding("libraries", dist, WARN if needed else PASS, observed, fix))
        else:
            out.append(finding("libraries", dist, PASS, p.version or ""))
    return out


def jax_rule(f: Facts) -> list[Finding]:
    """jax, jaxlib and the jax CUDA plugin: versions agree, CUDA major supported by the driver."""
    jax, jaxlib = package(f, "jax"), package(f, "jaxlib")
    needed = f.plan.framework == "jax"
    plugins = [p for p in f.packages if p.name.startswith("jax-cuda") and p.version]
    if jax is None:
        observed = "not installed" + ("" if needed else " (not used)")
        return [finding("libraries", "jax", FAIL if needed else PASS, observed, "uv pip install 'skrl[jax]'")]
    shown = f"jax {jax.version}, jaxlib {jaxlib.version if jaxlib else 'missing'}"
    if plugins:
        shown += ", " + ", ".join(f"{p.name} {p.version}" for p in plugins)
    driver = _cuda_major_of_driver(f)
    problems: list[tuple[str, str]] = []
    if jaxlib is None:
        problems.append(("jaxlib is missing", "uv pip install jaxlib"))
    majors = sorted({major(p.cuda) for p in plugins if p.cuda})
    if len(majors) > 1:
        what = f"plugins for CUDA {' and '.join(map(str, majors))} both installed"
        problems.append((what, "uninstall all but one"))
    for p in plugins:
        if jaxlib is not None and p.version != jaxlib.version:
            what = f"{p.name} {p.version} does not match jaxlib {jaxlib.version}"
            problems.append((what, f"uv pip install -U 'jax[cuda{p.cuda}]'"))
        m = major(p.cuda)
        if m is not None and driver is not None and m > driver:
            what = f"{p.name} needs CUDA {m}, the driver supports {f.gpu.cuda_driver_version}"
            problems.append((what, f"uv pip install 'jax[cuda{driver}]' (or update the driver)"))
    if needed and uses_gpus(f) and not plugins:
        # One CUDA stack in the environment: torch's CUDA major, within what the driver supports.
        torch = package(f, "torch")
        built = major(torch.cuda) if torch is not None and torch.cuda else None
        cu = min(x for x in (built, driver) if x is not None) if (built or driver) else 12
        problems.append(("no jax CUDA plugin: ranks would run on CPU", f"uv pip install 'jax[cuda{cu}]'"))
    if problems:
        what = "; ".join(p[0] for p in problems)
        fix = "; ".join(dict.fromkeys(p[1] for p in problems))
        found = finding("libraries", "jax", FAIL if needed else WARN, f"{shown}: {what}", fix)
    else:
        found = finding("libraries", "jax", PASS, shown)
    return [found, *_jax_deep(f, needed)]


def _jax_deep(f: Facts, needed: bool) -> list[Finding]:
    if f.deep is None or not f.deep.jax.ran:
        return []
    j = f.deep.jax
    if j.error is not None:
        observed = f"importing jax failed: {j.error}"
        return [finding("libraries", "jax_runtime", FAIL if needed else WARN, observed, "reinstall jax")]
    devs = j.values.get("devices") or []
    observed = f"backend {j.values.get('backend')}, devices {', '.join(map(str, devs)) or 'none'}"
    if needed and uses_gpus(f) and j.values.get("backend") != "gpu":
        fix = "install the jax CUDA plugin matching the driver"
        return [finding("libraries", "jax_runtime", FAIL, observed + ": jax does not see the GPUs", fix)]
    return [finding("libraries", "jax_runtime", PASS, observed)]


def optional_packages_rule(f: Facts) -> list[Finding]:
    """warp-lang and isaaclab: reported, optional."""
    out = []
    for name in ("warp-lang", "isaaclab"):
        p = package(f, name)
        out.append(finding("libraries", name, PASS, p.version if p else "not installed (optional)"))
    return out


RULES = (torch_rule, rl_library_rule, jax_rule, optional_packages_rule)
