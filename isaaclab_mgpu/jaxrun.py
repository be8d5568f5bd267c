"""``python -m isaaclab_mgpu.jaxrun``: mgpu's JAX launcher (:mod:`isaaclab_mgpu.launcher.jaxrun`)."""

import sys

from isaaclab_mgpu.launcher.jaxrun import main

if __name__ == "__main__":
    sys.exit(main())
