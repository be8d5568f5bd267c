"""One function chooses the checkpoint a resume continues from (no training, no torch).

:func:`isaaclab_mgpu.contract.resume.newest_whole` is that choice for the launcher, the built-in
worker's rank 0 and an Isaac Lab rank 0. Its unit tests use real files in a temporary folder; the
package test reads the package's source (its AST) and fails when a second function lists, orders or
picks among checkpoint files, or matches checkpoint names itself.
"""

from __future__ import annotations

import ast
import os
import zipfile
from pathlib import Path

import pytest

import isaaclab_mgpu
from isaaclab_mgpu.contract import resume
from isaaclab_mgpu.contract.errors import UsageError

PACKAGE = Path(isaaclab_mgpu.__file__).parent
#: Where checkpoint names are defined and the checkpoints of a folder listed and chosen.
HOME = {PACKAGE / "contract" / "resume.py", PACKAGE / "contract" / "layout.py"}


def _zip(path: Path) -> Path:
    """A whole checkpoint: torch.save writes a zip archive."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("data.pkl", path.name)
    return path


def _worker(folder: Path, n: int) -> Path:
    """A built-in worker's checkpoint ``model_<n>.pt`` with its JSON."""
    path = _zip(resume.checkpoint_path(folder, n))
    resume.write_meta(path, resume.CheckpointMeta(n, "rsl_rl", "torch", "cartpole", 1, 100))
    return path


def _cut(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def _age(path: Path, seconds_ago: float) -> None:
    at = path.stat().st_mtime - seconds_ago
    os.utime(path, (at, at))


def test_the_highest_iteration_is_chosen_never_the_newest_file(tmp_path):
    paths = {n: _worker(tmp_path, n) for n in (2, 9, 10)}
    _age(paths[10], 3600)  # written before the others (copied back, a restored backup)
    _age(paths[9], 1800)
    assert resume.newest_whole(tmp_path) == resume.Pick(tmp_path, paths[10])  # 10 > 9 (not as text)


@pytest.mark.parametrize(
    ("library", "names", "newest"),
    [
        ("rsl_rl", ["model_5.pt", "model_40.pt", "model_300.pt"], "model_300.pt"),
        ("skrl", ["checkpoints/agent_64.pt", "checkpoints/agent_128.pt", "checkpoints/best_agent.pt"],
         "checkpoints/agent_128.pt"),
        ("skrl", ["checkpoints/agent_64.pickle", "checkpoints/agent_1024.pickle"],
         "checkpoints/agent_1024.pickle"),
        ("rl_games", ["nn/last_cartpole_ep_50_rew_3.1.pth", "nn/last_cartpole_ep_100_rew_2.0.pth",
                      "nn/cartpole.pth"], "nn/last_cartpole_ep_100_rew_2.0.pth"),
    ],
)  # fmt: skip
def test_an_isaac_lab_library_s_checkpoint_is_chosen_by_its_counter(tmp_path, library, names, newest):
    for age, name in enumerate(names):
        _age(_zip(tmp_path / name), 60.0 * (len(names) - age))
    _age(tmp_path / newest, 7200)  # the oldest file of all
    assert resume.newest_whole(tmp_path, library).checkpoint == tmp_path / newest


def test_torn_ones_are_passed_over_with_one_warning_and_none_whole_is_one_error(tmp_path):
    for n in (1, 2, 3, 4):
        _worker(tmp_path, n)
    _cut(tmp_path / "model_4.pt")
    resume.meta_path(tmp_path / "model_3.pt").write_text("{not json")
    pick = resume.newest_whole(tmp_path)
    assert pick.checkpoint == tmp_path / "model_2.pt" == pick.taken()
    assert [p.name for p, _ in pick.passed] == ["model_4.pt", "model_3.pt"]
    warning = pick.warning()
    assert warning is not None and warning.startswith("warning: passed over")
    assert "model_4.pt (cut short)" in warning and warning.endswith(str(tmp_path / "model_2.pt")), warning

    refuses = resume.newest_whole(tmp_path, loads=lambda p: None if p.name == "model_1.pt" else "no")
    assert refuses.checkpoint == tmp_path / "model_1.pt"  # rank 0's own load check passes over model_2
    assert [p.name for p, _ in refuses.passed] == ["model_4.pt", "model_3.pt", "model_2.pt"]

    for n in (1, 2):
        _cut(tmp_path / f"model_{n}.pt")
    none = resume.newest_whole(tmp_path)
    assert none.checkpoint is None and none.warning() is None
    with pytest.raises(UsageError, match=r"no whole checkpoint there \(model_4\.pt, model_3\.pt, model_2"):
        none.taken()


def test_an_empty_folder_a_symlink_and_other_names_give_nothing(tmp_path):
    (tmp_path / "model_x.pt").write_text("")
    (tmp_path / "model_3.pt.tmp").write_text("")
    elsewhere = _worker(tmp_path / "elsewhere", 9)
    (tmp_path / "model_9.pt").symlink_to(elsewhere)
    pick = resume.newest_whole(tmp_path)
    assert pick == resume.Pick(tmp_path, None) and pick.taken() is None
    assert resume.newest_whole(tmp_path / "missing") == resume.Pick(tmp_path / "missing", None)


# --- one chooser in the package ------------------------------------------------------------------

#: Substrings of a checkpoint file name (the built-in worker's and each library's).
_NAMES = ("model_", "agent_", "last_", ".pt", ".pth", ".pickle")
#: Calls that match or list file names by a pattern.
_MATCHERS = {"compile", "match", "fullmatch", "search", "glob", "rglob", "iglob", "fnmatch", "filter"}
#: The listing function and the names only its module may import.
_LISTER = "checkpoints"


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _called(call: ast.Call) -> str | None:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None


def _is_lister(call: ast.Call, path: Path) -> bool:
    """A call of ``resume.checkpoints`` (or ``checkpoints`` inside its own module)."""
    f = call.func
    if isinstance(f, ast.Attribute):
        return f.attr == _LISTER and isinstance(f.value, ast.Name) and f.value.id == "resume"
    return isinstance(f, ast.Name) and f.id == _LISTER and path.name == "resume.py"


def _second_choosers(path: Path, source: str | None = None) -> list[str]:
    """Where ``path`` (or ``source`` as if it were there) lists, orders or picks among checkpoint
    files outside the one chooser."""
    tree = ast.parse(path.read_text() if source is None else source, str(path))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    rel = path.relative_to(PACKAGE.parent)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "isaaclab_mgpu.contract.resume":
            found += [f"{rel}:{node.lineno} imports {a.name}" for a in node.names if a.name == _LISTER]
        if not isinstance(node, ast.Call):
            continue
        if path not in HOME and _called(node) in _MATCHERS:
            names = [s for s in _strings(node) if any(n in s for n in _NAMES)]
            found += [f"{rel}:{node.lineno} matches checkpoint names ({s!r})" for s in names]
        if not _is_lister(node, path):
            continue
        up = parents.get(node)
        owner = up
        while owner is not None and not isinstance(owner, ast.FunctionDef):
            owner = parents.get(owner)
        if owner is not None and owner.name == "newest_whole" and path.name == "resume.py":
            continue  # the chooser
        if isinstance(up, ast.Call) and _called(up) == "prune" and up.args and up.args[0] is node:
            continue  # --keep_checkpoints deletes by the same listing
        if isinstance(up, ast.UnaryOp | ast.BoolOp) or (isinstance(up, ast.If) and up.test is node):
            continue  # "does the folder hold any?": a yes or no, no choice
        found.append(f"{rel}:{node.lineno} uses the checkpoint list itself (choose with resume.newest_whole)")
    return found


def test_one_function_chooses_the_checkpoint_to_resume_from():
    found = [f for path in sorted(PACKAGE.rglob("*.py")) for f in _second_choosers(path)]
    assert not found, "\n".join(found)


def test_the_package_check_finds_a_second_chooser():
    """The check above can fail: a twin of the chooser, as the rank paths once had, is found."""
    source = (
        "import re\nfrom isaaclab_mgpu.contract import resume\n"
        "def newest(folder):\n    found = resume.checkpoints(folder)\n"
        "    return found[-1][1] if found else None\n"
        "_AGENT = re.compile(r'^agent_(\\d+)\\.pt$')\n"
    )
    found = sorted(_second_choosers(PACKAGE / "rank" / "twin.py", source))
    assert len(found) == 2, found
    assert "twin.py:4 uses the checkpoint list" in found[0] and "twin.py:6 matches" in found[1], found
