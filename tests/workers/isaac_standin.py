"""A stand-in for an Isaac Lab rank: it names its own run folder, as Isaac Lab does, and keeps it
with mgpu's real rank-0 bookkeeping (:class:`isaaclab_mgpu.rank.isaac.Bookkeeper`), no Isaac Lab
or torch needed.

Rank 0 trains 4 "iterations" in ``logs/rsl_rl/standin/<MGPU_RUN_STAMP>`` (rsl-rl's naming:
``model_<k>.pt`` after iteration ``k + 1``, one every 2 iterations). On attempt 0 it then waits at
iteration 3 for rank 1, which SIGKILLs itself; a restart must be handed that folder to continue
(``MGPU_RESUME``) and goes on from its newest checkpoint to the total. Rank 1 only dies.
"""

import os
import signal
import sys
import time
import zipfile
from pathlib import Path

from isaaclab_mgpu.contract import env, progress, resume
from isaaclab_mgpu.rank import isaac
from isaaclab_mgpu.rank.isaac import Bookkeeper
from isaaclab_mgpu.rank.isaac_resume import Continuation
from isaaclab_mgpu.rank.worker.args import parse_args
from isaaclab_mgpu.rank.worker.rank import RankContext

TOTAL = 4
# Rank 0's account every iteration: these take 0.25 s, where the refresh budget (50 times a refresh's
# cost, a few ms on a loaded machine) assumes real training's seconds.
isaac.REFRESH_BUDGET = 0
rank, attempt = int(os.environ["JAX_RANK"]), resume.attempt()
folder = Path("logs/rsl_rl/standin") / os.environ[env.RUN_STAMP]
reached = folder / "reached_3"
if rank == 1:
    if attempt == 0:
        while not reached.exists():
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGKILL)
    sys.exit(0)

given = os.environ.get(env.RESUME)
if attempt > 0 and given != str(folder.resolve()):
    print(f"restart {attempt} was not handed the run folder: MGPU_RESUME={given}", file=sys.stderr)
    sys.exit(3)
args = parse_args(["--task", "Isaac-Cartpole-Direct", "--rl_library", "rsl_rl", "--device", "cpu",
                   "--max_iterations", str(TOTAL), "--num_envs", "8"])  # fmt: skip
ctx = RankContext(rank=0, local_rank=0, world_size=1, device="cpu", seed=42)
newest = resume.checkpoints(folder, "rsl_rl") if attempt else []
cont = Continuation(os.environ[env.RUN_STAMP], folder=str(folder.resolve()) if newest else None)
book = Bookkeeper(ctx, "torch", cont, TOTAL, "rsl_rl", args)
folder.mkdir(parents=True, exist_ok=True)
book.run_folder(str(folder))
start = newest[-1][0] + 1 if newest else 0
if newest:
    book.resumed(start, str(newest[-1][1]))
book.synced([])
for it in range(start, TOTAL):
    time.sleep(0.25)  # an iteration's work
    book.iteration(8, float(it))
    if (it + 1) % 2 == 0:
        with zipfile.ZipFile(folder / f"model_{it}.pt", "w") as z:  # a whole checkpoint, as torch.save's
            z.writestr("data.pkl", b"x")
        book.saved(it + 1)
    if attempt == 0 and it + 1 == 3:
        reached.touch()
        time.sleep(600)  # until the launcher stops this attempt
book.finished()
book.summary(0)  # rank 0's last account: node 0's mgpu folds it into summary.json
progress.beat(progress.DONE)
