"""Tools run by hand or by CI, outside a launch: neither side of a run.

- :mod:`.skills_check` — ``mgpu skills check``, the linter that keeps ``skills/`` and ``docs/`` true
  to the real command line (the CLI hands it its parser);
- :mod:`.isaac_assets` — ``python -m isaaclab_mgpu.tools.isaac_assets DIR``, offline Isaac Lab
  assets for the cartpole tasks.

A tool imports nothing of the launcher or the rank side.
"""
