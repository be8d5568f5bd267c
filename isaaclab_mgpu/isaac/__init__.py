"""Isaac Lab tasks (``--task Isaac-...``) on Isaac Lab's own training code path.

Each rank does what Isaac Lab 3's multi-GPU worker (``isaaclab_rl/entrypoints/multigpu.py``) does
for the chosen library, ``rsl_rl``, ``skrl`` (torch, or JAX through mgpu's JAX launcher) or
``rl_games``: it calls ``isaaclab_rl.entrypoints.dispatch.run_train_cli`` with Isaac Lab's training
command line. Isaac Lab resolves the task and agent configs and Hydra presets, adapts the agent
config to the installed library, launches the simulation, writes its run folder
(``logs/<library>/<experiment>/<timestamp>[...]/``, other ranks in ``rank_<r>/``), its logger's
files, ``params/`` and ``run.json``, and the library's checkpoints.

mgpu adds only what Isaac Lab lacks:

- :mod:`.preflight`: bad requests refused before anything is spawned (Python, installation,
  version, task id, agent config), without importing Isaac Lab;
- :mod:`.compat`: the one module with every patch (CPU ranks over gloo; observation hooks), checked
  against the supported Isaac Lab release;
- :mod:`.rank`: the rank's training call, one run timestamp for every rank, the parameter checksum
  check, a per-iteration hook and ``summary.json``;
- :mod:`.assets`: the cartpole robot and ground plane rebuilt offline from the wheel's golden stages.

Nothing here is imported by ``mgpu --help``, ``dry-run`` or ``check-env``; only :mod:`.preflight`
(standard library only) runs in the launcher.
"""
