"""The launcher side: code that runs in the ``mgpu`` process (and in mgpu's JAX launcher).

A launch flows spec → resolve → build → supervise: :mod:`.spec` (the frozen, validated request),
:mod:`.resolve` (the one place that probes this machine), :mod:`.build` (pure: argv and
environment), then :mod:`.attempts` and :mod:`.supervise` (the run). One row per module:
docs/architecture.md, "Launcher side".

The rules it keeps (docs/architecture.md, "The rules"): nothing here prints, the command layer
(:mod:`isaaclab_mgpu.launch`) hands results to :mod:`isaaclab_mgpu.report`; the rank side never
imports this package; torch, jax, warp, rsl_rl and skrl are never imported on the path of
``--help``, ``dry-run`` or ``check-env`` (torch is loaded only by :mod:`.peers`' store client,
when a multi-node ``mgpu train`` first connects, and by :mod:`.logspecs`, which only the torchrun
process loads).
"""
