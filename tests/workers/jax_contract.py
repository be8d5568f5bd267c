"""A fake skrl JAX rank: checks the launcher's environment contract without importing jax.

Writes the variables it saw to MGPU_TEST_PIDS/env_<rank>.json; exits 4 when one is missing or
inconsistent; ``--fail_rank R`` makes rank R exit 5 once both ranks are up; ``--sleep`` sleeps.
"""

import json
import os
import sys

from _common import record, sleep_forever, wait_for_pids

KEYS = (
    "JAX_LOCAL_RANK",
    "JAX_RANK",
    "JAX_WORLD_SIZE",
    "JAX_COORDINATOR_ADDR",
    "JAX_COORDINATOR_PORT",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "TORCHELASTIC_ERROR_FILE",
    "MGPU_RUN_STAMP",
)
env = {k: os.environ.get(k) for k in KEYS}
record()
with open(os.path.join(os.environ["MGPU_TEST_PIDS"], f"env_{env['JAX_RANK']}.json"), "w") as f:
    json.dump({"env": env, "argv": sys.argv[1:]}, f)
if None in env.values() or env["JAX_RANK"] != env["RANK"] or env["JAX_WORLD_SIZE"] != env["WORLD_SIZE"]:
    sys.exit(4)
args = sys.argv[1:]
if "--fail_rank" in args and args[args.index("--fail_rank") + 1] == env["RANK"]:
    wait_for_pids(2)
    print(f"rank {env['RANK']} failing on purpose", file=sys.stderr, flush=True)
    sys.exit(5)
if "--sleep" in args or "--fail_rank" in args:
    sleep_forever()
print(f"jax rank {env['RANK']} ok", flush=True)
