"""The stop decision and the signal recorder, without a process: every reason to stop and its timing.

:func:`isaaclab_mgpu.launcher.supervise.stop.decide` is pure, so each reason is checked here from
the facts a supervision step would gather; the recorder (:class:`~.shutdown.Interrupts`) gets a
clock of the test's own, and real signals sent to this process where a handler is the point.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

import pytest

from isaaclab_mgpu.launcher.supervise.shutdown import SAME_INTERRUPT, Interrupts, Phase, Shutdown, ignored
from isaaclab_mgpu.launcher.supervise.stop import (
    FAILURE_GRACE,
    HANG_GRACE,
    HANG_KILL_AFTER,
    WANDB_WRITE_S,
    Kind,
    Seen,
    Standing,
    decide,
)

RUNNING = Standing(grace=10.0, kill_after=5.0)
AFTER_FAILURE = Standing(stopping=True, grace=10.0, kill_after=5.0)
INTERRUPTED = Standing(stopping=True, interrupted=True, grace=10.0, kill_after=5.0)


def kinds(seen: Seen, run: Standing = RUNNING) -> list[Kind]:
    return [stop.kind for stop in decide(seen, run)]


def test_a_healthy_step_goes_on():
    assert decide(Seen(), RUNNING) == ()
    assert decide(Seen(), INTERRUPTED) == ()  # the shutdown under way goes on by itself


def test_a_first_signal_goes_to_the_launcher_with_the_users_timings():
    (stop,) = decide(Seen(signals=(("stop", signal.SIGINT),)), RUNNING)
    assert (stop.kind, stop.send, stop.grace, stop.kill_after) == (Kind.INTERRUPT, signal.SIGINT, 10.0, 5.0)
    assert stop.reason == "SIGINT received" and stop.announce and stop.interrupts and stop.requested


def test_stop_is_sigterm_with_its_reason():
    (stop,) = decide(Seen(asked="test over"), RUNNING)
    assert (stop.kind, stop.send, stop.reason) == (Kind.INTERRUPT, signal.SIGTERM, "test over")


def test_a_second_interrupt_kills_once_and_says_so():
    stops = decide(Seen(signals=(("stop", signal.SIGINT), ("force", signal.SIGINT))), RUNNING)
    assert [s.kind for s in stops] == [Kind.INTERRUPT, Kind.FORCE] and stops[1].announce
    (force,) = decide(Seen(signals=(("force", signal.SIGTERM),)), INTERRUPTED)
    assert force.interrupts and force.send is None
    forced = Standing(stopping=True, interrupted=True, forced=True)
    assert decide(Seen(signals=(("force", signal.SIGINT),)), forced) == ()


def test_kill_forces_without_a_note_and_a_signal_after_it_adds_nothing():
    (stop,) = decide(Seen(killed=True, signals=(("force", signal.SIGINT),)), RUNNING)
    assert (stop.kind, stop.announce, stop.interrupts) == (Kind.FORCE, False, True)


def test_a_hang_stops_fast_as_on_sigterm():
    (stop,) = decide(Seen(hang=True), RUNNING)
    assert (stop.kind, stop.send, stop.reason) == (Kind.HANG, signal.SIGTERM, "hang found")
    assert (stop.grace, stop.kill_after) == (HANG_GRACE, HANG_KILL_AFTER) and stop.interrupts


def test_a_failed_rank_lets_the_launcher_stop_the_others_within_a_short_grace():
    (stop,) = decide(Seen(failed=True), RUNNING)
    assert (stop.kind, stop.send, stop.grace, stop.kill_after) == (Kind.FAILURE, None, FAILURE_GRACE, 5.0)
    assert stop.announce and stop.requested and not stop.interrupts  # the rank's own code stands
    (shorter,) = decide(Seen(failed=True), Standing(grace=0.5, kill_after=1.0))
    assert (shorter.grace, shorter.kill_after) == (0.5, 1.0)  # the user's grace when it is shorter
    (lone,) = decide(Seen(failed=True), Standing(lone_rank=True))
    assert not lone.announce  # a lone rank has no others to stop


def test_a_failed_rank_stops_nothing_when_the_launcher_has_ended():
    assert kinds(Seen(failed=True, launcher_alive=False)) == [Kind.ENDED]


def test_a_dead_ranks_peers_are_killed_at_once_or_after_wandbs_write():
    (now,) = decide(Seen(rank_died=True), RUNNING)
    assert (now.kind, now.grace) == (Kind.PEERS, 0.0)
    (later,) = decide(Seen(rank_died=True, wandb=True), RUNNING)
    assert later.grace == WANDB_WRITE_S and not later.interrupts


def test_a_launcher_that_ended_by_itself_is_no_requested_stop():
    (stop,) = decide(Seen(launcher_alive=False), RUNNING)
    assert (stop.kind, stop.requested, stop.announce, stop.send) == (Kind.ENDED, False, False, None)


def test_an_interrupt_outweighs_every_other_reason_in_the_same_step():
    seen = Seen(
        signals=(("stop", signal.SIGTERM),), hang=True, failed=True, rank_died=True, launcher_alive=False
    )
    assert kinds(seen) == [Kind.INTERRUPT]


def test_while_stopping_only_interrupts_count():
    for seen in (Seen(hang=True), Seen(failed=True), Seen(rank_died=True), Seen(launcher_alive=False)):
        assert decide(seen, AFTER_FAILURE) == ()
    (stop,) = decide(Seen(signals=(("stop", signal.SIGINT),)), AFTER_FAILURE)
    assert stop.kind is Kind.INTERRUPT and stop.announce  # news: the first interrupt of the run
    (again,) = decide(Seen(asked="test over"), INTERRUPTED)
    assert again.send == signal.SIGTERM and not again.announce  # sent again, said once


def test_the_recorder_tells_one_ctrl_c_delivered_twice_from_a_second():
    now = [100.0]
    rec = Interrupts(clock=lambda: now[0])
    rec.record(signal.SIGINT)
    now[0] += SAME_INTERRUPT / 2
    rec.record(signal.SIGINT)  # the same Ctrl-C, forwarded by a wrapper
    assert rec.stop_asked and list(rec.take(stopping=False)) == [("stop", signal.SIGINT)]
    now[0] += SAME_INTERRUPT
    rec.record(signal.SIGTERM)
    assert list(rec.take(stopping=True)) == [("force", signal.SIGTERM)]
    assert list(rec.take(stopping=True)) == []  # each signal is taken once


def test_a_stop_asked_some_other_way_makes_the_first_signal_a_second():
    rec = Interrupts()
    rec.record(signal.SIGINT)
    assert list(rec.take(stopping=True)) == [("force", signal.SIGINT)]


def test_the_checkpoint_signal_is_recorded_and_never_a_stop():
    now = [5.0]
    rec = Interrupts(checkpoint_signal=signal.SIGUSR2, clock=lambda: now[0])
    assert signal.SIGUSR2 in rec.signals and signal.SIGTERM in rec.signals
    rec.record(signal.SIGUSR2)
    now[0] = 7.0
    rec.record(signal.SIGUSR2)
    assert list(rec.take(stopping=False)) == [] and not rec.stop_asked
    assert rec.checkpoint_at == 5.0  # the first arrival
    rec.record(signal.SIGTERM)
    assert list(rec.take(stopping=False)) == [("stop", signal.SIGTERM)]


def test_handlers_only_record_and_are_put_back():
    rec = Interrupts()
    before = signal.getsignal(signal.SIGUSR1)
    with rec.installed() as installed:
        assert installed
        signal.raise_signal(signal.SIGUSR1)
        signal.raise_signal(signal.SIGTERM)
    assert signal.getsignal(signal.SIGUSR1) is before
    assert rec.checkpoint_at is not None and rec.stop_asked
    assert list(rec.take(stopping=False)) == [("stop", signal.SIGTERM)]


def test_handlers_are_not_installed_outside_the_main_thread():
    seen = []

    def enter() -> None:
        with Interrupts().installed() as installed:
            seen.append(installed)

    thread = threading.Thread(target=enter)
    thread.start()
    thread.join()
    assert seen == [False]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_process_started_while_a_signal_is_ignored_inherits_sig_ign():
    code = "import signal; print(signal.getsignal(signal.SIGUSR1) is signal.SIG_IGN)"
    with Interrupts().installed():
        with ignored(signal.SIGUSR1):
            inside = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        after = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert (inside.stdout.strip(), after.stdout.strip()) == ("True", "False")


def test_the_shutdown_takes_its_timings_when_it_begins_and_keeps_them():
    now = [0.0]
    shutdown = Shutdown(
        members=list, first_alive=lambda: True, grace=10.0, kill_after=5.0, clock=lambda: now[0]
    )
    shutdown.begin(grace=FAILURE_GRACE, kill_after=1.0)
    assert (shutdown.phase, shutdown.started_at) == (Phase.STOPPING, 0.0)  # it started now
    # Under way, it keeps the timings it began with, and does not start again.
    now[0] = 1.0
    shutdown.begin(grace=HANG_GRACE, kill_after=HANG_KILL_AFTER)
    assert shutdown.started_at == 0.0
    assert (shutdown.grace, shutdown.kill_after, shutdown.requested) == (FAILURE_GRACE, 1.0, True)
    now[0] = FAILURE_GRACE - 0.1
    assert shutdown.step() is Phase.STOPPING
    now[0] = FAILURE_GRACE
    assert shutdown.step() is Phase.DONE  # no process left to terminate
