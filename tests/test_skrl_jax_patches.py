"""The skrl-JAX patches and their benchmark-only switch ``MGPU_SKRL_JAX_STOCK_PMAP``.

Each case runs in a fresh interpreter: the patches change skrl's modules for the whole process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json
import jax
import skrl.agents.jax.ppo.ppo as ppo
import skrl.models.jax.base as base
original = base.Model.reduce_parameters
from isaaclab_mgpu.rank.patches.skrl import _PSUM, _same_code, patch_skrl_jax
patch_skrl_jax()
lambdas = [c for c in ppo.PPO.update.__code__.co_consts if hasattr(c, "co_code")]
make = lambda: (lambda x: jax.lax.psum(x, "i"))  # equal code, fresh function each call
first, second = ppo.jax.pmap(make(), axis_name="i"), ppo.jax.pmap(make(), axis_name="i")
print(json.dumps({
    "pmap_cached": first is second,
    "reduce_replaced": base.Model.reduce_parameters is not original,
    "multihost_imported": hasattr(jax.experimental, "multihost_utils"),
    # fix 4 recognises skrl's KL all-reduce lambda by its code, and nothing else
    "kl_lambda_known": [_same_code(c, _PSUM.__code__) for c in lambdas],
    "pmean_unknown": not _same_code((lambda x: jax.lax.pmean(x, "i")).__code__, _PSUM.__code__),
}))
"""


@pytest.mark.parametrize("stock", [False, True], ids=["patched", "stock-pmap"])
def test_stock_pmap_switch_leaves_out_only_the_pmap_cache(stock):
    env = {k: v for k, v in os.environ.items() if k != "MGPU_SKRL_JAX_STOCK_PMAP"}
    if stock:
        env["MGPU_SKRL_JAX_STOCK_PMAP"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {
        "pmap_cached": not stock,
        "reduce_replaced": not stock,
        "multihost_imported": True,
        "kl_lambda_known": [True],
        "pmean_unknown": True,
    }
