"""NCCL rules: ``NCCL_*`` settings left set, saved workarounds, the NCCL version torch loads."""

from __future__ import annotations

from isaaclab_mgpu.launcher.diagnostics.facts import Facts
from isaaclab_mgpu.launcher.diagnostics.rules.base import PASS, WARN, Finding, finding
from isaaclab_mgpu.launcher.workarounds import CANDIDATES

#: NCCL variables that are workarounds: the documented candidates probe-nccl tries, and three more
#: settings from the troubleshooting table. Left set, they change every run.
WORKAROUND_VARS = frozenset(
    {c.name for c in CANDIDATES} | {"NCCL_PROTO", "NCCL_NET_GDR_LEVEL", "NCCL_BUFFSIZE"}
)


def nccl_env_rule(f: Facts) -> list[Finding]:
    """NCCL_* / TORCH_NCCL_* variables set: a workaround or debug setting left set is a warning."""
    if not f.nccl_env:
        observed = "no NCCL_* or TORCH_NCCL_* setting"
        if f.env_labels:
            shown = ", ".join(f"{k}={v}" for k, v in f.env_labels)
            observed += f" ({shown}: the image's label, read by neither NCCL nor PyTorch)"
        return [finding("nccl", "nccl_env", PASS, observed)]
    saved = dict(f.saved_workarounds)
    nvlink = any(x.nvlink for x in f.gpu.links)
    out = []
    for key, value in f.nccl_env:
        name, shown = f"nccl_env:{key}", f"{key}={value}"
        if key in WORKAROUND_VARS and saved.get(key) == value:
            out.append(finding("nccl", name, PASS, shown + " (the saved workaround for this machine)"))
        elif key in WORKAROUND_VARS:
            extra = ""
            if key == "NCCL_P2P_DISABLE" and value.strip() not in ("0", "") and nvlink:
                extra = "; it turns off NVLink peer-to-peer on this machine"
            observed = f"{shown}: a workaround left set changes every run{extra}"
            fix = (
                f"unset {key} unless mgpu probe-nccl shows this machine needs it "
                "(then keep it with --save-workaround)"
            )
            out.append(finding("nccl", name, WARN, observed, fix))
        elif key == "NCCL_DEBUG" and value.upper() in ("INFO", "TRACE"):
            observed = f"{shown}: every rank logs NCCL internals"
            out.append(finding("nccl", name, WARN, observed, f"unset {key} when done"))
        elif key == "TORCH_NCCL_ASYNC_ERROR_HANDLING" and value.strip() == "0":
            observed = f"{shown}: a failed collective hangs instead of raising"
            out.append(finding("nccl", name, WARN, observed, f"unset {key} (torchrun sets 1)"))
        else:
            out.append(finding("nccl", name, PASS, shown))
    return out


def saved_workarounds_rule(f: Facts) -> list[Finding]:
    """Workarounds saved for this machine (``train`` applies them), and conflicts with the env."""
    if f.ignored_workarounds:
        # What the store holds beyond mgpu's own entries is never applied; say so before anything.
        applied = ", ".join(f"{k}={v}" for k, v in f.saved_workarounds)
        observed = "; ".join(f.ignored_workarounds) + (f"; train applies {applied}" if applied else "")
        fix = f"fix or delete {f.workaround_store}; only probe-nccl --save-workaround should write it"
        return [finding("nccl", "saved_workarounds", WARN, observed, fix)]
    if not f.saved_workarounds:
        return [finding("nccl", "saved_workarounds", PASS, f"none saved for {f.machine_key}")]
    env = dict(f.nccl_env)
    shown = ", ".join(f"{k}={v}" for k, v in f.saved_workarounds)
    clash = [f"{k} (env {env[k]}, saved {v})" for k, v in f.saved_workarounds if k in env and env[k] != v]
    if clash:
        observed = f"{shown}; the environment disagrees: {', '.join(clash)}"
        fix = f"unset the variable or remove the entry from {f.workaround_store}"
        return [finding("nccl", "saved_workarounds", WARN, observed, fix)]
    return [finding("nccl", "saved_workarounds", PASS, f"{shown} (train applies them)")]


def nccl_version_rule(f: Facts) -> list[Finding]:
    """The NCCL wheel(s) installed, and whether torch loads the same version (--deep)."""
    wheels = [p for p in f.packages if p.name.startswith("nvidia-nccl-") and p.version]
    deep_nccl = None
    if f.deep is not None and f.deep.torch.error is None:
        deep_nccl = f.deep.torch.values.get("nccl")
    if len(wheels) > 1:
        observed = ", ".join(f"{p.name} {p.version}" for p in wheels) + ": more than one NCCL wheel"
        fix = "uninstall the NCCL wheel whose CUDA major differs from torch's"
        return [finding("nccl", "nccl_version", WARN, observed, fix)]
    if not wheels:
        seen = f"{deep_nccl} (loaded by torch)" if deep_nccl else "no nvidia-nccl wheel (torch may bundle it)"
        return [finding("nccl", "nccl_version", PASS, seen)]
    w = wheels[0]
    observed = f"{w.version} ({w.name})"
    if deep_nccl and not str(w.version).startswith(str(deep_nccl)):
        fix = "a different libnccl is found first: check LD_LIBRARY_PATH"
        return [finding("nccl", "nccl_version", WARN, observed + f"; torch loads NCCL {deep_nccl}", fix)]
    return [finding("nccl", "nccl_version", PASS, observed)]


RULES = (nccl_env_rule, saved_workarounds_rule, nccl_version_rule)
