"""The shared-memory channel of one node's CPU ranks: real processes, real futexes, real gloo."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from isaaclab_mgpu.contract.env import CPU_COLLECTIVES
from isaaclab_mgpu.rank import localcomm

pytestmark = pytest.mark.skipif(
    not localcomm.usable(2, 2, True, {}), reason="the channel needs x86-64 Linux with /dev/shm"
)

# spawn, not fork: the test process may already run JAX's or torch's threads.
_ctx = multiprocessing.get_context("spawn")


def _new_file(tmp_path: Path, world: int, slot: int) -> str:
    path = str(tmp_path / "channel")
    assert localcomm._create(path, localcomm.channel_bytes(world, slot)) == 1
    return path


def _collectives(path: str, rank: int, world: int, slot: int, out) -> None:
    channel = localcomm.LocalChannel(path, rank, world, slot_bytes=slot, timeout_s=30)
    rng = np.random.default_rng(rank)
    results = []
    for i in range(300):  # many rounds: both banks reused, counters far past the first
        n = 1 + (i * 37) % (slot // 8)
        if i % 3 == 0:
            x = rng.standard_normal(n).astype(np.float32)
            mine = x.copy()
            channel.all_reduce_(x)
            results.append(("sum", mine, x))
        elif i % 3 == 1:
            x = np.full(n, float(rank), dtype=np.float64)
            channel.broadcast_(x, src=i % world)
            results.append(("bcast", None, x))
        else:
            x = np.arange(n, dtype=np.int64) * (rank + 1)
            results.append(("gather", x, channel.all_gather(x)))
        if rank == 1 and i % 50 == 0:
            time.sleep(0.01)  # a late peer: the others wait on the futex, not on luck
    channel.close()
    out.put((rank, results))


def test_every_rank_gets_the_same_sums_broadcasts_and_gathers(tmp_path):
    world, slot = 3, 4096
    path = _new_file(tmp_path, world, slot)
    out = _ctx.Queue()
    procs = [_ctx.Process(target=_collectives, args=(path, r, world, slot, out)) for r in range(world)]
    for p in procs:
        p.start()
    got = dict(out.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    for i in range(300):
        kind = got[0][i][0]
        rows = [got[r][i] for r in range(world)]
        if kind == "sum":
            expected = rows[0][1].copy()
            for r in range(1, world):
                expected += rows[r][1]  # rank order, as every rank sums
            for r in range(world):
                assert rows[r][2].tobytes() == expected.tobytes(), (i, r)
        elif kind == "bcast":
            for r in range(world):
                assert (rows[r][2] == float(i % world)).all(), (i, r)
        else:
            stacked = np.stack([rows[r][1] for r in range(world)])
            for r in range(world):
                assert (rows[r][2] == stacked).all(), (i, r)


def test_a_peer_that_never_comes_is_named_after_the_timeout(tmp_path):
    path = _new_file(tmp_path, 2, 1024)
    channel = localcomm.LocalChannel(path, 0, 2, slot_bytes=1024, timeout_s=0.3)
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="rank 1 did not reach collective 1"):
        channel.all_reduce_(np.zeros(4, dtype=np.float32))
    assert 0.3 <= time.monotonic() - start < 5
    channel.close()


def test_an_array_larger_than_a_slot_is_refused(tmp_path):
    path = _new_file(tmp_path, 1, 64)
    channel = localcomm.LocalChannel(path, 0, 1, slot_bytes=64)
    assert channel.fits(np.zeros(16, np.float32)) and not channel.fits(np.zeros(17, np.float32))
    with pytest.raises(ValueError, match="do not fit"):
        channel.all_reduce_(np.zeros(17, dtype=np.float32))
    channel.close()


def _open(rank: int, world: int, pipes, out) -> None:
    def gather(values: np.ndarray) -> np.ndarray:
        pipes[rank].send(values)
        return pipes[rank].recv()

    channel = localcomm.open_channel(rank, world, gather, timeout_s=30)
    if channel is None:
        out.put((rank, None, None))
        return
    x = np.array([rank + 1.0])
    channel.all_reduce_(x)
    out.put((rank, float(x[0]), localcomm.current() is channel))
    localcomm.close_channel()


def test_ranks_open_one_channel_together_and_its_name_is_gone(tmp_path):
    world = 2
    ends = [_ctx.Pipe() for _ in range(world)]
    out = _ctx.Queue()
    before = set(os.listdir(localcomm.SHM_DIR))
    procs = [_ctx.Process(target=_open, args=(r, world, [e[1] for e in ends], out)) for r in range(world)]
    for p in procs:
        p.start()
    for _ in range(2):  # the two gathers of the rendezvous, served here
        rows = np.stack([ends[r][0].recv() for r in range(world)])
        for r in range(world):
            ends[r][0].send(rows)
    got = sorted(out.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(timeout=30)
    assert got == [(0, 3.0, True), (1, 3.0, True)]
    assert not {n for n in set(os.listdir(localcomm.SHM_DIR)) - before if n.startswith("isaaclab-mgpu-")}


def test_where_the_channel_applies():
    assert localcomm.usable(2, 2, True, {})
    assert not localcomm.usable(1, 1, True, {})  # one rank needs no collectives
    assert not localcomm.usable(4, 2, True, {})  # ranks on two nodes
    assert not localcomm.usable(2, None, True, {})  # launcher did not say
    assert not localcomm.usable(2, 2, False, {})  # GPU ranks use NCCL
    assert not localcomm.usable(2, 2, True, {CPU_COLLECTIVES: "gloo"})


def test_gloo_patch_takes_only_the_calls_the_channel_does_exactly(tmp_path):
    import torch
    import torch.distributed as dist

    from isaaclab_mgpu.rank.patches import gloo

    assert not dist.is_initialized()
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    original = dist.all_reduce
    path = _new_file(tmp_path, 1, 64)
    channel = localcomm.LocalChannel(path, 0, 1, slot_bytes=64)
    try:
        gloo.install(channel)
        count = lambda: int(channel._counters[0])  # noqa: E731
        t = torch.ones(4)
        dist.all_reduce(t)
        dist.broadcast(t, src=0)
        assert count() == 2 and t.tolist() == [1.0] * 4
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # not a sum
        dist.all_reduce(torch.ones(17))  # larger than the slot
        dist.all_reduce(torch.ones(4, dtype=torch.bfloat16))  # no NumPy dtype
        dist.all_reduce(torch.ones(8)[::2])  # not contiguous
        dist.all_reduce(t, async_op=True).wait()
        assert count() == 2
    finally:
        gloo.uninstall()
        channel.close()
        dist.destroy_process_group()
    assert dist.all_reduce is original and not gloo.installed()


def _train(tmp: Path, extra_env: dict[str, str]) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0", **extra_env}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MGPU_RUN_STAMP", CPU_COLLECTIVES):
        if name not in extra_env:
            env.pop(name, None)
    torchrun = str(Path(sys.executable).parent / "torchrun")
    argv = [torchrun, "--nproc_per_node", "2", "-m", "isaaclab_mgpu.worker", "--distributed"]
    argv += ["--device", "cpu"]
    argv += ["--rl_library", "rsl_rl", "--num_envs", "32", "--max_iterations", "2", "--seed", "3"]
    argv += ["--logger", "none", "--log_root", str(tmp)]
    done = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    line = next(x for x in done.stdout.splitlines() if "synchronised (at the end)" in x)
    return line.split()[-1], "through shared memory" in done.stdout


@pytest.mark.slow
def test_training_over_shared_memory_ends_with_gloos_parameters_to_the_bit(tmp_path):
    # rsl-rl's KL all-reduce, learning-rate broadcast and gradient all-reduce, both ways, same seed.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    shared, on = _train(tmp_path / "a", {})
    plain, off = _train(tmp_path / "b", {CPU_COLLECTIVES: "gloo"})
    assert (on, off) == (True, False)
    assert shared == plain
