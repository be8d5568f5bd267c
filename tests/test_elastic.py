"""torch elastic's per-rank log layout, error files and failure report (:mod:`.contract.elastic`), read
from files and text captured from a real torchrun (torch 2.11: ``--nproc_per_node 2 --standalone
--log_dir D`` with ``TORCHELASTIC_ERROR_FILE`` set for torchrun itself, local rank 1 raising under
``@record``; only the paths are shortened)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from isaaclab_mgpu.contract import elastic, reasons
from isaaclab_mgpu.launcher.supervise.result import first_failure

# The rank's error file and torchrun's copy of it, as written (only the paths differ).
CALLSTACK = (
    "Traceback (most recent call last):\n"
    '  File "/venv/torch/distributed/elastic/multiprocessing/errors/__init__.py", '
    "line 362, in wrapper\n    return f(*args, **kwargs)\n           ^^^^^^^^^^^^^^^^^^\n"
    '  File "/tmp/elastic-cap/boom.py", line 6, in main\n    raise ValueError("bad value from rank 1")\n'
    "ValueError: bad value from rank 1\n"
)
RANK_FILE = {
    "message": {
        "message": "ValueError: bad value from rank 1",
        "extraInfo": {"py_callstack": CALLSTACK, "timestamp": "1796172974"},
    }
}
LAUNCHER_COPY = {"message": {**RANK_FILE["message"], "errorCode": 1}}
FAILED = (
    "E1202 00:56:16.540000 24051 torch/distributed/elastic/multiprocessing/api.py:986] failed (exitcode: 1) "
    "local_rank: 1 (pid: 24066) of binary: /work/main/.venv/bin/python"
)


def _summary(error_file: str) -> str:
    # torchrun's closing summary of that run, as printed.
    return f"""\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
boom.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-12-02_00:56:16
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 24065)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 24065
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-02_00:56:14
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 24066)
  error_file: {error_file}
  traceback : Traceback (most recent call last):
    File "/venv/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 362
      return f(*args, **kwargs)
             ^^^^^^^^^^^^^^^^^^
    File "/tmp/elastic-cap/boom.py", line 6, in main
      raise ValueError("bad value from rank 1")
  ValueError: bad value from rank 1

============================================================"""


def _attempt(tmp_path: Path, k: int = 0, first: int = 0) -> Path:
    """One attempt's log folder as mgpu lays it out (its --log_dir), ranks ``first`` and ``first + 1``
    in it, the second with an error file."""
    root = str(tmp_path / "logs" / "mgpu")
    log_dir = Path(elastic.attempt_log_dir(root, "hello", "2026-12-02_00-56-10", k))
    for rank in (first, first + 1):
        elastic.rank_dir(log_dir, rank).mkdir(parents=True)
    (elastic.rank_dir(log_dir, first + 1) / elastic.ERROR_FILE).write_text(json.dumps(RANK_FILE))
    return log_dir


def test_the_layout_is_one_folder_per_global_rank_in_a_folder_named_by_run_and_attempt(tmp_path):
    log_dir = _attempt(tmp_path, 3)
    assert log_dir == tmp_path / "logs/mgpu/hello/2026-12-02_00-56-10/attempt_3"
    error_file = log_dir / "rank_1" / "error.json"
    assert elastic.attempt_dir_of(error_file) == log_dir
    # the launcher's own error file, which a rank's environment shows until the rank execs
    assert elastic.attempt_dir_of(elastic.launcher_error_file(log_dir, "vm.12")) is None
    assert elastic.beside_error_file(error_file, elastic.REASON_FILE) == error_file.parent / "reason.txt"
    (log_dir / "rank_x").mkdir()  # not a rank's
    assert elastic.rank_dirs(log_dir) == {0: log_dir / "rank_0", 1: log_dir / "rank_1"}
    assert elastic.rank_dirs(tmp_path / "missing") == {}
    # Making a rank's folder never removes what is in it (each launch has its own launch folder).
    made = elastic.make_rank_dir(log_dir, 1)
    assert made == log_dir / "rank_1" and (made / "error.json").is_file()
    assert elastic.make_rank_dir(log_dir, 2) == log_dir / "rank_2"


def test_a_real_error_file_is_read_once_into_one_record(tmp_path):
    run_dir = _attempt(tmp_path)
    (record,) = elastic.error_files(tmp_path)  # found from any folder above the attempt's
    assert record.rank == 1 and record.path.parent == elastic.rank_dir(run_dir, 1)
    assert record.message == "ValueError: bad value from rank 1"
    assert record.traceback == CALLSTACK and record.timestamp == 1796172974.0 and record.error_code is None
    assert record.text(2).splitlines() == ['    raise ValueError("bad value from rank 1")', record.message]
    copy = tmp_path / "launcher.json"
    copy.write_text(json.dumps(LAUNCHER_COPY))
    launcher = elastic.read_error_file(copy)
    assert launcher is not None and launcher.error_code == 1 and launcher.rank is None
    assert launcher.same_failure(record)
    for bad in ("", "{", '{"message": {"message": ""}}', "[1]"):
        copy.write_text(bad)
        assert elastic.read_error_file(copy) is None
    copy.write_text(json.dumps({"message": "RuntimeError: the older form, a plain string"}))
    old = elastic.read_error_file(copy)
    assert old is not None and old.message.startswith("RuntimeError") and old.timestamp is None


def test_the_first_failure_is_torchs_timestamp_not_the_files_time(tmp_path):
    run_dir = _attempt(tmp_path)
    later = {
        "message": {
            "message": "RuntimeError: Connection reset by peer",
            "extraInfo": {"timestamp": "1796172980"},
        }
    }
    zero = elastic.rank_dir(run_dir, 0) / elastic.ERROR_FILE
    zero.write_text(json.dumps(later))
    one = elastic.rank_dir(run_dir, 1) / elastic.ERROR_FILE
    os.utime(one, (2_000_000_000, 2_000_000_000))  # rank 1's file changed last, but torch says it came first
    first = elastic.first_error(elastic.error_files(run_dir))
    assert first is not None and first.rank == 1
    # Without torch's timestamp the file's time decides.
    zero.write_text(json.dumps({"message": {"message": "RuntimeError: no stamp"}}))
    one.write_text(json.dumps({"message": {"message": "ValueError: no stamp either"}}))
    os.utime(zero, (1_000, 1_000))
    first = elastic.first_error(elastic.error_files(run_dir))
    assert first is not None and first.rank == 0
    assert elastic.first_error([]) is None


def test_root_cause_comes_from_the_launchers_error_file_before_its_text(tmp_path):
    run_dir = _attempt(tmp_path, first=4)
    own = elastic.launcher_error_file(run_dir)
    own.write_text(json.dumps(LAUNCHER_COPY))
    reasons.record(
        "the rank's own reason", {"TORCHELASTIC_ERROR_FILE": str(elastic.rank_dir(run_dir, 5) / "error.json")}
    )
    # Another node's rank, in the same folder on a shared file system, failed later: not this node's.
    other = elastic.rank_dir(run_dir, 1)
    other.mkdir()
    (other / elastic.ERROR_FILE).write_text(json.dumps({"message": {"message": "RuntimeError: peer gone"}}))
    os.utime(other / elastic.ERROR_FILE, (1_000, 1_000))  # earlier by its file time: still not ours
    # No text at all (a torch that reworded everything): the files alone name rank 5 and its code.
    failure, known = first_failure([], str(run_dir), (4, 5), lambda: None, str(own))
    assert failure is not None and known == str(run_dir)
    assert (failure.rank, failure.local_rank, failure.exit_code, failure.signal) == (5, 1, 1, None)
    assert failure.traceback is not None and failure.traceback.endswith("ValueError: bad value from rank 1")
    assert failure.reason == "the rank's own reason" and failure.log_path == str(elastic.rank_dir(run_dir, 5))
    failure, _ = first_failure([], str(run_dir), (4, 5), lambda: None)  # without the launcher's copy
    assert failure is not None and failure.rank == 5
    # The text, when there, adds the global rank it names; the run folder comes from it. Its host is
    # torch's getfqdn ("localhost" here): the failure is named by this node's host name, as mgpu's other
    # lines name it.
    lines = [FAILED, *_summary(str(elastic.rank_dir(run_dir, 5) / "error.json")).splitlines()]
    lines = [line.replace("rank      : 1 (local_rank: 1)", "rank      : 5 (local_rank: 1)") for line in lines]
    failure, known = first_failure(lines, None, (4, 5), lambda: None, str(own))
    assert known == str(run_dir) and (failure.rank, failure.exit_code) == (5, 1)
    assert failure.host == socket.gethostname()


def test_without_a_launcher_file_the_text_then_the_first_error_file_decide(tmp_path):
    run_dir = _attempt(tmp_path)
    # A rank killed by a signal leaves no file: only the launcher's text knows.
    killed = [FAILED.replace("exitcode: 1) local_rank: 1", "exitcode: -9) local_rank: 0")]
    failure, _ = first_failure(killed, str(run_dir), (0, 1), lambda: None)
    assert (failure.local_rank, failure.signal, failure.code, failure.traceback) == (0, "SIGKILL", 137, None)
    # Neither text nor launcher file: the earliest error file.
    failure, known = first_failure([], None, (0, 1), lambda: str(run_dir))
    assert known is None and (failure.local_rank, failure.exit_code) == (1, None)
    assert failure.why() == "ValueError: bad value from rank 1"
    assert first_failure([], str(tmp_path / "empty"), (0, 1), lambda: None) == (None, str(tmp_path / "empty"))


def test_what_jaxrun_prints_is_read_back_by_the_same_module():
    cause = elastic.RootCause(3, 1, "node7", -11, 5763, None)
    text = elastic.failure_summary("worker", cause, "Signal 11 (SIGSEGV) received by PID 5763", 1796172974.0)
    assert elastic.parse_root_cause(text.splitlines()) == cause
    line = "jaxrun: rank 3 " + elastic.failed_line_text(-11, 1, 5763)
    assert elastic.failed_line(line) == (-11, 1, 5763)
    assert elastic.parse_root_cause([line]) == elastic.RootCause(None, 1, None, -11, 5763, None)


def test_torchruns_captured_text_parses(tmp_path):
    path = str(tmp_path / "attempt_0" / "rank_1" / "error.json")
    told = elastic.parse_root_cause([FAILED, *_summary(path).splitlines()])
    assert told == elastic.RootCause(1, 1, "localhost", 1, 24066, path)
    assert elastic.failed_line(FAILED) == (1, 1, 24066)


def test_jaxrun_copies_the_root_cause_as_torchrun_does(tmp_path):
    run_dir = _attempt(tmp_path)
    (record,) = elastic.error_files(run_dir)
    own = tmp_path / "own.json"
    elastic.write_launcher_error(own, record, 2)
    copy = elastic.read_error_file(own)
    assert copy is not None and copy.error_code == 2 and copy.same_failure(record)
