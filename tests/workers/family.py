"""Each rank forks a grandchild and a setsid escapee (FAMILY_STUBBORN=1: the escapee ignores SIGTERM)."""

import os

from _common import record, sleep_forever, spawn

record()
spawn("grandchild")
spawn("escapee", setsid=True, stubborn=os.environ.get("FAMILY_STUBBORN") == "1")
sleep_forever()
