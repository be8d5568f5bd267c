"""Patches of rl-games (``rl_games.common.a2c_common``), applied around Isaac Lab's rl-games training.

**Normalizers (multi-rank, every device).** ``rl_games.algos_torch.running_mean_std.RunningMeanStd``
(the input and value normalizers of ``normalize_input``/``normalize_value``) updates from this
rank's batch alone (rl-games 1.6.5 has no multi-GPU synchronisation there), so the ranks normalise
differently. The models script those modules (``torch.jit.script``), so their update cannot be
wrapped; instead, at the end of each epoch, every rank's statistics are pooled in one all-reduce
(:func:`.base.pool_statistics`; every rank has seen as many samples).

**CPU ranks (gloo).** ``A2CBase.__init__`` calls ``init_process_group("nccl")`` and stores
``cuda:LOCAL_RANK`` as its device, and ``train`` calls ``torch.cuda.set_device``: on CPU ranks
that module sees a ``torch.distributed`` whose ``init_process_group`` uses the worker's group and
a ``torch`` whose ``cuda.set_device`` does nothing, and the agent config keeps its CPU device. (A
task with a central value network would need ``central_value.py`` treated alike; the cartpole
tasks have none.)

**Observation (every device).** ``train_epoch`` of the continuous and discrete bases ends an
iteration (mean of ``game_rewards``); its first call, after ``train`` broadcast rank 0's
parameters, takes the first checksum and hands the drift check the agent. The agent's ``save`` of
a ``last_…`` file names a checkpoint's epoch (written through :func:`.base.durable_saves`);
``train`` ends training. On mgpu's checkpoint request, agreed after an epoch, that epoch becomes
``max_epochs``: rl-games' own end-of-training branch saves ``last_<name>_ep_<epoch>_rew_…`` and
stops every rank.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from isaaclab_mgpu.rank import drift
from isaaclab_mgpu.rank.patches.base import Observer, Proxy, durable_saves, pool_statistics, replaced


class _CpuTorch(Proxy):
    """``torch`` as rl_games.common.a2c_common sees it on CPU ranks: ``cuda.set_device`` does nothing."""

    def __init__(self, torch: Any) -> None:
        super().__init__(torch)
        self.cuda = _CpuCuda(torch.cuda)


class _CpuCuda(Proxy):
    def set_device(self, device: Any) -> None:
        # A2CBase.train / train_epoch pin cuda:LOCAL_RANK; a CPU rank has no CUDA device (CPU ranks).
        return None


class _KeepCpuDevice(dict):
    """rl-games' agent config on a CPU rank: ``A2CBase.__init__`` cannot switch it to CUDA (CPU ranks)."""

    def __setitem__(self, key: str, value: Any) -> None:
        if key == "device" and str(value).startswith("cuda"):
            return
        super().__setitem__(key, value)


class _JoinedGroup(Proxy):
    """``torch.distributed`` as rl_games.common.a2c_common sees it on CPU ranks (CPU ranks)."""

    def init_process_group(self, *args: Any, **kwargs: Any) -> None:
        # A2CBase.__init__ calls init_process_group("nccl"); the worker's gloo group already exists.
        if not self._wrapped.is_initialized():
            raise RuntimeError("mgpu's CPU rank has no gloo process group before rl-games starts")


@contextlib.contextmanager
def patched(*, cpu: bool, observer: Observer) -> Iterator[None]:
    from rl_games.common import a2c_common

    base = a2c_common.A2CBase
    original_init = base.__init__

    def init_on_cpu(self: Any, base_name: str, params: dict) -> None:
        # A2CBase.__init__ with multi_gpu stores cuda:LOCAL_RANK as the device (CPU ranks); everything
        # else it does per rank (rank-0-only writer and stats, lr schedule) stays upstream's.
        if params["config"].get("multi_gpu", False):
            params["config"] = _KeepCpuDevice(params["config"])
        original_init(self, base_name, params)

    state = {"synced": False}

    def wrap_epoch(original: Callable[..., Any]) -> Callable[..., Any]:
        def train_epoch(self: Any) -> Any:
            # {Continuous,Discrete}A2CBase.train_epoch is one iteration; its first call comes after
            # train() broadcast rank 0's parameters.
            if not state["synced"]:
                state["synced"] = True
                observer.synced(drift.rl_games_models(self))
                observer.state(drift.rl_games_source(self))  # for the drift check, at each epoch's end
                _observe_saves(self, observer)
                # A2CBase.restore (set_full_state_weights) brought back epoch_num; update_epoch ran since.
                if int(self.epoch_num) > 1:
                    observer.resumed(int(self.epoch_num) - 1, "")
            result = original(self)
            if getattr(self, "multi_gpu", False):
                _pool_normalizers(self)  # RunningMeanStd is rank-local in rl-games (module docstring)
            mean = self.game_rewards.get_mean() if self.game_rewards.current_size > 0 else None
            reward = float(mean.reshape(-1)[0]) if mean is not None else None
            if observer.iteration(int(self.batch_size_envs), reward):
                # Asked to checkpoint: this epoch becomes the last, so train()'s own max_epochs
                # branch saves last_<name>_ep_<epoch> on rank 0 and ends on every rank.
                self.max_epochs = int(self.epoch_num)
            return result

        return train_epoch

    def wrap_train(original: Callable[..., Any]) -> Callable[..., Any]:
        def train(self: Any) -> Any:
            # {Continuous,Discrete}A2CBase.train return after max_epochs; Isaac Lab then destroys the
            # process group.
            result = original(self)
            observer.finished()
            return result

        return train

    with contextlib.ExitStack() as stack:
        for cls in (a2c_common.ContinuousA2CBase, a2c_common.DiscreteA2CBase):
            stack.enter_context(replaced(cls, "train_epoch", wrap_epoch(cls.train_epoch)))
            stack.enter_context(replaced(cls, "train", wrap_train(cls.train)))
        if cpu:
            stack.enter_context(replaced(base, "__init__", init_on_cpu))
            stack.enter_context(replaced(a2c_common, "torch", _CpuTorch(sys.modules["torch"])))
            stack.enter_context(replaced(a2c_common, "dist", _JoinedGroup(a2c_common.dist)))
        yield


def _pool_normalizers(agent: Any) -> None:
    """Every ``RunningMeanStd`` of the agent's models pooled over the ranks (see the module docstring)."""
    for model in drift.rl_games_models(agent):
        for module in model.modules():
            if hasattr(module, "running_mean") and hasattr(module, "running_var"):
                pool_statistics(module.running_mean, module.running_var)


def _observe_saves(agent: Any, observer: Observer) -> None:
    """Report the agent's ``last_…`` checkpoints (train() calls the class's ``save`` through the instance)."""
    save = agent.save

    def saved(fn: str, *args: Any, **kwargs: Any) -> Any:
        # last_<name>_ep_<E>_rew_... is the checkpoint a resume continues (E epochs done). The agent's
        # save goes through rl_games.algos_torch.torch_ext.save_checkpoint's torch.save, in place:
        # made atomic and fsynced there (durable_saves).
        from rl_games.algos_torch import torch_ext

        with durable_saves(torch_ext):
            result = save(fn, *args, **kwargs)
        if os.path.basename(fn).startswith("last_"):
            observer.saved(int(agent.epoch_num))
        return result

    agent.save = saved
