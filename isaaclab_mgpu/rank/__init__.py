"""The rank side: code that runs in each training (or probe) rank, started by torchrun or jaxrun.

- :mod:`.worker` — the built-in training worker (public entry ``python -m isaaclab_mgpu.worker``),
  with :mod:`.backends` (rsl-rl, skrl torch, skrl JAX) on the embedded :mod:`.tasks`;
- :mod:`.isaac` — Isaac Lab tasks on Isaac Lab's own training code path, with :mod:`.isaac_resume`
  and :mod:`.isaac_drift`; :mod:`.drift` — the ranks' drift check, shared by both paths;
- :mod:`.patches` — every patch of an upstream library, one module per library;
- :mod:`.localcomm` — the CPU ranks' small collectives through shared memory; :mod:`.title` — each
  rank's name in ``ps``; :mod:`.probe_worker` — ``probe-nccl``'s per-rank program;
- :mod:`.console` — everything a rank prints (this side never imports :mod:`isaaclab_mgpu.report`).

This side imports :mod:`isaaclab_mgpu.contract` and never :mod:`isaaclab_mgpu.launcher`, nor the
launcher side this one: what both run is in the contract. The heavy libraries (torch, jax, warp,
rsl_rl, skrl, Isaac Lab) are imported here only.
"""
