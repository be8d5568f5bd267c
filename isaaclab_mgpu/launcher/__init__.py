"""The launcher side: code that runs in the ``mgpu`` process (and in mgpu's JAX launcher).

A launch flows spec → resolve → build → supervise: :mod:`.spec` (the frozen, validated request),
:mod:`.resolve` (the one place that probes this machine; NVML through :mod:`.nvml`, which
``check-env`` shares), :mod:`.build` (pure: argv and
environment), :mod:`.forwarded` (the worker's own parser run before spawning), :mod:`.supervise`
(the process tree, stalls, shutdown), :mod:`.diagnostics` (``check-env``), :mod:`.probe`
(``probe-nccl``'s parent side), :mod:`.jaxrun` (the JAX launcher), :mod:`.runs` (reading run
folders afterwards). Nothing here imports torch, jax, warp, rsl_rl or skrl, and nothing here
prints: the command layer (:mod:`isaaclab_mgpu.launch`) hands results to
:mod:`isaaclab_mgpu.report`. The rank side never imports this package.
"""
