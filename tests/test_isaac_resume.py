"""Which Isaac Lab run a rank continues and how every rank gets the checkpoint (no Isaac Lab needed).

Real files in a temporary log root, a real torch ``TCPStore`` standing in for torchrun's agent store
(the same class torchrun serves), and TensorBoard's own directory loader for the restart marker.
Rank 0's account of an Isaac Lab run (the Bookkeeper driven as the library patches drive
it), and mgpu's attempts loop recording a restart in the folder a stand-in rank names itself (real
processes under mgpu's JAX launcher; the rank keeps its folder with the real Bookkeeper). The Isaac
Lab end-to-end resume is in ``test_isaac_e2e.py``.
"""

from __future__ import annotations

import datetime
import json
import socket
import threading
import zipfile
from pathlib import Path

import pytest
from restart_helpers import free_port

from isaaclab_mgpu.contract import env
from isaaclab_mgpu.contract.errors import UsageError
from isaaclab_mgpu.rank import isaac_resume as ir
from isaaclab_mgpu.rank.patches.base import Observer

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


def test_rank_0_hands_its_checkpoint_to_the_other_ranks_through_torchrun_store(tmp_path, monkeypatch):
    import torch.distributed as dist

    monkeypatch.chdir(tmp_path)
    folder = _run(tmp_path / "logs", "skrl", f"{STAMP}_ppo_torch", ["checkpoints/agent_64.pt"])
    _zip(folder / "checkpoints/agent_64.pt", bytes(range(256)) * 1000)
    port = free_port()
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


# --- rank 0's account of an Isaac Lab run, as the Bookkeeper gives it -------------------------------


def _book(tmp_path: Path, attempt: int, cont: ir.Continuation | None = None, *, mgpu: bool = True):
    """A rank-0 Bookkeeper of a 6-iteration rsl_rl run under ``mgpu train`` (attempt ``attempt``),
    or run by hand (``mgpu=False``: none of mgpu's variables)."""
    from isaaclab_mgpu.rank.isaac import Bookkeeper
    from isaaclab_mgpu.rank.worker.args import parse_args
    from isaaclab_mgpu.rank.worker.rank import RankContext

    environ = {
        env.ATTEMPT: str(attempt),
        env.CHECKPOINT_REQUEST: str(tmp_path / "request"),
        env.RUN_DIR_REPORT: str(tmp_path / "reported"),
    }
    args = parse_args(["--task", "Isaac-Cartpole-Direct", "--device", "cpu", "--num_envs", "64",
                       "--max_iterations", "6", "--rl_library", "rsl_rl"])  # fmt: skip
    ctx = RankContext(rank=0, local_rank=0, world_size=1, device="cpu", seed=42)
    return Bookkeeper(ctx, "torch", cont, 6, "rsl_rl", args, environ if mgpu else {}), args


def _folded(*accounts) -> dict:
    """What node 0's mgpu writes in summary.json from rank 0's accounts, each its account event."""
    from isaaclab_mgpu.contract import events as ev

    told = [
        ev.Account(
            time=1.0,
            fields={k: v for k, v in a.to_json().items() if v is not None},
            rewards_from=a.start_iteration or 0,
        )
        for a in accounts
    ]
    return ev.summary_of(told).to_json()


@pytest.fixture
def every_iteration(monkeypatch):
    """Rank 0 refreshes its account every iteration: these iterations take microseconds, where
    the refresh budget (50 times a refresh's cost) assumes real training's seconds."""
    from isaaclab_mgpu.rank import isaac

    monkeypatch.setattr(isaac, "REFRESH_BUDGET", 0)


def test_rank_0s_accounts_of_an_isaac_run_fold_into_one_summary_across_a_restart(tmp_path, every_iteration):
    folder = _run(tmp_path / "logs", "rsl_rl", STAMP, [])
    book, _ = _book(tmp_path, 0, ir.Continuation(STAMP))
    book.run_folder(str(folder))
    s = book.account.to_json()  # given from the moment Isaac Lab names the folder
    assert (s["status"], s["attempt"], s["backend"], s["task"], s["total_iterations"]) == (
        "running", 0, "rsl_rl", "Isaac-Cartpole-Direct", 6)  # fmt: skip
    assert (tmp_path / "reported").read_text() == str(folder.resolve())  # what the launcher reads
    book.synced([])
    for reward in (1.0, 2.0, 3.0):
        assert book.iteration(64 * 16, reward) is False  # nobody asked for a checkpoint
        if reward == 2.0:
            _zip(folder / "model_1.pt", b"after iteration 2")  # rsl-rl's model_<k>: k + 1 done
            book.saved(2)
    first = book.account  # rank 1 dies here: the account says how far the run got
    s = _folded(first)
    assert (s["status"], s["end_iteration"], s["iterations"], s["mean_rewards"]) == (
        "running", 3, 3, [1.0, 2.0, 3.0])  # fmt: skip
    assert (s["checkpoint"], s["checkpoint_iteration"]) == (str(folder / "model_1.pt"), 2)

    # mgpu's restart: attempt 1 continues the folder from model_1.pt (2 iterations done)
    cont = ir.Continuation(STAMP, folder=str(folder), checkpoint=str(folder / "model_1.pt"))
    book, _args = _book(tmp_path, 1, cont)
    book.run_folder(str(folder))
    book.resumed(2, str(folder / "model_1.pt"))
    book.synced([])
    for reward in (3.5, 4.0, 5.0, 6.0):
        book.iteration(64 * 16, reward)
    _zip(folder / "model_5.pt", b"the end")
    book.saved(6)
    book.finished()
    s = _folded(first, book.summary(0))
    assert (s["status"], s["attempt"], s["exit_status"]) == ("finished", 1, 0)
    assert (s["start_iteration"], s["resumed_at"], s["end_iteration"], s["iterations"]) == (0, 2, 6, 6)
    assert s["mean_rewards"] == [1.0, 2.0, 3.5, 4.0, 5.0, 6.0]  # attempt 0's work up to the checkpoint kept
    assert (s["first_mean_reward"], s["last_mean_reward"]) == (1.0, 6.0)
    assert (s["checkpoint"], s["checkpoint_iteration"]) == (str(folder / "model_5.pt"), 6)
    assert s["resumed_from"] == str(folder / "model_1.pt") and s["continues"] is None


def test_a_checkpoint_request_stops_an_isaac_run_before_its_last_iteration_only(tmp_path):
    """mgpu's checkpoint request (its file) ends training at the iteration it is read, except at
    the run's last: that run is finished, not stopped for a requeue that would find it done."""
    book, _ = _book(tmp_path, 0)
    book.synced([])
    for _ in range(4):
        assert book.iteration(64 * 16, 1.0) is False
    (tmp_path / "request").touch()
    assert book.iteration(64 * 16, 1.0) is True and book.stopped  # the 5th of 6: save and stop
    (tmp_path / "request").unlink()
    last, _ = _book(tmp_path, 0)
    last.synced([])
    assert [last.iteration(64 * 16, 1.0) for _ in range(5)] == [False] * 5
    (tmp_path / "request").touch()
    assert last.iteration(64 * 16, 1.0) is False and not last.stopped  # the 6th of 6: it ends finished


def test_a_checkpoint_of_another_run_loaded_into_a_new_folder_is_recorded_as_its_continuation(
    tmp_path, every_iteration
):
    earlier = _run(tmp_path / "logs", "rsl_rl", "2026-01-01_00-00-00", ["model_3.pt"])
    folder = _run(tmp_path / "logs", "rsl_rl", STAMP, [])
    book, _ = _book(tmp_path, 0, ir.Continuation(STAMP))  # Isaac Lab's own --checkpoint, not --resume
    book.resumed(4, str(earlier / "model_3.pt"))  # rsl-rl loads before Isaac Lab names the folder
    book.run_folder(str(folder))
    book.synced([])
    book.iteration(64 * 16, 7.0)
    s = _folded(book.account)
    assert s["continues"] == str(earlier.resolve()) and s["resumed_from"] == str(earlier / "model_3.pt")
    assert (s["start_iteration"], s["end_iteration"], s["iterations"], s["resumed_at"]) == (4, 5, 1, None)


def test_the_checkpoint_request_stops_an_isaac_run_at_an_iteration_boundary(
    tmp_path, capsys, every_iteration
):
    folder = _run(tmp_path / "logs", "rsl_rl", STAMP, [])
    book, _args = _book(tmp_path, 0, ir.Continuation(STAMP))
    book.run_folder(str(folder))
    book.synced([])
    assert book.iteration(64, 1.0) is False
    (tmp_path / "request").touch()  # what mgpu creates on the requeue signal
    assert book.iteration(64, 2.0) is True and book.stopped
    assert "checkpoint requested: saving at iteration 2 and stopping" in capsys.readouterr().out
    _zip(folder / "model_1.pt", b"saved on request")
    book.saved(2)
    book.finished()
    s = book.summary(0)
    assert (s.status, s.end_iteration, s.checkpoint_iteration) == ("stopped", 2, 2)
    # run by hand (no mgpu to ask) the request is never read: no collective per iteration either
    alone, _ = _book(tmp_path, 0, ir.Continuation(STAMP), mgpu=False)
    assert alone.iteration(64, 1.0) is False


@pytest.mark.slow
def test_a_restart_of_an_isaac_run_is_recorded_in_the_folder_its_rank_0_named(tmp_path, monkeypatch):
    """Real processes: mgpu's attempts loop around mgpu's JAX launcher and 2 stand-in ranks that name
    their own folder (as Isaac Lab does); rank 1 dies with SIGKILL at iteration 3, once."""
    import sys

    from isaaclab_mgpu.launcher import runs
    from isaaclab_mgpu.launcher.attempts import Restarting, RestartOptions, RunPlace, run_attempts
    from isaaclab_mgpu.launcher.build import Command
    from isaaclab_mgpu.launcher.ledger import RunLedger
    from isaaclab_mgpu.launcher.supervise import SuperviseOptions
    from isaaclab_mgpu.launcher.supervise.stall import StallOptions

    monkeypatch.chdir(tmp_path)
    workers, logs = Path(__file__).parent / "workers", str(tmp_path / "logs" / "mgpu")
    cmd = Command(
        argv=(sys.executable, "-m", "isaaclab_mgpu.jaxrun", "--nproc_per_node", "2", "--coordinator_address",
              "127.0.0.1:0", "--log_dir", logs, str(workers / "isaac_standin.py")),
        env={env.RUN_STAMP: STAMP, env.RUN_ID: "isaac-standin-test"},
        world_size=2, rank_devices={0: "cpu", 1: "cpu"}, launcher="jaxrun", log_dir=logs,
    )  # fmt: skip
    said, record = [], RunLedger()  # no folder yet: rank 0 names it; the attempts loop's notes kept
    outcome = run_attempts(
        cmd,
        RunPlace(named_by_rank=True),  # what continuation.place gives an Isaac Lab task
        RestartOptions(max_restarts=1),
        # The stall watch's progress folder carries rank 0's account (a bound far from any verdict).
        SuperviseOptions(
            grace_period=2, kill_after=2, console=False, stall=StallOptions(600, startup_timeout=600)
        ),
        said.append,
        ledger=record,
    )
    record.close()
    folder = (tmp_path / "logs" / "rsl_rl" / "standin" / STAMP).resolve()
    assert outcome.run_dir == folder and [a.outcome for a in outcome.attempts] == ["failed", "finished"]
    where = f"rank 1 on {socket.gethostname()}"
    expected = f"attempt 0: {where} failed with signal SIGKILL after iteration 3; restart 1 of 1"
    restarts = [
        f"{n.ended.describe()}; restart {n.number} of {n.max_restarts}"
        for n in said
        if isinstance(n, Restarting)
    ]
    assert restarts == [expected], said
    s = json.loads((folder / "summary.json").read_text())
    assert (s["status"], s["start_iteration"], s["resumed_at"], s["end_iteration"], s["iterations"]) == (
        "finished", 0, 2, 4, 4)  # fmt: skip
    assert s["mean_rewards"] == [0.0, 1.0, 2.0, 3.0]
    (restart,) = s["restarts"]
    assert (restart["rank"], restart["how"], restart["started_at"], restart["reached"]) == (
        1, "signal SIGKILL", 0, 3)  # fmt: skip
    assert (restart["checkpoint"], restart["resumed_from"], restart["lost"]) == (2, 2, 1)
    assert restart["verdict"]["restart"] is True, restart  # a SIGKILLed rank: a restart may mend it
    assert [(a["number"], a["outcome"], a["started_at"]) for a in s["attempts"]] == [
        (0, "failed", 0), (1, "finished", 2)]  # fmt: skip
    # The ledger's events waited for the folder rank 0 named, then went there.
    from isaaclab_mgpu.contract import events

    quiet = ("progress", "checkpoint", "straggler", "account", "summary")
    kinds = [e.kind for e in events.read(folder).events if e.kind not in quiet]
    # Rank 1 never reports (it only dies): no ranks_up.
    assert kinds == ["attempt_started", "fault", "restart", "attempt_started"], kinds
    assert events.summary_of(events.read(folder).events).to_json() == s  # summary.json is the fold
    (fault,) = [e for e in events.read(folder).events if isinstance(e, events.Fault)]
    assert (fault.rank, fault.signal, fault.iteration, fault.checkpoint, fault.lost) == (
        1,
        "SIGKILL",
        3,
        2,
        1,
    )
    (row,) = runs.find_runs(tmp_path / "logs")
    assert (row.folder, row.status, row.restarts, row.iterations) == (
        str(tmp_path / "logs" / "rsl_rl" / "standin" / STAMP), "finished", 1, 4)  # fmt: skip


class _Asks(Observer):
    """An observer that asks to stop after iteration ``stop_at`` and keeps what it was told."""

    def __init__(self, stop_at: int) -> None:
        self.stop_at, self.iterations, self.saved_at, self.ended = stop_at, 0, [], False

    def iteration(self, steps, reward) -> bool:
        self.iterations += 1
        return self.iterations == self.stop_at

    def saved(self, iteration):
        self.saved_at.append(iteration)

    def finished(self):
        self.ended = True


def test_rsl_rl_saves_through_its_own_save_and_leaves_learn_when_asked(tmp_path):
    """Real rsl-rl (``OnPolicyRunner.learn``) on the embedded cartpole, patched as on Isaac Lab's
    path: asked after iteration 2, rank 0 saves ``model_1.pt`` (2 iterations done) and learn ends."""
    import torch

    from isaaclab_mgpu.contract.settings import PPOSettings
    from isaaclab_mgpu.rank import tasks
    from isaaclab_mgpu.rank.backends.rsl_rl import MgpuRunner, TaskVecEnv, train_cfg
    from isaaclab_mgpu.rank.patches import rsl_rl as patch
    from isaaclab_mgpu.rank.worker.rank import RankContext

    torch.manual_seed(0)
    ctx = RankContext(rank=0, local_rank=0, world_size=1, device="cpu", seed=0)
    env = TaskVecEnv(tasks.make("cartpole", 16, "cpu", 0, {}))
    cfg = {**train_cfg(PPOSettings(rollout=8, epochs=1, mini_batches=1)), "save_interval": 100}
    cfg["logger"] = "tensorboard"
    runner = MgpuRunner(env, cfg, ctx, str(tmp_path))
    seen = _Asks(stop_at=2)
    patch.continue_counter(runner, seen.resumed)
    patch.observe(runner, seen)
    runner.learn(num_learning_iterations=6)
    assert seen.iterations == 2 and seen.ended and seen.saved_at == [1, 2]  # model_0 (save_interval), model_1
    assert sorted(p.name for p in tmp_path.glob("model_*.pt")) == ["model_0.pt", "model_1.pt"]
    assert torch.load(tmp_path / "model_1.pt", weights_only=False)["iter"] == 1  # rsl-rl's own file


def test_a_requeued_job_and_resume_auto_continue_an_isaac_run_found_by_its_summary(tmp_path, monkeypatch):
    """The launcher finds the Isaac Lab run to continue by the runs' summaries (real files);
    the rank then continues what it is handed, and a new run when nothing was found."""
    import dataclasses

    from conftest import machine

    from isaaclab_mgpu.contract.files import write_json
    from isaaclab_mgpu.launcher import continuation
    from isaaclab_mgpu.launcher.resolve import resolve
    from isaaclab_mgpu.launcher.spec import LaunchSpec

    monkeypatch.chdir(tmp_path)
    task = "Isaac-Cartpole-Direct"
    ident = {"backend": "rsl_rl", "framework": "torch", "task": task}
    job = _run(tmp_path / "logs", "rsl_rl", "2026-01-01_00-00-00", ["model_3.pt"])
    write_json(job / "summary.json", {**ident, "status": "requeued", "slurm_job_id": "77"})
    done = tmp_path / "logs" / "rsl_rl" / "other_experiment" / "2026-01-03_00-00-00"
    done.mkdir(parents=True)
    write_json(done / "summary.json", {**ident, "status": "finished"})
    failed = tmp_path / "logs" / "rsl_rl" / "cartpole_direct" / "2026-01-02_00-00-00"
    failed.mkdir()
    write_json(failed / "summary.json", {**ident, "status": "failed"})

    def placed(*options: str, slurm: bool = False, library: str = "rsl_rl") -> continuation.Placement:
        spec = LaunchSpec.from_options(
            ("--task", task, *options), device="cpu", nproc_per_node="2", rl_library=library
        )
        resolved = resolve(spec, machine(0), strict=True, free_port=lambda: 1234)
        if slurm:
            resolved = dataclasses.replace(resolved, slurm_job_id="77", slurm_restart_count=1)
        return continuation.place(resolved, 2)

    requeued = placed(slurm=True)
    assert requeued.place.named_by_rank and requeued.continued
    assert requeued.place.resume == str(Path("logs/rsl_rl/cartpole_direct/2026-01-01_00-00-00"))
    auto = placed("--resume", "auto")  # the newest unfinished one of this task and library
    assert auto.place.resume == str(Path("logs/rsl_rl/cartpole_direct/2026-01-02_00-00-00")), auto
    assert placed("--resume", "auto", library="skrl").place.resume is None
    assert placed().place.resume is None and placed().place.named_by_rank
    # the rank: what the launcher chose comes as MGPU_RESUME; nothing found is a new run
    assert ir.request("auto", {env.ATTEMPT: "0", env.RESUME: str(failed)}) == str(failed)
    assert ir.request("auto", {env.ATTEMPT: "0"}) is None
    with pytest.raises(UsageError, match="--resume auto is mgpu train's"):
        ir.request("auto", {})


def test_skrl_saves_through_write_checkpoint_and_leaves_the_trainer_when_asked(tmp_path):
    """Real skrl (torch PPO agent, stepped as skrl's trainer steps it) on the embedded cartpole,
    observed as on Isaac Lab's path: asked after iteration 3 (timestep 24), rank 0 writes
    ``agent_24.pt`` through skrl's own ``write_checkpoint``, and the run leaves by Isaac Lab's
    KeyboardInterrupt branch, which skips its final ``agent_<total>`` save."""
    import os
    from types import SimpleNamespace

    import torch

    from isaaclab_mgpu.contract.settings import PPOSettings
    from isaaclab_mgpu.rank import tasks
    from isaaclab_mgpu.rank.backends.skrl_torch import SkrlTorchTrainer
    from isaaclab_mgpu.rank.patches import skrl as patch
    from isaaclab_mgpu.rank.worker.rank import RankContext

    torch.manual_seed(0)
    ctx = RankContext(rank=0, local_rank=0, world_size=1, device="cpu", seed=0)
    task = tasks.make("cartpole", 16, "cpu", 0, {})
    trainer = SkrlTorchTrainer(
        task, PPOSettings(rollout=8, epochs=1, mini_batches=1), ctx, str(tmp_path / "run")
    )
    agent = trainer.agent
    agent.checkpoint_interval = 16  # every 2 iterations, as Isaac Lab's agent config would set it
    os.makedirs(os.path.join(agent.experiment_dir, "checkpoints"), exist_ok=True)

    def run() -> None:  # skrl's Runner.run -> Trainer.train, 6 iterations
        for _ in range(6):
            trainer.iterate()  # one rollout, stepped through the agent's calls as skrl's trainer does

    runner = SimpleNamespace(agent=agent, run=run, trainer=SimpleNamespace(
        env=SimpleNamespace(num_envs=16), cfg=SimpleNamespace(timesteps=48)))  # fmt: skip
    seen = _Asks(stop_at=3)
    patch.observe(runner, {"agent": {"rollouts": 8}}, seen)
    with pytest.raises(KeyboardInterrupt):
        runner.run()
    assert seen.iterations == 3 and seen.ended and seen.saved_at == [2, 3]
    saved = sorted(p.name for p in (tmp_path / "run" / "checkpoints").glob("agent_*.pt"))
    assert saved == ["agent_16.pt", "agent_24.pt"]  # none for the timesteps never trained
