"""Set-up tools run by hand or by CI, outside a launch (``python -m isaaclab_mgpu.tools.isaac_assets``).

Neither side: a tool imports nothing of the launcher or rank side.
"""
