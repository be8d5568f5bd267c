"""Isaac Lab end to end: ``mgpu train`` with 2 CPU ranks on Isaac Lab's own training code path.

For each library Isaac Lab's multi-GPU launcher drives (rsl_rl, skrl torch, skrl JAX, rl_games):
``Isaac-Cartpole-Direct``, kitless Newton physics (``presets=newton_mjwarp``), 64 environments per
rank, 3 iterations. Each run must exit 0 and leave Isaac Lab's run folder with a TensorBoard event
file, a checkpoint and mgpu's ``summary.json`` (world size 2, equal parameter checksums).

Runs only where Isaac Lab is importable (Python 3.12 with ``.[isaaclab]``; ``.ci/run`` builds that
environment); skipped elsewhere. The robot and ground-plane files come from
``python -m isaaclab_mgpu.tools.isaac_assets`` unless ``ISAACSIM_ASSET_ROOT`` is already set. The first
run on a machine compiles Warp's kernels (minutes on CPU); later runs load them from Warp's cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from training_helpers import child_env

from isaaclab_mgpu.launcher import isaac_preflight as preflight

pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 12) or preflight._package_dir("isaaclab_rl") is None,
    reason="Isaac Lab is not installed here (Python 3.12 with .[isaaclab]; see README)",
)

LIBRARIES = {
    "rsl_rl": ["--rl_library", "rsl_rl"],
    "skrl": ["--rl_library", "skrl"],
    "skrl_jax": ["--rl_library", "skrl", "--ml_framework", "jax"],
    "rl_games": ["--rl_library", "rl_games", "agent.params.config.minibatch_size=2048"],
}
COMMAND = ["--device", "cpu", "--nproc_per_node", "2", "--task", "Isaac-Cartpole-Direct", "--num_envs", "64",
           "--max_iterations", "3", "presets=newton_mjwarp"]  # fmt: skip
#: One run takes 1-2 minutes on a quiet 2-core machine once Warp's kernels are cached; the first
#: compiles them (several minutes), and CI machines are shared.
TIMEOUT_S = 1800


@pytest.fixture(scope="session")
def asset_root(tmp_path_factory) -> str:
    """A local Isaac asset root with the cartpole robot and ground plane."""
    given = os.environ.get("ISAACSIM_ASSET_ROOT")
    if given:
        return given
    root = tmp_path_factory.mktemp("isaac_assets")
    build = [sys.executable, "-m", "isaaclab_mgpu.tools.isaac_assets", str(root)]
    subprocess.run(build, check=True, timeout=300)
    return str(root)


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_isaac_cartpole_on_two_cpu_ranks(library, asset_root, tmp_path):
    env = child_env(tmp_path)
    env["ISAACSIM_ASSET_ROOT"] = asset_root
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", *COMMAND, *LIBRARIES[library]]
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    wall = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    summaries = sorted((tmp_path / "logs").glob("*/*/*/summary.json"))
    assert len(summaries) == 1, out[-3000:]
    run_dir = summaries[0].parent
    assert run_dir.parts[-3] == library.split("_jax")[0]  # logs/<library>/<experiment>/<run>
    s = json.loads(summaries[0].read_text())
    assert s["world_size"] == 2 and s["checksums_equal"] is True, s
    assert s["iterations"] == 3 and s["exit_status"] == 0 and s["run_dir"] == str(run_dir)
    assert len(set(s["checksums"]["start"])) == 1 and s["checksums"]["start"] != s["checksums"]["end"]
    assert s["env_steps_per_s"]["total"] > 0 and len(s["env_steps_per_s"]["per_rank"]) == 2
    assert (run_dir / "run.json").is_file() and (run_dir / "params" / "agent.yaml").is_file()
    assert (run_dir / "rank_1" / "params" / "env.yaml").is_file()
    assert list(run_dir.rglob("events.out.tfevents.*")), sorted(run_dir.rglob("*"))
    assert s["checkpoint"] and Path(s["checkpoint"]).is_file() and run_dir in Path(s["checkpoint"]).parents
    rate = s["env_steps_per_s"]["total"]
    print(f"{library}: {wall:.0f} s wall, {s['s_per_iteration']} s/it, {rate:.0f} env-steps/s")
