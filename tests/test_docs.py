"""Docs and skills stay true: this repository passes `mgpu skills check`, and the command
reference and the migration table cover every option of the real CLI."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer

from isaaclab_mgpu.cli import app
from isaaclab_mgpu.cli.command import normalize_option
from isaaclab_mgpu.cli.validate import parse_command_line
from isaaclab_mgpu.tools.skills_check import check_tree

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ("train", "dry-run", "submit", "check-env", "probe-nccl", "scale")
#: Isaac Lab's train_multigpu launcher flags (DESIGN.md §3).
ISAACLAB_FLAGS = (
    "--rl_library", "--num_gpus", "--nproc_per_node", "--nnodes", "--node_rank", "--coordinator_address",
    "--master_addr", "--master_port", "--rdzv_backend", "--rdzv_endpoint", "--rdzv_id", "--max_restarts",
    "--monitor_interval", "--start_method", "--role", "--tee", "--redirects", "--local_ranks_filter",
    "--log_dir", "--log_all_ranks", "--virtual_local_rank", "--dry_run",
)  # fmt: skip


def test_repository_passes_skills_check():
    problems = check_tree(ROOT, lambda argv: parse_command_line(app, argv))
    assert [str(p) for p in problems] == []
    assert {p.parent.name for p in (ROOT / "skills").glob("*/SKILL.md")} == {
        "multi-gpu-training",
        "nccl-hang-triage",
    }


def _options(name: str) -> list[list[str]]:
    group = typer.main.get_command(app)
    command = group.get_command(typer.Context(group), name)
    return [p.opts for p in command.params if p.opts and p.opts[0].startswith("--") and p.name != "help"]


def _quoted(option: str, text: str) -> bool:
    """True when ``option`` opens a code span of ``text`` as a whole word."""
    return re.search(rf"`{re.escape(option)}(?![\w-])", text) is not None


@pytest.mark.parametrize("name", COMMANDS)
def test_command_reference_lists_every_option(name):
    reference = (ROOT / "docs" / "commands.md").read_text()
    assert f"## `mgpu {name}`" in reference
    missing = [opts[0] for opts in _options(name) if not any(_quoted(o, reference) for o in opts)]
    assert missing == [], f"docs/commands.md lacks {missing} of mgpu {name}"


def test_every_isaaclab_flag_is_accepted_and_in_the_migration_table():
    table = (ROOT / "docs" / "migration.md").read_text()
    accepted = {o for opts in _options("train") for o in opts}
    for flag in ISAACLAB_FLAGS:
        # Declared once; other spellings (hyphens, torchrun's --nproc_per_node) are normalized to it.
        assert "--" + normalize_option(flag[2:]) in accepted, flag
        assert _quoted(flag, table), flag


def test_the_skills_run_statuses_are_the_code_s():
    """One status list: reference.md's table is summary.json's statuses plus what ``mgpu runs``
    derives, its "continues" column is ``--resume auto``'s unfinished set, and SKILL.md names each."""
    from isaaclab_mgpu.contract.summary import STATUSES
    from isaaclab_mgpu.launcher.runs import UNFINISHED

    skill = ROOT / "skills" / "multi-gpu-training"
    reference = (skill / "reference.md").read_text()
    section = reference[reference.index("## Run statuses") :]
    section = section[: section.index("\n## ")]
    rows = [
        [c.strip() for c in line.strip("|").split("|")]
        for line in section.splitlines()
        if re.match(r"\| `\w+` \|", line)
    ]
    assert [r[0].strip("`") for r in rows] == [*STATUSES, "lost", "unknown"]
    assert {r[0].strip("`") for r in rows if r[-1].startswith("yes")} == set(UNFINISHED)
    assert all(r[-1].startswith(("yes", "no")) for r in rows)
    text = (skill / "SKILL.md").read_text()
    assert [s for s in (*STATUSES, "lost", "unknown") if f"`{s}`" not in text] == []
