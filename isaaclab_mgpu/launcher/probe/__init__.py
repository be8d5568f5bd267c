"""``mgpu probe-nccl``: tell a communication hang from a task bug, with the training launcher's core.

The launcher side: :mod:`.config` (the options, pure), :mod:`.run` (one supervised launch per world
size and GPU pair, the hang diagnosis; :func:`.run.probe_nccl` returns a :class:`.run.ProbeSummary`),
:mod:`.results` (per-rank files → table rows, statuses, the exit code; pure) and :mod:`.bisect`
(which documented NCCL variable fixes a failing launch). Each rank runs
:mod:`isaaclab_mgpu.rank.probe_worker` and reports through
:mod:`isaaclab_mgpu.contract.probe_channel`, a side channel outside the communicator under test.
:mod:`isaaclab_mgpu.report.probe` renders the probe's notes; :func:`isaaclab_mgpu.launch.probe_nccl`
joins the two. Importing this package imports no torch.
"""
