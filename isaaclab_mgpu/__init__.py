"""Launch, supervise and diagnose multi-GPU and multi-node RL training.

The command line is ``mgpu`` (:mod:`isaaclab_mgpu.cli`). Importing this package is cheap: torch,
jax, warp, rsl_rl and skrl are imported only inside the per-rank worker.
"""

__version__ = "0.1.0"
