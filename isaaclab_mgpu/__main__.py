"""``python -m isaaclab_mgpu`` is ``mgpu``."""

import sys

from isaaclab_mgpu.cli import main

sys.exit(main())
