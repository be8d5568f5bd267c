"""What a cluster's scheduler tells each node: SLURM's and Kubernetes' variables as launch values.

A node of a SLURM allocation or a pod of a Kubeflow job is told its part through its environment.
:func:`slurm_offers` (SLURM's, first) and :func:`kubernetes_offers` read it into :class:`Offer`
values (one per launch option, each naming its variable); :func:`fill` applies them to a
:class:`~isaaclab_mgpu.launcher.spec.LaunchSpec`: an option left out takes the offered value, a
given one wins and the variable it overrode is named. All three are pure.

Which option comes from which variable: the tables of docs/slurm.md and docs/kubernetes.md, "What
is filled from where". The why that shapes the code: torch's c10d rendezvous numbers the nodes by
sorting their host names, not by ``--node_rank``, while mgpu's node 0 (SLURM's first host, replica
0) keeps the run's record, requeues and picks what ``--resume auto`` continues. So a job of a fixed
size meets on the static rendezvous, where global rank 0 runs on node 0: SLURM's first host as
``--master_addr``, and a pod's c10d endpoint (``PET_RDZV_ENDPOINT`` beside a node rank) as
``--master_addr``/``--master_port`` with ``--rdzv_backend static`` (:func:`_static_when_fixed`).
Explicit options win; a given ``--master_addr`` sets the environment's endpoint aside, a given
``--rdzv_endpoint`` its master address.

torchrun reads each of its flags from ``PET_<FLAG>`` when the flag is not on its command line, so
the builder states every rendezvous flag the environment names (:data:`TORCHRUN_DEFAULTS`), and
:func:`check_torchrun_env` refuses the ones no option can undo (docs/kubernetes.md, "What torchrun
itself reads").

:func:`resubmit_command` reads, from what ``scontrol show job`` says of a batch job (the command
layer asks), the one command that submits it again: the hint a stopped SLURM job prints.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass

from isaaclab_mgpu.contract.errors import UsageError
from isaaclab_mgpu.launcher.spec import LaunchSpec, coerce_option, node_counts, spelling, split_endpoint

#: Default rendezvous port for a SLURM fill (torchrun's ``--master_port`` default).
DEFAULT_MASTER_PORT = 29500
#: skrl's JAX launcher default coordinator port, used for SLURM fills.
DEFAULT_JAX_PORT = 5000

#: torchrun's own default of each flag mgpu may leave off while the environment names it in
#: ``PET_<FLAG>``: the builder then passes the default, so torchrun does what mgpu planned.
TORCHRUN_DEFAULTS: tuple[tuple[str, str], ...] = (
    ("nnodes", "1"),
    ("node_rank", "0"),
    ("master_addr", "127.0.0.1"),
    ("master_port", str(DEFAULT_MASTER_PORT)),
    ("rdzv_backend", "static"),
    ("rdzv_endpoint", ""),
    ("max_restarts", "0"),
    ("tee", "0"),
    ("redirects", "0"),
    ("local_ranks_filter", ""),
)

#: torchrun flags read from ``PET_<FLAG>`` that no command-line option can turn off again.
_UNDOABLE = ("standalone", "module", "no_python", "run_path")

#: Kubernetes' torchrun variables mgpu fills options from, in the order notes name them.
_PET_OPTIONS = (
    "nnodes",
    "node_rank",
    "nproc_per_node",
    "rdzv_backend",
    "rdzv_endpoint",
    "rdzv_id",
    "master_addr",
    "master_port",
    "max_restarts",
)
#: The operator's non-elastic form, all four set together: the option each variable fills.
_NON_ELASTIC = {
    "master_addr": "MASTER_ADDR",
    "master_port": "MASTER_PORT",
    "nnodes": "WORLD_SIZE",
    "node_rank": "RANK",
}

_DYNAMIC = ("rdzv_endpoint", "rdzv_backend", "rdzv_id")
_STATIC = ("master_addr", "master_port")


@dataclass(frozen=True)
class Offer:
    """One launch value the environment offers."""

    option: str
    """The :class:`LaunchSpec` field it fills."""

    value: str
    """The value, as the option would be typed."""

    source: str
    """Where it comes from, as notes name it: ``from PET_NNODES``, ``for the SLURM rendezvous``."""

    variable: str = ""
    """The variable an explicit option overrides, as ``NAME=value`` (empty: none to name)."""

    def filled(self) -> str:
        """``--nnodes 2 from PET_NNODES``."""
        return f"{spelling(self.option)} {self.value} {self.source}"

    def overridden(self, given: object) -> str:
        """``--nnodes 1 (given) overrides PET_NNODES=2``."""
        return f"{spelling(self.option)} {_shown(given)} (given) overrides {self.variable}"


def _from(option: str, name: str, env: Mapping[str, str]) -> Offer:
    return Offer(option, env[name].strip(), f"from {name}", f"{name}={env[name]}")


@dataclass(frozen=True)
class Filled:
    """A spec with the environment's values applied, and what was taken and overridden."""

    spec: LaunchSpec
    """The spec every later step uses."""

    filled: tuple[str, ...] = ()
    """One note per value taken from the environment."""

    overridden: tuple[str, ...] = ()
    """One note per variable an explicit option overrode."""


def slurm_offers(env: Mapping[str, str], spec: LaunchSpec) -> tuple[Offer, ...]:
    """The values a SLURM allocation of several nodes offers (none for one node or outside SLURM)."""
    nodes = env.get("SLURM_NNODES", "")
    if not (env.get("SLURM_JOB_ID") and _ascii_int(nodes) and int(nodes) > 1):
        return ()
    out = [_from("nnodes", "SLURM_NNODES", env)]
    if _ascii_int(env.get("SLURM_NODEID", "")):
        out.append(_from("node_rank", "SLURM_NODEID", env))
    first = first_slurm_host(env.get("SLURM_JOB_NODELIST", ""))
    nodelist = f"SLURM_JOB_NODELIST={env.get('SLURM_JOB_NODELIST', '')}"
    if spec.uses_jax:
        if first:
            address = f"{first}:{DEFAULT_JAX_PORT}"
            out.append(Offer("coordinator_address", address, "from SLURM_JOB_NODELIST", nodelist))
        return tuple(out)
    port = spec.master_port or DEFAULT_MASTER_PORT
    if first and _fixed(spec.nnodes or nodes) and _may_be_static(spec):
        out.append(Offer("master_addr", first, "from SLURM_JOB_NODELIST", nodelist))
        out.append(Offer("master_port", str(port), "for the SLURM rendezvous"))
        out.append(_from("rdzv_id", "SLURM_JOB_ID", env))
        return tuple(out)
    if first:
        out.append(Offer("rdzv_endpoint", f"{first}:{port}", "from SLURM_JOB_NODELIST", nodelist))
    out.append(_from("rdzv_id", "SLURM_JOB_ID", env))
    out.append(Offer("rdzv_backend", "c10d", "for the SLURM rendezvous"))
    return tuple(out)


def kubernetes_offers(env: Mapping[str, str], spec: LaunchSpec) -> tuple[Offer, ...]:
    """The values a PyTorchJob pod's variables offer (torchrun's ``PET_*``, the non-elastic form)."""
    out = {o: _from(o, f"PET_{o.upper()}", env) for o in _PET_OPTIONS if env.get(f"PET_{o.upper()}", "")}
    if all(env.get(name, "") for name in _NON_ELASTIC.values()) and _operators(env):
        for option, name in _NON_ELASTIC.items():
            out.setdefault(option, _from(option, name, env))
    if not spec.uses_jax:
        return tuple(_static_when_fixed(out, spec).values())
    # skrl JAX has no torchrun rendezvous: its coordinator listens where the store would.
    jax = [out[o] for o in ("nnodes", "node_rank", "nproc_per_node") if o in out]
    endpoint, addr, port = out.get("rdzv_endpoint"), out.get("master_addr"), out.get("master_port")
    if endpoint is not None and ":" in endpoint.value:
        jax.append(dataclasses.replace(endpoint, option="coordinator_address"))
    elif addr is not None and port is not None:
        names = f"{addr.source.removeprefix('from ')}:{port.source.removeprefix('from ')}"
        value = f"{addr.value}:{port.value}"
        jax.append(Offer("coordinator_address", value, f"from {names}", f"{names}={value}"))
    return tuple(jax)


def _static_when_fixed(out: dict[str, Offer], spec: LaunchSpec) -> dict[str, Offer]:
    """A fixed-size pod set's c10d endpoint as the static rendezvous, so that rank 0 runs on node 0."""
    # The endpoint's host is node 0's pod (the operator points it at replica 0), where the static
    # rendezvous's node 0 serves the store; elastic, or without node ranks, it stays c10d's.
    endpoint, nodes = out.get("rdzv_endpoint"), out.get("nnodes")
    if endpoint is None or spec.master_addr is not None:
        return out  # a given --master_addr sets the endpoint aside in fill(), and says so
    host, port = split_endpoint(endpoint.value)
    ranked = "node_rank" in out or spec.node_rank is not None
    count = spec.nnodes or (nodes.value if nodes is not None else None)
    if not (port is not None and port.isascii() and ranked and _fixed(count) and _may_be_static(spec)):
        return out
    out = {k: v for k, v in out.items() if k not in ("rdzv_endpoint", "master_addr", "master_port")}
    out["master_addr"] = dataclasses.replace(endpoint, option="master_addr", value=host)
    out["master_port"] = dataclasses.replace(endpoint, option="master_port", value=port)
    backend = out.get("rdzv_backend")
    why = "for a fixed-size job (its ranks follow --node_rank; c10d's follow sorted host names)"
    variable = backend.variable if backend is not None else ""
    out["rdzv_backend"] = Offer("rdzv_backend", "static", why, variable)
    return out


def _fixed(nnodes: str | None) -> bool:
    """True for a node count of one size above one (``2``, ``4:4``); False for elastic or malformed."""
    try:
        low, high = node_counts(nnodes)
    except UsageError:
        return False  # the fill validates it later and names where it came from
    return low == high > 1


def _may_be_static(spec: LaunchSpec) -> bool:
    """True unless the user chose the c10d rendezvous (an endpoint or a backend other than static)."""
    return spec.rdzv_endpoint is None and spec.rdzv_backend in (None, "static")


def _operators(env: Mapping[str, str]) -> bool:
    """True when MASTER_ADDR/…/RANK are the operator's: in a pod, beside torchrun's variables."""
    # People export these names themselves (RANK=$SLURM_PROCID counts processes, not nodes).
    in_pod = bool(env.get("KUBERNETES_SERVICE_HOST")) or any(k.startswith("PET_") for k in env)
    return in_pod and not env.get("SLURM_JOB_ID")


def fill(spec: LaunchSpec, env: Mapping[str, str]) -> Filled:
    """Apply the environment's offers to ``spec``: what is left out is filled, what is given wins."""
    offered = slurm_offers(env, spec) or kubernetes_offers(env, spec)
    if not offered:
        return Filled(spec)
    by = {o.option: o for o in offered}
    # The two rendezvous forms exclude each other; the environment's dynamic one wins over its
    # static one (torchrun ignores the master address then), and an explicit option over both.
    # (A given --master_port alone is the port of SLURM's endpoint, so it picks no form.)
    drop: tuple[str, ...] = ()
    if spec.master_addr is not None:
        drop = _DYNAMIC
    elif spec.rdzv_endpoint is not None:
        drop = _STATIC
    elif "rdzv_endpoint" in by:
        by = {name: offer for name, offer in by.items() if name not in _STATIC}
    nodes = spec.nnodes or (by["nnodes"].value if "nnodes" in by else None)
    single = nodes is None or _max_nodes(nodes, by.get("nnodes")) <= 1
    values: dict[str, str] = {}
    filled: list[str] = []
    overridden: list[str] = []
    for option, offer in by.items():
        given = getattr(spec, option)
        if option == "nproc_per_node" and given is None and spec.gpu_ids is not None:
            given = len(spec.gpu_ids)  # the GPUs chosen set the rank count
        if option in drop and given is None:
            if offer.variable:
                form = "master_addr" if spec.master_addr is not None else "rdzv_endpoint"
                overridden.append(f"{offer.variable} not used: {spelling(form)} given")
            continue
        if single and option != "nnodes" and option not in ("nproc_per_node", "max_restarts"):
            continue  # one node: no rendezvous to join (standalone), no node rank to name
        if given is None:
            values[option] = offer.value
            filled.append(offer.filled())
        elif offer.variable and _shown(given) != offer.value:
            overridden.append(offer.overridden(given))
    try:
        result = dataclasses.replace(spec, **{k: coerce_option(k, v) for k, v in values.items()})
    except UsageError as exc:  # the filled spec is validated as a whole, as a typed one would be
        raise UsageError(f"{exc} (filled {'; '.join(filled)}); fix the variable or give the option") from None
    return Filled(result, tuple(filled), tuple(overridden))


def check_torchrun_env(env: Mapping[str, str], *, standalone: bool) -> None:
    """Refuse a ``PET_*`` flag torchrun would read that makes mgpu's command mean something else."""
    for flag in _UNDOABLE:
        name = f"PET_{flag.upper()}"
        if name not in env:
            continue
        try:
            on = bool(int(env[name] or "x"))
        except ValueError:
            raise UsageError(
                f"{name}={env[name]!r}: torchrun reads it as its --{flag} flag and stops on a value that "
                f"is not a number; set {name}=0 or unset it"
            ) from None
        if not on or (flag == "standalone" and standalone):
            continue
        what = (
            "a rendezvous on this node alone, which the other nodes cannot join"
            if flag == "standalone"
            else "a different way of starting the program mgpu names"
        )
        raise UsageError(f"{name}={env[name]} makes torchrun use --{flag}: {what}; unset {name}")


def torchrun_env(env: Mapping[str, str]) -> tuple[str, ...]:
    """The torchrun flags (as option names) that ``env`` sets through ``PET_<FLAG>``."""
    return tuple(sorted(name[4:].lower() for name in env if name.startswith("PET_") and len(name) > 4))


def first_slurm_host(nodelist: str) -> str:
    """Return the first host of a SLURM hostlist such as ``gpu[03-05,9],login1``."""
    depth, end = 0, len(nodelist)
    for i, ch in enumerate(nodelist):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            end = i
            break
    first = nodelist[:end].strip()
    # Each bracket group contributes its first element: "a[1-2]b[07,9]" -> "a1b07".
    return re.sub(r"\[([^\]]*)\]", lambda m: re.split(r"[-,]", m.group(1))[0], first)


def resubmit_command(show_job: str) -> tuple[str, ...] | None:
    """``sbatch --chdir WORKDIR SCRIPT`` from a batch job's ``scontrol show job -o`` line (else None)."""
    fields = dict(re.findall(r"(?:^|\s)(BatchFlag|Command|WorkDir)=(\S+)", show_job))
    if fields.get("BatchFlag") != "1" or not fields.get("Command") or not fields.get("WorkDir"):
        return None
    return ("sbatch", "--chdir", fields["WorkDir"], fields["Command"])


def _ascii_int(text: str) -> bool:
    # str.isdigit() is also true for full-width and other digits int() reads; SLURM writes ASCII.
    return text.isascii() and text.isdigit()


def _max_nodes(value: str, offer: Offer | None) -> int:
    try:
        return node_counts(value)[1]
    except UsageError as exc:
        where = f" (filled {offer.filled()})" if offer is not None and offer.value == value else ""
        raise UsageError(f"{exc}{where}") from None


def _shown(value: object) -> str:
    if isinstance(value, tuple):
        return ",".join(value)
    return format(value, "g") if isinstance(value, float) else str(value)
