"""Tools run by hand or by CI, outside a launch: neither side of a run.

:mod:`.skills_check` is ``mgpu skills check``; :mod:`.isaac_assets` builds offline Isaac Lab assets.
A tool imports nothing of the launcher or the rank side.
"""
