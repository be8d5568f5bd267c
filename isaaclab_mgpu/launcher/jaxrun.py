"""``python -m isaaclab_mgpu.jaxrun``: start skrl JAX ranks on this node, fail-fast and supervised.

Our replacement for ``python -m skrl.utils.distributed.jax``, which always exits 0, never stops
the other ranks when one fails, and keeps no logs. Same environment contract, torchrun's habits::

    python -m isaaclab_mgpu.jaxrun --nproc_per_node N [--nnodes M] [--node_rank R]
        --coordinator_address HOST:PORT [--tee T] [--local_ranks_filter F] [--log_dir D]
        [--grace_period S] [--kill_after S] (-m MODULE | SCRIPT) ARGS...

Its contract (each rank's variables, fail-fast, the shutdown on SIGINT/SIGTERM/SIGHUP, the exit
codes, SIGUSR1 ignored, the child subreaper): docs/supervision.md, "skrl JAX". What the page
leaves to the code:

- each rank's environment is :func:`rank_env`'s, with ``OMP_NUM_THREADS=1`` for several ranks and
  ``PYTHONUNBUFFERED=1`` unless already set; port 0 picks a free port (single node only);
- logs follow mgpu's layout (:mod:`isaaclab_mgpu.contract.elastic`, as torchrun's under
  ``--logs_specs mgpu``): every rank's output always goes to its files; ``--tee`` (0 none, 1 stdout,
  2 stderr, 3 both, or per local rank ``0:3,1:1``; default 3) selects the streams also shown on the
  console, for the local ranks in ``--local_ranks_filter`` (default: all), each line prefixed
  ``[default<local_rank>]:`` as torchrun does;
- a failed rank gets torchrun's ``failed (exitcode: N)`` line and failure summary (so ``mgpu`` reads
  both launchers alike), and its error file is copied to jaxrun's own ``TORCHELASTIC_ERROR_FILE``
  when set, as torchrun does;
- it never signals a rank it has already reaped, nor that rank's group, and never exits 0 unless
  every rank did.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import psutil

from isaaclab_mgpu.contract import elastic
from isaaclab_mgpu.contract import env as env_names
from isaaclab_mgpu.launcher.supervise import tree as proctree
from isaaclab_mgpu.launcher.supervise.result import exit_code
from isaaclab_mgpu.launcher.supervise.shutdown import Interrupts, Phase, Shutdown

_POLL = 0.05
_PR_SET_PDEATHSIG = 1
_LOCK = threading.Lock()


@dataclass
class _Rank:
    local: int
    rank: int
    folder: Path
    proc: subprocess.Popen[bytes]
    handle: psutil.Process | None = None
    """The rank's process, held from its start (psutil refuses to signal a reused PID)."""
    pumps: list[threading.Thread] = field(default_factory=list)

    def running(self) -> bool:
        """True until the rank's exit status is collected (then it is never signalled again)."""
        return self.proc.poll() is None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse jaxrun's command line (underscore and hyphen spellings)."""
    p = argparse.ArgumentParser(
        prog="python -m isaaclab_mgpu.jaxrun",
        description="Start skrl JAX ranks on this node, fail-fast, with per-rank logs.",
    )
    p.add_argument("--nproc_per_node", "--nproc-per-node", type=int, required=True)
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node_rank", "--node-rank", type=int, default=0)
    p.add_argument("--coordinator_address", "--coordinator-address", default="127.0.0.1:5000")
    p.add_argument("--tee", default="3")
    p.add_argument("--local_ranks_filter", "--local-ranks-filter", default=None)
    p.add_argument("--log_dir", "--log-dir", default="logs/mgpu")
    p.add_argument("--grace_period", "--grace-period", type=float, default=10.0)
    p.add_argument(
        "--stop_timeout", "--stop-timeout", type=float, dest="grace_period", help=argparse.SUPPRESS
    )
    p.add_argument("--kill_after", "--kill-after", type=float, default=5.0)
    p.add_argument("-m", "--module", action="store_true", help="SCRIPT is a module name")
    p.add_argument("script")
    p.add_argument("script_args", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    if a.nproc_per_node < 1 or a.nnodes < 1 or not 0 <= a.node_rank < a.nnodes:
        p.error("need --nproc_per_node ≥ 1, --nnodes ≥ 1 and 0 ≤ --node_rank < --nnodes")
    if not (a.grace_period >= 0 and a.kill_after >= 0):
        p.error("--grace_period and --kill_after must be 0 or more seconds")
    host, _, port = a.coordinator_address.rpartition(":")
    if not host or not port.isdigit():
        p.error(f"--coordinator_address {a.coordinator_address!r} must be host:port")
    return a


def tee_streams(spec: str, local_rank: int) -> int:
    """Bit mask of streams to show for ``local_rank`` (1 stdout, 2 stderr) from a --tee value."""
    if ":" not in spec:
        return int(spec)
    per = dict(item.split(":") for item in spec.split(","))
    return int(per.get(str(local_rank), 0))


def rank_env(a: argparse.Namespace, local: int, host: str, port: int, error_file: Path) -> dict[str, str]:
    """The environment one rank starts with: ours plus skrl's JAX and torch-style variables."""
    world = a.nnodes * a.nproc_per_node
    rank = a.node_rank * a.nproc_per_node + local
    env = dict(os.environ)
    if a.nproc_per_node > 1:
        env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(
        JAX_LOCAL_RANK=str(local),
        JAX_RANK=str(rank),
        JAX_WORLD_SIZE=str(world),
        JAX_COORDINATOR_ADDR=host,
        JAX_COORDINATOR_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(local),
        WORLD_SIZE=str(world),
        LOCAL_WORLD_SIZE=str(a.nproc_per_node),
        GROUP_RANK=str(a.node_rank),
    )
    env[env_names.ERROR_FILE] = str(error_file)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: if jaxrun is SIGKILLed, the kernel kills the rank.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def _pump(src: IO[bytes], log: Path, console: IO[bytes] | None, prefix: bytes) -> None:
    with open(log, "ab") as f:
        for line in iter(src.readline, b""):
            f.write(line)
            f.flush()
            if console is not None:
                with _LOCK:
                    console.write(prefix + line)
                    console.flush()


def _ask(ranks: list[_Rank], sig: int) -> None:
    """Send ``sig`` to every rank still running (and the process group it leads)."""
    proctree.signal_tree([r.handle for r in ranks if r.handle is not None and r.running()], sig)


def _members() -> list[psutil.Process]:
    """Every live process below this launcher: the ranks, their children, orphans adopted."""
    try:
        return [p for p in psutil.Process().children(recursive=True) if proctree.alive(p)]
    except psutil.Error:
        return []


def _reap_adopted(ranks: list[_Rank]) -> None:
    """Collect the exit status of orphans re-parented to this launcher (a subreaper)."""
    mine = {r.proc.pid for r in ranks}
    try:
        children = {p.pid for p in psutil.Process().children()}
    except psutil.Error:
        return
    proctree.reap(children - mine)


def _summary(script: str, r: _Rank, code: int, host: str, record: elastic.ErrorRecord | None) -> str:
    pid = r.proc.pid
    tb = record.text() if record is not None else None
    if tb is None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "unknown"
        tb = f"Signal {-code} ({name}) received by PID {pid}"
    error_file = str(record.path) if record is not None else None
    cause = elastic.RootCause(r.rank, r.local, host, code, pid, error_file)
    return elastic.failure_summary(script, cause, tb, record.when if record is not None else None)


def main(argv: list[str] | None = None) -> int:
    """Run the ranks until all succeed, one fails, or a signal stops them; return the exit code."""
    a = parse_args(argv)
    host, _, port_text = a.coordinator_address.rpartition(":")
    port = int(port_text)
    if port == 0:
        if a.nnodes > 1:
            print("jaxrun: --coordinator_address port 0 needs a single node", file=sys.stderr)
            return 2
        port = _free_port()
    argv0 = [sys.executable, *(["-m"] if a.module else []), a.script, *a.script_args]

    interrupts = Interrupts()
    subreaper = proctree.hold_subreaper()
    try:
        with interrupts.installed():
            ranks = _start(a, argv0, host, port)
            failure, signalled, shutdown = _supervise(a, ranks, interrupts)
    finally:
        if subreaper:
            proctree.release_subreaper()
    if failure is not None:
        r, rc = failure
        record = elastic.read_error_file(r.folder / elastic.ERROR_FILE)
        own = os.environ.get(env_names.ERROR_FILE)
        if own and record is not None:  # as torchrun's @record on its main does
            elastic.write_launcher_error(own, record, rc)
        print(_summary(a.script, r, rc, socket.gethostname(), record), file=sys.stderr, flush=True)
        return exit_code(rc, stall=None, interrupted=False, killed_after_grace=False, failure=None)
    killed = shutdown.killed_after_grace
    return exit_code(0, stall=None, interrupted=signalled, killed_after_grace=killed, failure=None)


def _start(a: argparse.Namespace, argv0: list[str], host: str, port: int) -> list[_Rank]:
    """Start every local rank with its environment and its output pumps."""
    shown = None if a.local_ranks_filter is None else {int(x) for x in a.local_ranks_filter.split(",")}
    ranks = []
    for local in range(a.nproc_per_node):
        rank = a.node_rank * a.nproc_per_node + local
        folder = elastic.make_rank_dir(a.log_dir, rank)
        proc = subprocess.Popen(
            argv0,
            env=rank_env(a, local, host, port, folder / elastic.ERROR_FILE),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
        r = _Rank(local, rank, folder, proc)
        with contextlib.suppress(psutil.Error):
            r.handle = psutil.Process(proc.pid)  # unreaped: the PID is still the rank's
        ranks.append(r)
    # Pumps start after every fork: preexec_fn is only safe while this process has one thread.
    for r in ranks:
        mask = tee_streams(a.tee, r.local) if shown is None or r.local in shown else 0
        prefix = f"[default{r.local}]:".encode()
        assert r.proc.stdout is not None and r.proc.stderr is not None
        for bit, src, name, console in (
            (1, r.proc.stdout, elastic.STDOUT, sys.stdout.buffer),
            (2, r.proc.stderr, elastic.STDERR, sys.stderr.buffer),
        ):
            shown_on = console if mask & bit else None
            t = threading.Thread(target=_pump, args=(src, r.folder / name, shown_on, prefix), daemon=True)
            t.start()
            r.pumps.append(t)
    return ranks


def _supervise(
    a: argparse.Namespace, ranks: list[_Rank], interrupts: Interrupts
) -> tuple[tuple[_Rank, int] | None, bool, Shutdown]:
    """Run until the ranks and all they started are gone: first failure, stop signal?, the shutdown."""
    shutdown = Shutdown(
        members=_members,
        first_alive=lambda: any(r.running() for r in ranks),
        grace=a.grace_period,
        kill_after=a.kill_after,
    )
    failure: tuple[_Rank, int] | None = None
    signalled = False
    while not shutdown.done:
        for kind, sig in interrupts.take(stopping=signalled):
            if kind == "stop":
                signalled = True
                _ask(ranks, sig)
                shutdown.begin()
            elif kind == "force":
                shutdown.force()
        for r in ranks:
            rc = r.proc.poll()
            if rc not in (None, 0) and failure is None and not shutdown.requested:
                failure = (r, rc)
                what = elastic.failed_line_text(rc, r.local, r.proc.pid)
                print(f"jaxrun: rank {r.rank} {what}", file=sys.stderr, flush=True)
                _ask(ranks, signal.SIGTERM)
                shutdown.begin()
        if shutdown.phase is Phase.RUNNING and not any(r.running() for r in ranks):
            shutdown.begin(requested=False)  # every rank ended: what they left goes too
        shutdown.step()
        _reap_adopted(ranks)
        if not shutdown.done:
            time.sleep(_POLL)
    for r in ranks:
        for t in r.pumps:
            t.join(timeout=2.0)
    return failure, signalled, shutdown


if __name__ == "__main__":
    sys.exit(main())
