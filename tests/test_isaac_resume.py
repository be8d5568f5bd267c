"""Which Isaac Lab run a rank continues and how every rank gets the checkpoint (no Isaac Lab needed).

Real files in a temporary log root, a real torch ``TCPStore`` standing in for torchrun's agent store
(the same class torchrun serves), and TensorBoard's own directory loader for the restart marker.
The Isaac Lab end-to-end resume is in ``test_isaac_e2e.py``.
"""

from __future__ import annotations

import datetime
import json
import socket
import threading
import zipfile
from pathlib import Path

import pytest

from isaaclab_mgpu.contract import env
from isaaclab_mgpu.contract.errors import UsageError
from isaaclab_mgpu.rank import isaac_resume as ir

STAMP = "2026-01-02_03-04-05"


def _zip(path: Path, payload: bytes) -> None:
    """A whole checkpoint: torch.save writes a zip archive."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("data.pkl", payload)


def _run(root: Path, library: str, name: str, files: list[str]) -> Path:
    folder = root / library / "cartpole_direct" / name
    for f in files:
        (folder / f).parent.mkdir(parents=True, exist_ok=True)
        _zip(folder / f, f.encode())
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_request_prefers_the_launcher_then_the_option_then_a_restart_of_this_run():
    assert ir.request(None, {}) is None
    assert ir.request("x", {}) == "x"
    assert ir.request("x", {env.RESUME: "y"}) == "y"
    assert ir.request(None, {env.ATTEMPT: "0"}) is None
    assert ir.request(None, {env.ATTEMPT: "2"}) == ir.THIS_RUN


def test_stamp_of_reads_isaac_lab_folder_names():
    assert ir.stamp_of(Path(STAMP)) == (STAMP, None)
    assert ir.stamp_of(Path(f"{STAMP}_ppo_torch")) == (STAMP, "ppo_torch")
    with pytest.raises(UsageError, match="not an Isaac Lab run folder"):
        ir.stamp_of(Path("cartpole"))


def test_newest_checkpoint_is_the_highest_counter_not_the_last_name(tmp_path):
    folder = _run(tmp_path, "rsl_rl", STAMP, ["model_0.pt", "model_9.pt", "model_10.pt", "model_x.pt"])
    assert ir.locate("rsl_rl", "T", str(folder), STAMP, tmp_path) == (folder, folder / "model_10.pt")
    skrl = _run(
        tmp_path, "skrl", f"{STAMP}_ppo_torch", ["checkpoints/agent_64.pt", "checkpoints/best_agent.pt"]
    )
    assert ir.locate("skrl", "T", str(skrl), STAMP, tmp_path) == (skrl, skrl / "checkpoints/agent_64.pt")
    games = _run(tmp_path, "rl_games", STAMP, ["nn/cartpole.pth", "nn/last_cartpole_ep_9_rew_3.5.pth",
                                                 "nn/last_cartpole_ep_12_rew__-7.1_.pth"])  # fmt: skip
    assert (
        ir.locate("rl_games", "T", str(games), STAMP, tmp_path)[1]
        == games / "nn/last_cartpole_ep_12_rew__-7.1_.pth"
    )
    # a checkpoint file names its run folder (skrl's sit in checkpoints/)
    assert ir.locate("skrl", "T", str(skrl / "checkpoints/agent_64.pt"), STAMP, tmp_path)[0] == skrl


def test_a_restart_continues_the_folder_of_this_launch_stamp(tmp_path):
    assert ir.locate("rsl_rl", "T", ir.THIS_RUN, STAMP, tmp_path) == (None, None)  # died before naming it
    _run(tmp_path, "rsl_rl", "2026-01-02_03-04-04", ["model_5.pt"])
    mine = _run(tmp_path, "rsl_rl", f"{STAMP}_mine", [])
    assert ir.locate("rsl_rl", "T", ir.THIS_RUN, STAMP, tmp_path) == (mine, None)  # no checkpoint yet
    _zip(mine / "model_1.pt", b"x")
    assert ir.locate("rsl_rl", "T", ir.THIS_RUN, STAMP, tmp_path) == (mine, mine / "model_1.pt")


def test_latest_is_the_newest_run_holding_a_checkpoint(tmp_path):
    old = _run(tmp_path, "rsl_rl", "2026-01-01_00-00-00", ["model_3.pt"])
    _run(tmp_path, "rsl_rl", "2026-01-03_00-00-00", [])
    assert ir.locate("rsl_rl", "T", "latest", STAMP, tmp_path) == (old, old / "model_3.pt")
    with pytest.raises(UsageError, match="no skrl run of T with a checkpoint"):
        ir.locate("skrl", "T", "latest", STAMP, tmp_path)
    with pytest.raises(UsageError, match="no such Isaac Lab run folder or checkpoint file"):
        ir.locate("rsl_rl", "T", str(tmp_path / "nope"), STAMP, tmp_path)


def test_plan_names_the_continued_folder_by_its_stamp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = _run(tmp_path / "logs", "rsl_rl", f"{STAMP}_long", ["model_4.pt"])
    cont = ir.plan("rsl_rl", "T", str(folder), "2026-12-31_00-00-00")
    assert (cont.stamp, cont.run_name, cont.folder, cont.experiment) == (
        STAMP,
        "long",
        str(folder),
        "cartpole_direct",
    )
    assert cont.checkpoint == cont.local == str(folder / "model_4.pt")
    assert ir.plan("rsl_rl", "T", None, "now") == ir.Continuation("now")
    _zip(folder / "model_7.pt", b"newer")  # saved by the attempt that began at model_4
    assert ir.plan("rsl_rl", "T", str(folder / "model_4.pt"), "s").checkpoint == str(folder / "model_4.pt")
    restart = ir.plan("rsl_rl", "T", str(folder / "model_4.pt"), "s", restarted=True)
    assert restart.checkpoint == str(folder / "model_7.pt") and restart.folder == str(folder)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_rank_0_hands_its_checkpoint_to_the_other_ranks_through_torchrun_store(tmp_path, monkeypatch):
    import torch.distributed as dist

    monkeypatch.chdir(tmp_path)
    folder = _run(tmp_path / "logs", "skrl", f"{STAMP}_ppo_torch", ["checkpoints/agent_64.pt"])
    _zip(folder / "checkpoints/agent_64.pt", bytes(range(256)) * 1000)
    port = _free_port()
    agent = dist.TCPStore("127.0.0.1", port, is_master=True, timeout=datetime.timedelta(seconds=30))
    environ = {"TORCHELASTIC_USE_AGENT_STORE": "True", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
               "TORCHELASTIC_RUN_ID": "r", env.RESUME: str(folder)}  # fmt: skip
    seen: dict[int, tuple[ir.Continuation, bytes]] = {}

    def rank(r: int, env: dict[str, str]) -> None:
        with ir.continuation("skrl", "T", None, r, 2, env, "other-stamp") as cont:
            seen[r] = (cont, Path(cont.local).read_bytes())
        assert not Path(cont.local).exists() or r == 0  # the copy goes when training ends

    # rank 1 (another node: no MGPU_RESUME, no run folder) waits for rank 0's plan
    other = threading.Thread(target=rank, args=(1, {k: v for k, v in environ.items() if k != env.RESUME}))
    other.start()
    rank(0, environ)
    other.join(30)
    assert agent.num_keys() >= 2
    zero, one = seen[0][0], seen[1][0]
    assert seen[0][1] == seen[1][1] == (folder / "checkpoints/agent_64.pt").read_bytes()
    assert (one.stamp, one.folder, one.checkpoint) == (STAMP, zero.folder, zero.checkpoint)
    assert one.local != zero.local and Path(one.local).name == "agent_64.pt"  # skrl reads T from the name


def test_without_a_store_a_rank_that_cannot_see_the_checkpoint_stops_with_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # this "node" has no such run folder
    missing = tmp_path / "logs" / "rsl_rl" / "cartpole_direct" / STAMP / "model_2.pt"
    with (
        pytest.raises(
            UsageError,
            match=r"rank 1: --resume .*model_2.pt: no such Isaac Lab run .*every node needs the run folder",
        ),
        ir.continuation("rsl_rl", "T", str(missing), 1, 2, {}, "s"),
    ):
        pass


def test_restart_marker_makes_tensorboard_show_each_step_once(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    from isaaclab_mgpu.rank.patches.tensorboard import restart_curve

    first = SummaryWriter(str(tmp_path))
    for step in range(5):  # the checkpoint was after step 2; steps 3 and 4 are lost work
        first.add_scalar("x", float(step), step)
    first.close()

    def values(folder: Path) -> list[tuple[int, float]]:
        acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
        acc.Reload()
        return [(e.step, e.value) for e in acc.Scalars("x")]

    second = SummaryWriter(str(tmp_path), filename_suffix=".resumed")
    restart_curve(second._get_file_writer().add_event, 3)
    for step in range(3, 6):
        second.add_scalar("x", 10.0 + step, step)
    second.close()
    assert values(tmp_path) == [(0, 0.0), (1, 1.0), (2, 2.0), (3, 13.0), (4, 14.0), (5, 15.0)]


def test_a_run_of_another_library_is_refused(tmp_path):
    folder = _run(tmp_path, "rsl_rl", STAMP, ["model_2.pt", "checkpoints/agent_64.pt"])
    (folder / "run.json").write_text(json.dumps({"library": "skrl", "task": "T"}))
    with pytest.raises(UsageError, match=r"--resume .*: a skrl run of T, not rsl_rl on T"):
        ir.locate("rsl_rl", "T", str(folder), STAMP, tmp_path)


def test_a_checkpoint_cut_short_is_passed_over_for_the_one_before(tmp_path):
    folder = _run(tmp_path, "rsl_rl", STAMP, ["model_1.pt", "model_2.pt"])
    whole = (folder / "model_2.pt").read_bytes()
    (folder / "model_2.pt").write_bytes(whole[: len(whole) // 2])  # the rank stopped while saving
    assert ir.locate("rsl_rl", "T", str(folder), STAMP, tmp_path) == (folder, folder / "model_1.pt")
    with pytest.raises(UsageError, match=r"model_2\.pt: the checkpoint is cut short"):
        ir.locate("rsl_rl", "T", str(folder / "model_2.pt"), STAMP, tmp_path)


def test_the_resume_line_names_where_it_goes_on_and_that_the_library_unpickles(capsys):
    from isaaclab_mgpu.rank.console import isaac_resumed

    isaac_resumed(3, 6, "/r/model_2.pt", "rsl_rl")
    assert capsys.readouterr().out == (
        "[mgpu] resuming at iteration 3 of 6 from /r/model_2.pt "
        "(rsl_rl unpickles checkpoints: resume only files you trust)\n"
    )
