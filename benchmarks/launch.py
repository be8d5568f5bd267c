"""Launch overhead: time to the first training iteration, ``mgpu train`` vs plain torchrun.

Both start the same built-in worker with the same arguments (rsl-rl on the embedded cartpole task,
``ranks()`` ranks on ``device()``, two iterations)::

    mgpu train --device cpu --nproc_per_node 2 --max_iterations 2 --num_envs 256
    python -m torch.distributed.run --nproc_per_node 2 --standalone -m isaaclab_mgpu.worker \\
        --rl_library rsl_rl --device cpu --max_iterations 2 --num_envs 256 --distributed

The clock starts just before the launcher is executed and stops when rank 0's line
``[mgpu] iteration 1/2`` reaches the launcher's stdout (a pipe, as in CI logs), so it covers the
interpreter start, mgpu's preflight (check-env's fast path) and supervision, torchrun's
rendezvous, ``import torch`` in every rank, building the task and the first PPO iteration. mgpu
runs with its defaults (preflight on, ``--tee 3 --local_ranks_filter 0`` into ``logs/mgpu``), and
again with ``--no_preflight``. The three variants are interleaved in every repeat after one
untimed warm-up launch, so they see the same machine load and warm file caches. Time to
exit (the whole two-iteration run) is reported too. Goal: within 5 % of torchrun.
"""

from __future__ import annotations

import tempfile
import time

from .common import MGPU, PYTHON, Figure, device, ranks, save, stream

ITERATIONS = 2
NUM_ENVS = 256
FIRST = "[mgpu] iteration 1/"


def worker_args() -> list[str]:
    """The worker arguments both launchers receive."""
    return ["--device", device(), "--max_iterations", str(ITERATIONS), "--num_envs", str(NUM_ENVS)]


def variants() -> dict[str, list[str]]:
    """Launcher argv per variant name."""
    n = str(ranks())
    plain = [PYTHON, "-m", "torch.distributed.run", "--nproc_per_node", n, "--standalone"]
    plain += ["-m", "isaaclab_mgpu.worker", "--rl_library", "rsl_rl", *worker_args(), "--distributed"]
    mgpu = [MGPU, "train", "--nproc_per_node", n, "--rl_library", "rsl_rl", *worker_args()]
    return {"torchrun": plain, "mgpu": mgpu, "mgpu --no_preflight": [*mgpu, "--no_preflight"]}


def one_launch(argv: list[str]) -> tuple[float, float]:
    """Run one launch in a fresh folder; return (seconds to the first iteration, seconds to exit)."""
    with tempfile.TemporaryDirectory() as tmp:
        # mgpu gives every rank one run stamp; plain torchrun gets the same one, so the run
        # folders match and neither side pays for anything the other skips.
        env = {"MGPU_RUN_STAMP": time.strftime("%Y-%m-%d_%H-%M-%S")}
        done = stream(argv, cwd=tmp, env=env, timeout=300)
        first = done.first(FIRST)
        if done.exit_code != 0 or first is None:
            raise RuntimeError(f"{argv[:3]} exited {done.exit_code}:\n{done.tail()}")
        return first, done.total_s


def run(repeats: int = 3) -> list[Figure]:
    """Measure and save the launch-overhead figures."""
    argvs = variants()
    one_launch(argvs["torchrun"])  # warm-up: page cache, bytecode, Warp's kernel cache
    first: dict[str, list[float]] = {k: [] for k in argvs}
    total: dict[str, list[float]] = {k: [] for k in argvs}
    for _ in range(repeats):
        for name, argv in argvs.items():
            a, b = one_launch(argv)
            first[name].append(a)
            total[name].append(b)
    where = f"{ranks()} {device()} rank(s), rsl-rl cartpole, {NUM_ENVS} envs/rank"
    figures = [
        Figure(
            "mgpu train: time to first iteration", "s", first["mgpu"], "plain torchrun", first["torchrun"],
            goal="≤ 1.05×", note=f"{where}; defaults (preflight on)",
        ),
        Figure(
            "mgpu train --no_preflight: time to first iteration", "s", first["mgpu --no_preflight"],
            "plain torchrun", first["torchrun"], goal="≤ 1.05×", note=where,
        ),
        Figure(
            f"mgpu train: time to exit ({ITERATIONS} iterations)", "s", total["mgpu"], "plain torchrun",
            total["torchrun"], goal="—", note="includes the supervisor's end-of-run checks",
        ),
    ]  # fmt: skip
    save("launch", figures, {"argv": argvs, "time_to_exit_s": total})
    return figures
