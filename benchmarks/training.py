"""Training speed: seconds per iteration and env-steps/s per back-end at 1 and N ranks.

Every repeat runs ``mgpu train --rl_library rsl_rl`` / ``skrl --ml_framework torch`` / ``skrl
--ml_framework jax`` on the embedded cartpole task (the task's default 256 envs per rank on CPU,
4096 on CUDA) for ``WARMUP + MEASURED`` iterations, at 1 rank and at ``ranks()`` ranks, then skrl
JAX at ``ranks()`` ranks once more with ``MGPU_SKRL_JAX_STOCK_PMAP=1`` (stock skrl's per-call
``jax.pmap`` in ``reduce_parameters`` and PPO's KL step; see ``isaaclab_mgpu.rank.patches.skrl``),
and on CPU every back-end at ``ranks()`` ranks once more with ``MGPU_CPU_COLLECTIVES=gloo`` (every
collective on gloo, none through the node's shared-memory channel, ``isaaclab_mgpu.rank.localcomm``);
the stock-``pmap`` run is then on gloo too and is compared with the gloo run, so that ratio is the
``pmap`` cache's alone.

Figures come from rank 0's per-iteration lines (``[mgpu] iteration i/N | ... | S steps/s | T
s/it``; seconds per iteration recomputed from the exact steps/s, as T is rounded to 0.01 s): the
median over the iterations after the first ``WARMUP``, which hold JAX's compilation
and the allocator's first touches and would otherwise swamp a short run. The whole-run figures of
``summary.json`` (``s_per_iteration``, ``env_steps_per_s.total``, warm-up included) are kept in
the JSON as ``summaries`` and quoted in the notes. env-steps/s counts every rank's steps.

Ratios: N ranks against 1 rank of the same back-end (per-rank envs fixed, so ideal scaling is 1×
the seconds per iteration and N× the env-steps/s; a figure beyond either is refused, see
``benchmarks.common``), the shared-memory channel against gloo, and the cached reductions against
stock skrl (goal: at least 3× faster, i.e. ≤ 0.33× the seconds per iteration).
"""

from __future__ import annotations

import json
import re
import statistics
import tempfile
import time
from pathlib import Path

from isaaclab_mgpu.contract.settings import DEFAULTS

from .common import MGPU, Figure, device, ranks, save, stream

WARMUP, MEASURED = 2, 4
BACKENDS = {
    "rsl_rl": ["--rl_library", "rsl_rl"],
    "skrl torch": ["--rl_library", "skrl", "--ml_framework", "torch"],
    "skrl jax": ["--rl_library", "skrl", "--ml_framework", "jax"],
}
STOCK_PMAP = {"MGPU_SKRL_JAX_STOCK_PMAP": "1"}
#: Every collective on gloo, none through the shared-memory channel (isaaclab_mgpu.rank.localcomm).
GLOO = {"MGPU_CPU_COLLECTIVES": "gloo"}
#: The issue's goals for 2 CPU ranks against 1 (env-steps/s).
GOALS = {"rsl_rl": "≥ 1.6×", "skrl torch": "≥ 1.6×", "skrl jax": "≥ 1.4×"}
#: torchrun sets OMP_NUM_THREADS=1 only for several ranks; a lone CPU rank would otherwise run torch's
#: intra-op pool on every core and, on a shared box, crawl (measured: 4.1 s/it instead of ~0.075), so
#: every CPU run gets the same single thread and the ratios measure distribution, not threads.
CPU_ENV = {"OMP_NUM_THREADS": "1"}
LINE = re.compile(r"\[mgpu\] iteration (\d+)/\d+ \|.*\| ([\d,.]+) steps/s \| ([\d.]+) s/it")


def num_envs() -> int:
    """Environments per rank."""
    return 256 if device() == "cpu" else 4096


def one_run(backend: str, n: int, env: dict[str, str] | None = None) -> dict[str, float]:
    """Train once; return steady and whole-run seconds per iteration and env-steps/s."""
    argv = [MGPU, "train", "--device", device(), "--nproc_per_node", str(n), *BACKENDS[backend]]
    argv += ["--max_iterations", str(WARMUP + MEASURED), "--num_envs", str(num_envs())]
    argv += ["--save_interval", "0"]
    env = {**(CPU_ENV if device() == "cpu" else {}), **(env or {})}
    with tempfile.TemporaryDirectory() as tmp:
        done = stream(argv, cwd=tmp, env=env, timeout=600)
        if done.exit_code != 0:
            raise RuntimeError(f"{backend} x{n} exited {done.exit_code}:\n{done.tail()}")
        steady = [m for _, line in done.lines if (m := LINE.search(line)) and int(m.group(1)) > WARMUP]
        summary = json.loads(next(Path(tmp, "logs").glob("*/*/*/summary.json")).read_text())
    if len(steady) != MEASURED:
        raise RuntimeError(f"{backend} x{n}: {len(steady)} iteration lines after the warm-up:\n{done.tail()}")
    # The line prints s/it to 0.01 s, too coarse at ~0.1 s/it; steps/s is exact to a step, and
    # steps/s = envs x rollout x ranks / seconds, so the seconds come from it.
    steps = num_envs() * DEFAULTS["cartpole"].ppo.rollout * n
    rates = [float(m.group(2).replace(",", "")) for m in steady]
    return {
        "s_per_iteration": statistics.median(steps / r for r in rates),
        "env_steps_per_s": statistics.median(rates),
        "summary_s_per_iteration": summary["s_per_iteration"],
        "summary_env_steps_per_s": summary["env_steps_per_s"]["total"],
        "wall_s": done.total_s,
    }


def run(repeats: int = 3) -> list[Figure]:
    """Measure and save the training figures."""
    n = ranks()
    counts = (1, n) if n > 1 else (1,)
    keys = [(b, k) for b in BACKENDS for k in counts]
    stock = n > 1  # one rank reduces nothing: the pmap cache only matters with several
    if stock:
        keys.append(("skrl jax stock pmap", n))
    gloo = n > 1 and device() == "cpu"  # what the shared-memory channel buys, in the same run
    if gloo:
        keys += [(f"{b} gloo", n) for b in BACKENDS]
    runs: dict[tuple[str, int], list[dict[str, float]]] = {k: [] for k in keys}
    started = time.perf_counter()
    for _ in range(repeats):  # interleaved: every configuration sees the same machine load
        for backend, k in keys:
            if backend == "skrl jax stock pmap":
                runs[backend, k].append(one_run("skrl jax", k, {**STOCK_PMAP, **(GLOO if gloo else {})}))
            elif backend.endswith(" gloo"):
                runs[backend, k].append(one_run(backend.removesuffix(" gloo"), k, GLOO))
            else:
                runs[backend, k].append(one_run(backend, k))

    def col(key: tuple[str, int], field: str) -> list[float]:
        return [r[field] for r in runs[key]]

    def whole(key: tuple[str, int]) -> str:
        s = statistics.median(col(key, "summary_s_per_iteration"))
        r = statistics.median(col(key, "summary_env_steps_per_s"))
        return f"whole run incl. warm-up (summary.json): {s:.3g} s/it, {r:,.0f} env-steps/s"

    envs = num_envs()
    figures: list[Figure] = []
    for backend in BACKENDS:
        one = (backend, 1)
        figures += [
            Figure(f"{backend}, 1 rank: s/iteration", "s", col(one, "s_per_iteration"), note=whole(one)),
            Figure(f"{backend}, 1 rank: env-steps/s", "steps/s", col(one, "env_steps_per_s")),
        ]
        if n > 1:
            many = (backend, n)
            figures += [
                Figure(
                    f"{backend}, {n} ranks: s/iteration", "s", col(many, "s_per_iteration"),
                    f"{backend}, 1 rank", col(one, "s_per_iteration"), goal="1× ideal", note=whole(many),
                    bounds=(1.0, None),  # each rank does one rank's work per iteration
                ),
                Figure(
                    f"{backend}, {n} ranks: env-steps/s", "steps/s", col(many, "env_steps_per_s"),
                    f"{backend}, 1 rank", col(one, "env_steps_per_s"), goal=GOALS.get(backend, f"{n}× ideal"),
                    bounds=(None, float(n)),  # n ranks step at most n times the environments of one
                ),
            ]  # fmt: skip
            if gloo:
                figures.append(
                    Figure(
                        f"{backend}, {n} ranks, shared-memory collectives: env-steps/s", "steps/s",
                        col(many, "env_steps_per_s"), f"{n} ranks, all collectives on gloo",
                        col((f"{backend} gloo", n), "env_steps_per_s"), goal="> 1×",
                        note=f"gloo: {whole((f'{backend} gloo', n))}",
                    )
                )  # fmt: skip
    if stock:
        key = ("skrl jax stock pmap", n)
        # Both sides on gloo where the shared-memory channel applies, so the ratio is the cache's alone.
        cached = col(("skrl jax gloo", n) if gloo else ("skrl jax", n), "s_per_iteration")
        figures.append(
            Figure(
                f"skrl jax, {n} ranks, cached reductions: s/iteration", "s", cached,
                "stock skrl per-call pmap", col(key, "s_per_iteration"), goal="≤ 0.33× (3× faster)",
                note=f"stock: {whole(key)}",
            )
        )  # fmt: skip
    extra = {
        "warmup_iterations": WARMUP,
        "measured_iterations": MEASURED,
        "num_envs_per_rank": envs,
        "elapsed_s": time.perf_counter() - started,
        "summaries": {f"{b} x{k}": runs[b, k] for b, k in keys},
    }
    save("training", figures, extra)
    return figures
