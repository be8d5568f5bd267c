"""A rank that records its PID and sleeps; ``--stubborn`` ignores SIGINT and SIGTERM."""

import os
import signal
import sys
import time

if "--stubborn" in sys.argv:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
folder = os.environ["BENCH_PID_DIR"]
with open(os.path.join(folder, f"{os.getpid()}.pid"), "w") as f:
    f.write(os.environ.get("RANK", "?"))
while True:
    time.sleep(0.2)
