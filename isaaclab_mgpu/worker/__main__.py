"""``python -m isaaclab_mgpu.worker``: one rank (the package import already set Warp's flag)."""

from . import main

main()
