"""The per-rank training worker: ``python -m isaaclab_mgpu.worker`` (started by torchrun or jaxrun).

Importing this package first sets Warp's ``config.enable_backward = False`` (before any task,
back-end or Isaac Lab module can create a Warp module); everything heavy is imported afterwards.

Command line (see ``--help`` and ``docs/training.md``)::

    python -m isaaclab_mgpu.worker --rl_library rsl_rl|skrl [--ml_framework torch|jax]
        [--device cpu|cuda|cuda:N] [--task cartpole|pendulum|Isaac-...] [--num_envs N]
        [--max_iterations N] [--seed S] [--save_interval N] [--resume [PATH]]
        [--run_name X] [--experiment_name X] [--log_root DIR] [env.F=V agent.F=V ...] --distributed

Unknown options exit with status 2 and one line on stderr. The process entry point is wrapped
in torch elastic's ``@record``, so a failing rank's traceback lands in ``TORCHELASTIC_ERROR_FILE``
and the launcher names it as the root cause.
"""

from ._warp import disable_warp_backward

disable_warp_backward()

from .main import main, run_argv, train_in_process  # noqa: E402  (after the Warp flag, on purpose)

__all__ = ["main", "run_argv", "train_in_process"]
