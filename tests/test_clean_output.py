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
