"""The launcher side: code that runs in the ``mgpu`` process (and in mgpu's JAX launcher).

A launch flows spec → resolve → build → supervise:

- the request: :mod:`.spec` (the frozen, validated launch spec), :mod:`.options` (the one form of
  an option, from which the Typer signature comes), :mod:`.forwarded` (the worker's own parser, run
  before spawning), :mod:`.isaac_preflight` (a bad Isaac Lab request refused
  before spawning), :mod:`.cluster` (what SLURM's or Kubernetes' variables fill in);
- this machine: :mod:`.resolve` (the one place that probes it), :mod:`.nvml` (the NVIDIA driver,
  shared with ``check-env``), :mod:`.workarounds` (NCCL workarounds saved for it);
- the command: :mod:`.build` (pure: argv and environment), :mod:`.pipeline` (spec → resolve →
  build as one step), :mod:`.jobfiles` (the same spec as a SLURM or Kubeflow job file),
  :mod:`.slurmjobs` and :mod:`.kubectl` (submitting such a job, following and cancelling it);
- the run: :mod:`.continuation` (new run folder or the run it continues), :mod:`.attempts`
  (restarts and requeue), :mod:`.verdicts` (why an attempt failed, whether a restart mends it),
  :mod:`.shrink` (a lost node's restart on fewer nodes), :mod:`.ledger` (the run's one ledger
  writer), :mod:`.supervise` (the process tree, stalls, stragglers, shutdown),
  :mod:`.peers` (the other nodes' ranks through the rendezvous store), :mod:`.jaxrun` (the JAX
  launcher), :mod:`.logspecs` (where torchrun writes each rank's logs: loaded by torchrun);
- other commands: :mod:`.diagnostics` (``check-env``), :mod:`.probe` (``probe-nccl``'s parent
  side), :mod:`.scale`, :mod:`.scale_options` and :mod:`.scale_plot` (``mgpu scale``), :mod:`.runs`
  (reading run folders afterwards), :mod:`.livestacks` (``mgpu stacks``).

torch, jax, warp, rsl_rl and skrl are never imported on the path of ``--help``, ``dry-run`` or
``check-env``; torch is imported here by :mod:`.peers`' store client, loaded when a
multi-node ``mgpu train`` first connects, and by :mod:`.logspecs`, which only the torchrun
process loads. Nothing here prints: the command layer
(:mod:`isaaclab_mgpu.launch`) hands results to :mod:`isaaclab_mgpu.report`. The rank side never
imports this package.
"""
