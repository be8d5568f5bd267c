"""`mgpu skills check`: the checker catches each kind of drift, and this repository passes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from isaaclab_mgpu.cli import app, main
from isaaclab_mgpu.cli.validate import parse_command_line
from isaaclab_mgpu.tools.skills_check import check_tree, command_lines

ROOT = Path(__file__).resolve().parent.parent

GOOD_SKILL = """---
name: demo-skill
description: Launches demo training on several GPUs. Use when a person asks to scale a run.
license: BSD-3-Clause
metadata:
  author: isaaclab-mgpu
  audience: users and coding agents
  status: stable
  owners: [isaaclab-mgpu maintainers]
---
# Demo

## When To Use
Scaling.

## Workflow
```bash
mgpu dry-run --num_gpus 2 --task=cartpole
mgpu train --device cpu --num-gpus 2 \\
    --max_iterations 5
```
See [the reference](reference.md) and `skills/demo-skill/evaluations.md`.

## Validation
Checksums equal.

## Maintenance
Keep it true.

## References
- `docs/`
"""

EVALUATIONS = "".join(
    f"## Scenario {i}\n- Query: q{i}\n- Expected behavior: e\n- Known failure modes: f\n" for i in range(3)
) + ("## Scenario 3\n- Query: unrelated\n- Expected behavior: must not route here\n"
     "- Known failure modes: f\n")  # fmt: skip


def parse(argv):
    return parse_command_line(app, argv)


def make_tree(tmp_path: Path, skill: str = GOOD_SKILL, evaluations: str = EVALUATIONS) -> Path:
    folder = tmp_path / "skills" / "demo-skill"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(skill)
    (folder / "reference.md").write_text("# Reference\n")
    (folder / "evaluations.md").write_text(evaluations)
    (tmp_path / "docs").mkdir()
    return tmp_path


def messages(root: Path) -> list[str]:
    return [p.message for p in check_tree(root, parse)]


def test_good_skill_passes(tmp_path):
    assert messages(make_tree(tmp_path)) == []


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("name: demo-skill", "name: Demo_Skill", "must match"),
        ("name: demo-skill", "name: other", "differs from its folder"),
        ("Use when a person", "Handy if a person", "Use when"),
        ("description: Launches", "description: I launch", "third person"),
        ("license: BSD-3-Clause\n", "", "license is missing"),
        ("  owners: [isaaclab-mgpu maintainers]\n", "", "metadata.owners is missing"),
        ("## Validation", "## Checks", "'## Validation' is missing"),
        ("--num-gpus 2", "--num-gpu 2", "did you mean --num_gpus"),
        ("--task=cartpole", "--task=cartpol", "did you mean cartpole?"),
        ("--task=cartpole", "--task=cartpole --nnodes 0", "--nnodes '0' must be a positive integer"),
        ("mgpu dry-run", "mgpu dryrun", "no such command"),
        ("mgpu dry-run --num_gpus 2", "uv run mgpu dry-run --num_gpus 2", "one command style"),
        (
            "## Validation\nChecksums",
            "## Validation\nRun `uv run mgpu runs --last`. Checksums",
            "one command style",
        ),
        ("(reference.md)", "(missing.md)", "link target missing.md does not exist"),
        (
            "`skills/demo-skill/evaluations.md`",
            "`skills/demo-skill/gone.md`",
            "path skills/demo-skill/gone.md",
        ),
    ],
)
def test_each_drift_is_caught(tmp_path, old, new, expected):
    assert old in GOOD_SKILL
    found = messages(make_tree(tmp_path, GOOD_SKILL.replace(old, new)))
    assert any(expected in m for m in found), found


def test_long_body_is_caught(tmp_path):
    found = messages(make_tree(tmp_path, GOOD_SKILL + "line\n" * 500))
    assert any("keep it under 500" in m for m in found)


def test_evaluations_need_scenarios_fields_and_a_negative(tmp_path):
    few = "## One\n- Query: q\n- Expected behavior: e\n- Known failure modes: f\n"
    found = messages(make_tree(tmp_path, evaluations=few.replace("- Known failure modes: f\n", "")))
    assert any("write at least 4" in m for m in found)
    assert any("lacks 'Known failure modes'" in m for m in found)
    assert any("must NOT route" in m for m in found)


def test_command_lines_join_continuations_and_skip_illustrations():
    text = (
        "```bash\n$ uv run mgpu train --device cpu \\\n    --num_gpus 2\nmgpu train <args>\n```\n"
        "Use `mgpu --help`.\n"
    )
    assert list(command_lines(text)) == [
        (2, ["train", "--device", "cpu", "--num_gpus", "2"]),
        (6, ["--help"]),
    ]


def test_arguments_after_double_dash_are_not_judged():
    assert parse(["train", "--device", "cpu", "--", "--anything-goes"]) is None
    assert parse(["skills", "check", "."]) is None
    assert parse(["--version"]) is None


def test_cli_exit_codes(tmp_path, capsys):
    assert main(["skills", "check", str(make_tree(tmp_path))]) == 0
    (tmp_path / "docs" / "x.md").write_text("`mgpu train --nproc_per_nod 2`\n")
    assert main(["skills", "check", str(tmp_path)]) == 1
    assert "--nproc_per_nod" in capsys.readouterr().err
