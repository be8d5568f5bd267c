"""``mgpu probe-nccl``: tell a communication hang from a task bug, with the training launcher's core.

Launcher side: the parent, in the ``mgpu`` process; each probe rank runs
:mod:`isaaclab_mgpu.rank.probe_worker` on the rank side.

- :mod:`.config` — the probe's options (sizes, world sizes, defaults), pure.
- :mod:`isaaclab_mgpu.rank.probe_worker` — the per-rank program torchrun runs (the rank side).
- :mod:`isaaclab_mgpu.contract.probe_channel` — progress reports (the ranks' stages), result and
  stack files: the side channel that does not go through the communicator under test.
- :mod:`.run` — the parent: one supervised launch per world size (and per GPU pair), hang
  diagnosis, the workaround search; :func:`.run.probe_nccl` returns a :class:`.run.ProbeSummary`.
- :mod:`.results` — per-rank files → table rows, statuses and the exit code (nccl-tests' algbw and
  busbw), pure.
- :mod:`.bisect` — which documented NCCL variable fixes a failing launch, confirmed both ways.

Printing lives in :mod:`isaaclab_mgpu.report.probe` (its ``ProbeDisplay`` renders the
probe's notes, :mod:`isaaclab_mgpu.launcher.notes`); :func:`isaaclab_mgpu.launch.probe_nccl` joins the two.
Importing this package imports no torch.
"""
