"""``python -m isaaclab_mgpu`` is ``mgpu``."""

import sys

from .cli import main

sys.exit(main())
