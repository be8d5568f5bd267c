"""Clean output of a real 2-rank CPU run: no control characters in the per-rank log files (skrl's
coloured log lines come out plain), and no Warp "no CUDA driver" warning on CPU ranks."""

from __future__ import annotations

import re

import pytest
from training_helpers import CHEAP, run

pytestmark = pytest.mark.slow

#: Any C0 control character but newline and tab, and DEL (an ANSI escape starts with ESC, 0x1b).
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def test_skrl_cpu_run_logs_hold_no_control_characters(tmp_path):
    code, out = run("skrl_torch", tmp_path, *CHEAP)
    assert code == 0, out[-3000:]
    logs = sorted((tmp_path / "logs" / "mgpu").rglob("*.log"))
    assert {p.name for p in logs} == {"stdout.log", "stderr.log"} and len(logs) == 4, logs
    text = {str(p.relative_to(tmp_path)): p.read_text(errors="replace") for p in logs}
    for name, content in text.items():
        assert not CONTROL.search(content), (name, CONTROL.findall(content)[:5])
        assert "NVIDIA CUDA driver" not in content, name
    assert any("[skrl:INFO]" in content for content in text.values())  # skrl's lines, now plain
    assert "NVIDIA CUDA driver" not in out and "\x1b" not in out, out[-2000:]


def test_a_two_rank_console_holds_only_mgpus_lines_until_the_first_iteration(tmp_path):
    """rsl-rl's model printout, torchrun's OMP_NUM_THREADS banner and torch elastic's log lines stay
    in the per-rank logs; the console up to rank 0's first iteration holds only mgpu's lines, and
    says how many ranks start and the run folder before the launcher's imports (issue 33)."""
    import subprocess
    import sys

    from training_helpers import child_env

    from isaaclab_mgpu.contract.lines import ITERATION, MGPU_LINE

    env = child_env(tmp_path)
    env.pop("OMP_NUM_THREADS")  # so torchrun would print its banner, were mgpu not to set it
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu", "--num_gpus", "2", *CHEAP]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if ITERATION.match(line))
    assert all(MGPU_LINE.match(line) for line in lines[:first]), lines[:first]
    assert all(line.startswith("mgpu: ") for line in done.stderr.splitlines()), done.stderr
    starting = done.stderr.splitlines()[0]
    folder = tmp_path / starting.rsplit("run folder ", 1)[1]
    assert starting.startswith("mgpu: starting 2 rank(s)") and (folder / "summary.json").is_file()
    # What the console left out is in rank 0's own log.
    (log,) = (tmp_path / "logs" / "mgpu").rglob("rank_0/stdout.log")
    assert "Actor Model" in log.read_text()
