"""Wall time of ``mgpu check-env`` (no --deep) end to end, as a user runs it.

Target: under one second on a machine without GPUs. Run: ``uv run python benchmarks/check_env_speed.py``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

RUNS = 5


def once(*args: str) -> float:
    code = "import sys; from isaaclab_mgpu.cli import main; sys.exit(main(sys.argv[1:]))"
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, "check-env", *args], capture_output=True, check=False)
    return time.perf_counter() - started


def main() -> None:
    for args in (("--json",), ("--device", "cpu", "--num_gpus", "2")):
        times = sorted(once(*args) for _ in range(RUNS))
        print(f"check-env {' '.join(args)}: median {statistics.median(times):.2f} s, max {times[-1]:.2f} s")


if __name__ == "__main__":
    main()
