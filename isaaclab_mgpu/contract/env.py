"""The environment variables that cross from the launcher to the ranks: one definition each.

The launcher (``mgpu``) sets them on the command it starts; torchrun or mgpu's JAX launcher passes
them on to every rank; the rank side and the watchdog read them. Torch elastic's own variables
(``LOCAL_RANK``, ``RANK``, ``WORLD_SIZE``, ``TORCHELASTIC_*``) are torch's contract, named here
only where mgpu reads them.
"""

from __future__ import annotations

#: The run's marker: every process of a launch carries it, so leftovers can be found and killed.
RUN_ID = "MGPU_RUN_ID"

#: The run folder's timestamp, chosen once by the launcher so every rank names the same folder.
RUN_STAMP = "MGPU_RUN_STAMP"

#: Node-local folder of the ranks' progress reports (absent: progress reports are off).
PROGRESS_DIR = "MGPU_PROGRESS_DIR"

#: Seconds without progress after which the node's supervisor calls a rank stalled (0: off).
STALL_TIMEOUT = "MGPU_STALL_TIMEOUT"

#: Seconds a rank may take to reach its first iteration before it is called stalled.
STARTUP_TIMEOUT = "MGPU_STARTUP_TIMEOUT"

#: Set to 1 to run skrl JAX's own per-call ``jax.pmap`` instead of mgpu's cached one (for comparison).
SKRL_JAX_STOCK_PMAP = "MGPU_SKRL_JAX_STOCK_PMAP"

#: Set to ``gloo`` to keep every collective of CPU ranks on gloo, none through shared memory.
CPU_COLLECTIVES = "MGPU_CPU_COLLECTIVES"

#: Ranks on this node (torchrun and mgpu's JAX launcher set it); equal to the world size on one node.
LOCAL_WORLD_SIZE = "LOCAL_WORLD_SIZE"

#: The run folder node 0's launcher created (restarts and requeues reuse it); see :mod:`.resume`.
RUN_DIR = "MGPU_RUN_DIR"

#: What rank 0 continues from: a checkpoint file, or a run folder (its newest checkpoint).
RESUME = "MGPU_RESUME"

#: This launch's attempt number: 0 first, 1 for mgpu's first restart, ...
ATTEMPT = "MGPU_ATTEMPT"

#: A file whose existence asks every rank to checkpoint at the next iteration boundary and stop.
CHECKPOINT_REQUEST = "MGPU_CHECKPOINT_REQUEST"

#: A file where a rank 0 that names its own run folder (Isaac Lab's) writes that folder's path.
RUN_DIR_REPORT = "MGPU_RUN_DIR_REPORT"

#: ``--keep_checkpoints N``: rank 0 keeps the newest N checkpoints, deleting older ones (absent: all).
KEEP_CHECKPOINTS = "MGPU_KEEP_CHECKPOINTS"

#: Torch elastic's per-rank error file (``@record`` writes a failing rank's traceback there).
ERROR_FILE = "TORCHELASTIC_ERROR_FILE"

#: ``--simulate_fault``: the fault a rank is to meet (``kill@5,rank=1``; :mod:`.faults`).
SIMULATE_FAULT = "MGPU_SIMULATE_FAULT"

#: The PID of the rank's node's ``mgpu`` (its supervisor), which a simulated requeue signals.
LAUNCHER_PID = "MGPU_LAUNCHER_PID"

#: ``--requeue_signal`` without ``SIG`` (``USR1``), for a simulated requeue.
REQUEUE_SIGNAL = "MGPU_REQUEUE_SIGNAL"

# -- read by mgpu itself from the user's environment -----------------------------------------------

#: Set to 1 for ``--debug``'s tracebacks on every ``mgpu`` command.
DEBUG = "MGPU_DEBUG"

#: Set to 1 to stop a run's processes one by one instead of by process group (as where ``killpg``
#: is missing); the tests use it to prove that path.
NO_KILLPG = "MGPU_NO_KILLPG"
