"""``python -m isaaclab_mgpu.worker``: one rank (reaching ``main`` sets Warp's flag first)."""

from isaaclab_mgpu.rank.worker import main

main()
