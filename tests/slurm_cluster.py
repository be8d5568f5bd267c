"""A real SLURM cluster on this machine for the tests: munge, slurmctld and two slurmd "nodes".

Each node is a network namespace of its own (a veth pair into one bridge), with its own host name
(a UTS namespace) and its own ``/etc/hosts`` (a mount namespace, the file bound over it), and all
of them share this machine's file system, as a cluster's nodes share their storage. The nodes are
named ``node9`` and ``node10`` on purpose: SLURM orders them node9, node10 (``node[9-10]``,
SLURM_NODEID 0 is node9) while sorting the names puts node10 first, which is where torch's c10d
rendezvous would put global rank 0.

Nothing is mocked: ``sbatch`` submits to a real ``slurmctld``; each ``slurmd`` starts the job's
steps in its namespace; ``scontrol``, ``squeue`` and ``scancel`` are SLURM's own. The daemons run
as root with ``proctrack/linuxproc`` and ``task/none`` (no cgroups in a sandbox), munge on a
socket and key of its own, every file under one folder, so nothing of the machine's own set-up is
used or changed. ``ip netns exec`` is not used to start slurmd: it remounts ``/sys``, and slurmd
then fails on ``/sys/fs/cgroup``; ``nsenter --net`` keeps it.

:func:`unavailable` says in one line why the cluster cannot run here (not root, a program missing,
no namespaces), for the tests to skip with. ``python tests/slurm_cluster.py up DIR`` starts one
by hand and prints the ``SLURM_CONF`` to export; ``python tests/slurm_cluster.py down`` stops
whatever a cluster left running, wherever its folder was.

**Nothing is left behind.** Every process of the cluster carries :data:`MARK` in its environment:
the daemons (munged, slurmctld, each slurmd) are started with it, and jobs inherit it from the
``sbatch`` of :meth:`Cluster.sbatch` (sbatch exports the submitter's environment). Each node's
processes (slurmd, job steps, ``srun``, mgpu and its ranks) also live in the node's network
namespace. :func:`clean_leftovers` SIGKILLs both (the namespaces' processes and every marked
process), then deletes the namespaces and the bridge; :meth:`Cluster.start` calls it before
anything else, so a test run killed midway (SIGKILL, a time limit) leaves nothing the next one
meets, and :meth:`Cluster.stop` and ``down`` end with it. The tests' fixture turns SIGTERM into
an interrupt, so a run stopped with SIGTERM still tears its cluster down.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

#: The nodes in SLURM's order (SLURM_NODEID 0, 1) and their last address byte.
NODES = (("node9", 9), ("node10", 10))
#: The environment variable every process of a test cluster carries (its value: the cluster's folder).
MARK = "MGPU_TEST_SLURM_CLUSTER"
#: The cluster's subnet: the bridge is .1, each node .<its byte>; only our own namespaces live there.
SUBNET = "10.213.7"
BRIDGE = "mgpuslurm0"
PROGRAMS = (
    "munged",
    "slurmctld",
    "slurmd",
    "sbatch",
    "scontrol",
    "squeue",
    "scancel",
    "ip",
    "nsenter",
    "unshare",
)


def unavailable() -> str | None:
    """Why a SLURM cluster cannot be started here (one line), or None when it can."""
    if os.geteuid() != 0:
        return "the SLURM cluster needs root (network namespaces, slurmd as root)"
    missing = [p for p in PROGRAMS if shutil.which(p) is None and not Path(f"/usr/sbin/{p}").exists()]
    if missing:
        return f"no {', '.join(missing)} here: apt-get install slurm-wlm munge iproute2 util-linux"
    probe = subprocess.run(["ip", "netns", "add", "mgpu-probe"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"no network namespaces here: {probe.stderr.strip() or 'ip netns add failed'}"
    subprocess.run(["ip", "netns", "delete", "mgpu-probe"], capture_output=True)
    return None


def _run(*argv: str, check: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, env=env)


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _netns(name: str) -> str:
    return f"mgpu-{name}"


@dataclass
class Cluster:
    """A running cluster: its folder, its configuration and the daemons it started."""

    root: Path
    """Everything of the cluster lives here: configuration, state, spools, logs, munge's key."""

    conf: Path = field(init=False)
    """The ``slurm.conf``; every SLURM command is told it through ``SLURM_CONF``."""

    slurmd: dict[str, subprocess.Popen] = field(default_factory=dict)
    """Each node's slurmd (the process that entered the namespaces and runs it)."""

    daemons: list[subprocess.Popen] = field(default_factory=list)
    """munged and slurmctld."""

    def __post_init__(self) -> None:
        self.conf = self.root / "slurm.conf"

    # -- starting and stopping ------------------------------------------------------------------
    def start(self) -> Cluster:
        """Bring up the bridge and the nodes' namespaces, munge, slurmctld and every slurmd."""
        clean_leftovers()  # an earlier run killed midway: its daemons, jobs, namespaces, bridge
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)  # munged refuses a key or socket in a folder others may write
        self._network()
        self._munge()
        self._write_conf()
        ctl = subprocess.Popen(
            # -c: no job of an earlier cluster in the same folder comes back
            ["slurmctld", "-D", "-c", "-i", "-f", str(self.conf)],
            env=self.env(),
            stdout=subprocess.DEVNULL,
            stderr=open(self.root / "slurmctld.stderr", "w"),  # noqa: SIM115 (the daemon keeps it)
        )
        self.daemons.append(ctl)
        for name, _ in NODES:
            self.start_node(name)
        self.wait_idle(len(NODES), timeout=60)
        return self

    def stop(self) -> None:
        """Stop every job, daemon and process of the nodes; remove the namespaces and the bridge.

        Each step runs even when one before it fails: a half-stopped cluster is what the next run
        would meet."""
        try:
            if self.conf.exists() and any(p.poll() is None for p in self.daemons):
                _run("scancel", "--full", "-u", "root", check=False, env=self.env())
        except (OSError, subprocess.SubprocessError):
            pass  # the nodes are killed below whatever scancel did
        for name, _ in NODES:
            with contextlib.suppress(Exception):
                self.kill_node(name)
        for proc in reversed(self.daemons):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.daemons.clear()
        clean_leftovers()

    def _network(self) -> None:
        _run("ip", "link", "add", BRIDGE, "type", "bridge")
        _run("ip", "addr", "add", f"{SUBNET}.1/24", "dev", BRIDGE)
        _run("ip", "link", "set", BRIDGE, "up")
        hosts = ["127.0.0.1 localhost", f"{SUBNET}.1 {socket.gethostname()}"]
        for name, byte in NODES:
            ns, host_end, node_end = _netns(name), f"mgh{byte}", f"mgn{byte}"
            _run("ip", "netns", "add", ns)
            _run("ip", "link", "add", host_end, "type", "veth", "peer", "name", node_end)
            _run("ip", "link", "set", node_end, "netns", ns)
            _run("ip", "link", "set", host_end, "master", BRIDGE)
            _run("ip", "link", "set", host_end, "up")
            _run("ip", "-n", ns, "addr", "add", f"{SUBNET}.{byte}/24", "dev", node_end)
            _run("ip", "-n", ns, "link", "set", node_end, "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            hosts.append(f"{SUBNET}.{byte} {name}")
        (self.root / "hosts").write_text("\n".join(hosts) + "\n")

    def _munge(self) -> None:
        key = self.root / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        proc = subprocess.Popen(
            ["munged", "--foreground", "--force", f"--socket={self.munge_socket}", f"--key-file={key}",
             f"--pid-file={self.root / 'munged.pid'}", f"--log-file={self.root / 'munged.log'}",
             f"--seed-file={self.root / 'munged.seed'}"],
            env=self.env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.daemons.append(proc)
        deadline = time.monotonic() + 20
        while not self.munge_socket.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"munged did not start: {(self.root / 'munged.log').read_text()[-2000:]}")
            time.sleep(0.1)

    @property
    def munge_socket(self) -> Path:
        """munge's socket, for this cluster alone."""
        return self.root / "munge.socket"

    def _write_conf(self) -> None:
        ctl_port = _free_port(f"{SUBNET}.1")
        node_port = _free_port(f"{SUBNET}.1")
        cpus = os.cpu_count() or 2
        nodes = "\n".join(
            f"NodeName={name} NodeAddr={SUBNET}.{byte} CPUs={cpus} RealMemory=4000 State=UNKNOWN"
            for name, byte in NODES
        )
        names = ",".join(name for name, _ in NODES)
        for name, _ in NODES:
            (self.root / "spool" / name).mkdir(parents=True, exist_ok=True)
        (self.root / "state").mkdir(exist_ok=True)
        self.conf.write_text(
            f"""ClusterName=mgputest
SlurmctldHost={socket.gethostname()}({SUBNET}.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
StateSaveLocation={self.root / "state"}
SlurmdSpoolDir={self.root / "spool"}/%n
SlurmctldPidFile={self.root / "slurmctld.pid"}
SlurmdPidFile={self.root / "slurmd-%n.pid"}
SlurmctldLogFile={self.root / "slurmctld.log"}
SlurmdLogFile={self.root / "slurmd-%n.log"}
# Task exits and the signals each step got (slurmd), every RPC and who sent it (slurmctld): what
# tells a test's own artefact from mgpu's fault when a multi-node test fails.
SlurmdDebug=verbose
SlurmctldDebug=debug2
SlurmctldPort={ctl_port}
SlurmdPort={node_port}
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# A node whose slurmd stops answering is DOWN after 10 s, and back in service once it registers.
SlurmdTimeout=10
ReturnToService=2
# Keep ended jobs visible to scontrol for the whole test session.
MinJobAge=3600
# SLURM's default: mgpu's own stop (--grace_period 10 s + --kill_after 5 s) must fit before SIGKILL.
KillWait=30
{nodes}
PartitionName=test Nodes={names} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""
        )

    def start_node(self, name: str) -> None:
        """Start ``name``'s slurmd in its namespaces (again, after :meth:`kill_node`)."""
        hosts = self.root / "hosts"
        inner = (
            f"hostname {name} && mount --bind {hosts} /etc/hosts && exec slurmd -D -f {self.conf} -N {name}"
        )
        log = open(self.root / f"slurmd-{name}.stderr", "a")  # noqa: SIM115 (the daemon keeps it)
        self.slurmd[name] = subprocess.Popen(
            [
                "nsenter",
                f"--net=/var/run/netns/{_netns(name)}",
                "unshare",
                "--uts",
                "--mount",
                "sh",
                "-c",
                inner,
            ],
            env=self.env(),
            stdout=subprocess.DEVNULL,
            stderr=log,
        )

    def kill_node(self, name: str) -> None:
        """The node dies: its slurmd and every process in its namespace are SIGKILLed at once."""
        _kill_namespace(_netns(name))
        proc = self.slurmd.pop(name, None)
        if proc is not None:
            proc.wait()

    # -- using it -------------------------------------------------------------------------------
    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with ``SLURM_CONF`` naming this cluster and
        :data:`MARK` (every daemon and job of the cluster carries it)."""
        out = dict(os.environ if base is None else base)
        out["SLURM_CONF"] = str(self.conf)
        out[MARK] = str(self.root)
        return out

    def scontrol(self, *args: str) -> str:
        """``scontrol ARGS``'s output; raises when it fails."""
        return _run("scontrol", *args, env=self.env()).stdout

    def sbatch(self, script: Path, cwd: Path, env: dict[str, str], *options: str) -> str:
        """Submit ``script`` from ``cwd`` with ``env`` (exported to the job, as sbatch does) and sbatch's
        own ``options``; the job id."""
        argv = ["sbatch", "--parsable", *options, str(script)]
        out = subprocess.run(argv, cwd=cwd, env=self.env(env), capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"sbatch failed: {out.stderr.strip()}")
        return out.stdout.strip().split(";")[0]

    def scancel(self, job_id: str) -> None:
        """``scancel JOB``, as a user cancels a job (SIGTERM to every step, then SIGKILL after KillWait)."""
        _run("scancel", job_id, env=self.env())

    def job(self, job_id: str) -> dict[str, str]:
        """The job's fields as ``scontrol show job -o`` prints them (``JobState``, ``Restarts``, ...)."""
        return _fields(self.scontrol("show", "job", "-o", job_id))

    def node(self, name: str) -> dict[str, str]:
        """The node's fields as ``scontrol show node -o`` prints them (``State``: ``IDLE``, ``DOWN*``...)."""
        return _fields(self.scontrol("show", "node", "-o", name))

    def requeued(self, job_id: str) -> dict[str, str] | None:
        """The job's fields once SLURM has requeued it at least once, else None."""
        fields = self.job(job_id)
        return fields if int(fields.get("Restarts", "0")) >= 1 else None

    def wait_job(self, job_id: str, states: tuple[str, ...], timeout: float) -> dict[str, str]:
        """Wait until the job is in one of ``states``; its fields then (raises on timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            fields = self.job(job_id)
            if fields.get("JobState") in states:
                return fields
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} not in {states} after {timeout:.0f} s: {fields}")
            time.sleep(0.5)

    def wait_idle(self, count: int, timeout: float) -> None:
        """Wait until ``count`` nodes are idle (registered, no job)."""
        deadline = time.monotonic() + timeout
        while True:
            out = _run("sinfo", "-h", "-N", "-o", "%N %t", check=False, env=self.env()).stdout
            idle = [line for line in out.splitlines() if line.split()[-1:] == ["idle"]]
            if len(idle) >= count:
                return
            if time.monotonic() > deadline:
                logs = "".join((self.root / f"slurmd-{n}.log").read_text()[-800:] for n, _ in NODES
                               if (self.root / f"slurmd-{n}.log").exists())  # fmt: skip
                raise TimeoutError(
                    f"only {len(idle)} of {count} nodes idle after {timeout:.0f} s: {out!r} {logs}"
                )
            time.sleep(0.3)


def clean_leftovers() -> list[str]:
    """End whatever a test cluster left on this machine, whoever started it and wherever its folder
    was: every process in the nodes' namespaces and every process carrying :data:`MARK` (munged,
    slurmctld, job steps, ``srun``), then the namespaces, veths and bridge. What was found, one
    line each (empty: nothing was left)."""
    found: list[str] = []
    for _ in range(3):  # a dying slurmd or slurmstepd may still start a process: look again
        pids = {int(p) for name, _ in NODES for p in _namespace_pids(_netns(name))}
        pids |= _marked_pids()
        pids -= {os.getpid(), *_ancestors()}
        if not pids:
            break
        for pid in sorted(pids):
            found.append(f"process {pid} {_cmdline(pid)[:100]}")
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        _wait_gone(pids, timeout=10)
    for name, byte in (*NODES, ("probe", 0)):
        if Path(f"/var/run/netns/{_netns(name)}").exists():
            found.append(f"network namespace {_netns(name)}")
            _run("ip", "netns", "delete", _netns(name), check=False)
        if byte and Path(f"/sys/class/net/mgh{byte}").exists():
            _run("ip", "link", "delete", f"mgh{byte}", check=False)  # gone with the namespace, unless held
    if Path(f"/sys/class/net/{BRIDGE}").exists():
        found.append(f"bridge {BRIDGE}")
        _run("ip", "link", "delete", BRIDGE, check=False)
    return found


def _namespace_pids(ns: str) -> list[str]:
    if not Path(f"/var/run/netns/{ns}").exists():
        return []
    return _run("ip", "netns", "pids", ns, check=False).stdout.split()


def _marked_pids() -> set[int]:
    """Processes whose environment carries :data:`MARK` (read from ``/proc``; root reads them all)."""
    needle = f"\0{MARK}=".encode()
    out: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in b"\0" + environ:
            out.add(int(entry.name))
    return out


def _ancestors() -> set[int]:
    """This process's ancestors (never killed: a test run under a marked shell stays alive)."""
    return _ancestors_of(os.getpid())


def _ancestors_of(child: int) -> set[int]:
    """``child``'s ancestors, as ``/proc`` shows them now (empty when it is gone)."""
    out: set[int] = set()
    pid = _parent(child)
    while pid is not None and pid > 1 and pid not in out:
        out.add(pid)
        pid = _parent(pid)
    return out


def _parent(pid: int) -> int | None:
    """``pid``'s parent (None when it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _wait_gone(pids: set[int], timeout: float) -> None:
    """Wait until none of ``pids`` exists (reaped, or a zombie whose parent is gone too)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in pids if Path(f"/proc/{p}").exists() and not _zombie(p)]
        if not alive:
            return
        time.sleep(0.1)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def _fields(text: str) -> dict[str, str]:
    """``Key=Value`` items of one ``scontrol show … -o`` line."""
    out: dict[str, str] = {}
    for item in text.split():
        key, sep, value = item.partition("=")
        if sep:
            out[key] = value
    return out


def _kill_namespace(ns: str) -> None:
    """SIGKILL every process in the network namespace ``ns``, as a machine that dies: none may see
    another die and act on it. Killed one by one in PID order, one did: srun's shepherd (the child
    srun forks to cancel the step should srun die) found srun gone and had SLURM SIGKILL the step on
    every node, the survivor's too (slurmctld logged REQUEST_CANCEL_JOB_STEP from the dying node
    70 ms after the kill; 4 of about 45 node9 shrink runs on a loaded machine). Stopping all first
    is not enough: a stopped process whose parent dies is continued by the kernel (SIGHUP and
    SIGCONT to a process group orphaned with stopped members), and the shepherd ran on. So every
    process is stopped, then killed children first (19 of 19 runs, no cancel logged)."""
    stopped: set[int] = set()
    while fresh := {int(p) for p in _namespace_pids(ns)} - stopped:  # forked meanwhile
        for pid in fresh:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        stopped |= fresh
    depth = {pid: len(_ancestors_of(pid)) for pid in stopped}
    for pid in sorted(stopped, key=depth.__getitem__, reverse=True):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "up" and len(sys.argv) == 3:
        cluster = Cluster(Path(sys.argv[2]).resolve())
        signal.signal(signal.SIGTERM, _interrupt)  # kill PID stops it as Ctrl-C does
        try:
            cluster.start()
            print(f"export SLURM_CONF={cluster.conf}", flush=True)
            signal.pause()  # the daemons are this process's children: stay until interrupted
        except KeyboardInterrupt:
            pass
        finally:
            cluster.stop()
    elif what == "down":
        left = clean_leftovers()
        print("\n".join(f"ended {line}" for line in left) or "nothing of a test cluster was running")
    else:
        sys.exit("usage: python tests/slurm_cluster.py up DIR | down")
