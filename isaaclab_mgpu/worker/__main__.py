"""``python -m isaaclab_mgpu.worker``: one rank (reaching ``main`` sets Warp's flag first)."""

from . import main

main()
