"""Every rank sleeps until told to stop; the default SIGINT/SIGTERM behaviour ends it."""

from _common import record, sleep_forever

record()
print("sleeping", flush=True)
sleep_forever()
