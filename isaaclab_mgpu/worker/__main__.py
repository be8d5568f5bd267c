"""``python -m isaaclab_mgpu.worker``: one rank (reaching ``main`` sets Warp's flag first).

A Ctrl-C that reaches the rank while it is still importing ends it quietly with the interrupted
code, not a ``KeyboardInterrupt`` traceback; the training loop later installs its own stop handler.
"""

from isaaclab_mgpu.contract.signals import quiet_interrupts

quiet_interrupts()

from isaaclab_mgpu.rank.worker import main  # noqa: E402  (after the handler: this import is the slow part)

main()
