"""Launch rules: the planned command, the rendezvous endpoints, this host's name, SLURM."""

from __future__ import annotations

from isaaclab_mgpu.launcher.diagnostics.facts import Facts
from isaaclab_mgpu.launcher.diagnostics.rules.base import FAIL, PASS, WARN, Finding, finding


def _split_fix(message: str) -> tuple[str, str]:
    head, sep, tail = message.partition("; ")
    return (head, tail) if sep else (message, "fix the options or the environment as described")


def plan_rule(f: Facts) -> list[Finding]:
    """The launch the options describe can be built, and resolve found nothing that stops ``train``."""
    p = f.plan
    if p.error is not None:
        observed, fix = _split_fix(p.error)
        return [finding("launch", "plan", FAIL, observed, fix)]
    ranks = f"{p.nproc} rank(s)" if p.nproc is not None else "ranks unknown"
    observed = f"{p.launcher}, {ranks} × {p.nnodes} node(s) on {p.device}, {p.library}/{p.framework}"
    # A busy --master_port is judged by the port rule; report the rest here.
    other = [w for w in p.warnings if "--master_port" not in w]
    if other:
        observed_w, fix = _split_fix(other[0])
        more = f" (+{len(other) - 1} more)" if len(other) > 1 else ""
        return [finding("launch", "plan", FAIL, f"{observed}: {observed_w}{more}", fix)]
    return [finding("launch", "plan", PASS, observed)]


#: The option that sets each rendezvous endpoint's port.
_PORT_OPTION = {
    "master": "--master_port",
    "coordinator": "--coordinator_address",
    "rdzv_endpoint": "--rdzv_endpoint",
}


def endpoint_rule(f: Facts) -> list[Finding]:
    """Rendezvous endpoints: the port free where it is served, the address resolving and reachable."""
    if not f.net.endpoints:
        if f.plan.launcher == "jaxrun":
            return [finding("launch", "rendezvous", PASS, "JAX coordinator on 127.0.0.1, a free port picked")]
        return [finding("launch", "rendezvous", PASS, "--standalone: torchrun picks a free port")]
    out = []
    for e in f.net.endpoints:
        where = f"{e.host}:{e.port}"
        if e.local and e.port_free is False:
            fix = f"pick another port with {_PORT_OPTION[e.role]}, or stop the process listening on {e.port}"
            if e.role == "master":
                fix += " (leave --master_port out: --standalone picks a free one)"
            observed = f"{where}: port {e.port} is already in use on this host"
            out.append(finding("launch", f"port:{e.role}", FAIL, observed, fix))
        elif e.local:
            out.append(finding("launch", f"port:{e.role}", PASS, f"{where}: port free on this host"))
        if e.resolves is False:
            fix = "give node 0's IP address, or fix DNS / /etc/hosts"
            out.append(finding("launch", f"address:{e.role}", FAIL, f"{e.host} does not resolve", fix))
        elif e.reachable in ("open", "refused"):
            said = "node 0 is listening" if e.reachable == "open" else "host answers, nothing listens yet"
            out.append(finding("launch", f"address:{e.role}", PASS, f"{where}: {said}"))
        elif e.reachable is not None:
            timeout = e.reachable == "timeout"
            observed = f"{where}: {'no TCP answer within 1 s' if timeout else 'unreachable'}"
            fix = f"check the address, that port {e.port} is open between the nodes, and the network"
            out.append(finding("launch", f"address:{e.role}", WARN if timeout else FAIL, observed, fix))
    return out


def hostname_rule(f: Facts) -> list[Finding]:
    """This host's name resolves (to a non-loopback address when other nodes must reach it); warnings only."""
    n = f.net
    if n.hostname_address is None:
        observed = f"{n.hostname} does not resolve ({n.hostname_error})"
        return [finding("launch", "hostname", WARN, observed, "add the host name to /etc/hosts or DNS")]
    observed = f"{n.hostname} → {n.hostname_address}"
    loopback = n.hostname_address.startswith("127.") or n.hostname_address == "::1"
    if f.plan.nnodes > 1 and f.plan.node_rank == 0 and loopback:
        fix = "give --master_addr as this node's network IP, or map the name to it in /etc/hosts"
        observed += ": other nodes cannot reach a loopback address"
        return [finding("launch", "hostname", WARN, observed, fix)]
    return [finding("launch", "hostname", PASS, observed)]


def slurm_rule(f: Facts) -> list[Finding]:
    """SLURM context: what it fills in, and one mgpu per node."""
    s = dict(f.slurm)
    if "SLURM_JOB_ID" not in s:
        return [finding("launch", "slurm", PASS, "not in a SLURM job")]
    observed = (
        f"job {s['SLURM_JOB_ID']}, {s.get('SLURM_NNODES', '?')} node(s), node {s.get('SLURM_NODEID', '?')}"
    )
    if f.plan.filled:
        observed += "; filled " + ", ".join(f.plan.filled)
    per_node = s.get("SLURM_NTASKS_PER_NODE", "").split("(")[0]
    ntasks, nnodes = s.get("SLURM_NTASKS", ""), s.get("SLURM_NNODES", "")
    many = (per_node.isdigit() and int(per_node) > 1) or (
        ntasks.isdigit() and nnodes.isdigit() and int(ntasks) > int(nnodes)
    )
    if many:
        observed += "; several tasks per node, each would start every rank"
        fix = "srun --ntasks-per-node=1 mgpu train ... (mgpu starts the ranks of a node itself)"
        return [finding("launch", "slurm", WARN, observed, fix)]
    return [finding("launch", "slurm", PASS, observed)]


RULES = (plan_rule, endpoint_rule, hostname_rule, slurm_rule)
