"""The ranks' drift check: every ``--drift_interval`` iterations each rank hashes its state and the
ranks compare, so a rank that stopped matching the others is named while it happens, not at the end.

Data-parallel PPO keeps every rank's copy identical only while everything that shapes it is: the
parameters, the optimizer's state and the statistics of any observation normalizer (which each
library must synchronise itself). A rank that drifts trains a different policy silently. The check:

- each back-end's ``drift_source()`` gives its state as three :data:`COMPONENTS`: ``policy``
  (policy and value parameters), ``optimizer`` (moments, step counts, learning rates),
  ``normalizer`` (running statistics, any model buffer; none where the back-end keeps none);
- :func:`hashes` reduces each to 16 hex digits and :func:`words` to 16-bit words, exact in JAX's
  float32 all-gather; they ride in the worker's per-iteration all-gather (:mod:`.worker.metrics`),
  zeros outside the check's iterations, so the check adds no collective;
- :func:`compare` names the first divergence: which rank (the one that differs from the majority;
  on a tie, from rank 0), which component, and since when (:class:`Check` keeps the last iteration
  at which every rank agreed).

Every rank reaches the same verdict at the same iteration, so under ``--on_drift stop`` they stop
together. :class:`Source` and the ``*_source`` functions say where each library keeps that state.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from isaaclab_mgpu.contract.summary import DRIFT_COMPONENTS, Drift

#: The components hashed, in the order a divergence names them.
COMPONENTS = tuple(DRIFT_COMPONENTS)
#: 16-bit words per component hash (16 hex digits).
WORDS = 4
#: Width of this rank's part of the gathered row: a "checked" flag, then the words.
WIDTH = 1 + WORDS * len(COMPONENTS)


def digest(arrays: Iterable[Any]) -> str:
    """16 hex digits of BLAKE2b over the arrays' raw bytes (shape and dtype included), in order."""
    h = hashlib.blake2b(digest_size=8)
    for a in arrays:
        a = np.ascontiguousarray(np.asarray(a))
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def checksum_words(digest: str) -> np.ndarray:
    """16 hex digits as four 16-bit words (exact in JAX's float32 all-gather)."""
    return np.array([int(digest[i : i + 4], 16) for i in range(0, 16, 4)], dtype=np.uint32)


def words_checksum(words: Iterable[Any]) -> str:
    """Inverse of :func:`checksum_words`."""
    return "".join(f"{int(w):04x}" for w in words)


def hashes(components: Mapping[str, Iterable[Any]]) -> dict[str, str]:
    """Each of :data:`COMPONENTS` hashed (a missing one hashes as empty)."""
    return {name: digest(components.get(name, ())) for name in COMPONENTS}


def words(found: Mapping[str, str] | None) -> np.ndarray:
    """This rank's part of the row: 1 and each hash as 16-bit words; zeros when ``found`` is None."""
    if found is None:
        return np.zeros(WIDTH, dtype=np.float64)
    return np.concatenate([[1.0], *(checksum_words(found[name]) for name in COMPONENTS)], dtype=np.float64)


def compare(gathered: np.ndarray, since: int, at: int) -> Drift | None:
    """The divergence in ``gathered`` (one :func:`words` row per rank), or None: equal, or no check."""
    g = np.asarray(gathered, dtype=np.float64)
    if g.shape[0] < 2 or not (g[:, 0] > 0).all():
        return None
    per_rank = g[:, 1:].astype(np.int64).reshape(len(g), len(COMPONENTS), WORDS).tolist()
    keys = {name: [tuple(row[i]) for row in per_rank] for i, name in enumerate(COMPONENTS)}
    differing = [name for name in COMPONENTS if len(set(keys[name])) > 1]
    if not differing:
        return None
    return Drift(rank=_odd_one(keys[differing[0]]), component=differing[0], since_iteration=since,
                 found_at=at, components=tuple(differing))  # fmt: skip


def _odd_one(keys: list[tuple[int, ...]]) -> int:
    """The first rank whose value is not the majority's (a tie goes to rank 0's value)."""
    majority = Counter(keys).most_common(1)[0][0]  # of equal counts, the first seen
    return next(r for r, k in enumerate(keys) if k != majority)


@dataclass
class Check:
    """One rank's drift check through a run: when to hash, and what was found."""

    interval: int
    """``--drift_interval``: check after every this many completed iterations (0: never)."""

    agreed: int = 0
    """The last iteration at which every rank was found equal (the attempt's start until a check)."""

    found: Drift | None = None
    """The first divergence, once found (then the check stops: it is named once)."""

    def due(self, done: int, world_size: int) -> bool:
        """True when the iteration that completes ``done`` iterations is a check."""
        return self.interval > 0 and world_size > 1 and self.found is None and done % self.interval == 0

    def judge(self, gathered: np.ndarray, done: int) -> Drift | None:
        """Compare the gathered rows of the check at ``done``; the divergence when it is new."""
        if self.found is not None:
            return None
        drift = compare(gathered, self.agreed, done)
        if drift is None:
            if (np.asarray(gathered)[:, 0] > 0).all():
                self.agreed = done
            return None
        self.found = drift
        return drift


def tell(found: Drift, note: Callable[[str], None]) -> None:
    """Rank 0: hand ``found`` to mgpu's progress report, or, run by hand, ``note`` it."""
    from isaaclab_mgpu.contract import progress

    reporter = progress.reporter()
    if reporter.enabled:
        reporter.drift(found)
    else:
        note(f"warning: the ranks drifted apart: {found.describe()}")


def torch_components(
    modules: Iterable[Any], optimizer: Any, preprocessors: Iterable[Any] = ()
) -> dict[str, list[Any]]:
    """A torch back-end's :data:`COMPONENTS`; the normalizer: the modules' and ``preprocessors``' buffers."""
    modules = list(modules)
    stats = [*modules, *(p for p in preprocessors if hasattr(p, "named_buffers"))]
    opt = optimizer.state_dict()
    moments = [_host(v) for i in sorted(opt["state"]) for _, v in sorted(opt["state"][i].items())]
    rates = np.array([float(g.get("lr", 0.0)) for g in opt["param_groups"]], dtype=np.float64)
    return {
        "policy": [_host(p) for m in modules for _, p in m.named_parameters()],
        "optimizer": [*moments, rates],
        "normalizer": [_host(b) for m in stats for _, b in m.named_buffers()],
    }


def perturb_torch(modules: Iterable[Any], preprocessors: Iterable[Any] = ()) -> str:
    """``--simulate_fault drift``: nudge the first floating buffer, else the first parameter; say which."""
    import torch

    stats = [p for p in preprocessors if hasattr(p, "named_buffers")]
    modules = list(modules)
    buffers = [b for m in (*stats, *modules) for _, b in m.named_buffers() if b.is_floating_point()]
    target, what = (buffers[0], "normalizer") if buffers else (next(modules[0].parameters()), "policy")
    with torch.no_grad():
        target.view(-1)[0] += 1e-3
    return what


# --- each library's state, as the worker's back-ends and Isaac Lab's path both hold it -----------


@dataclass(frozen=True)
class Source:
    """Where one rank's state is: what the check hashes and what ``--simulate_fault drift`` nudges."""

    components: Callable[[], Mapping[str, Iterable[Any]]]
    """This rank's :data:`COMPONENTS`, as arrays, now."""

    perturb: Callable[[], str]
    """Nudge this rank's state out of step; return the component nudged."""


def rsl_rl_source(alg: Any) -> Source:
    """rsl-rl's ``PPO``: actor and critic (their buffers hold any normalizer) and the optimizer."""
    models = lambda: (alg._raw_actor, alg._raw_critic)  # noqa: E731
    return Source(lambda: torch_components(models(), alg.optimizer), lambda: perturb_torch(models()))


def skrl_torch_source(agent: Any) -> Source:
    """skrl's torch ``PPO`` agent: policy and value models, the optimizer, any running standard scalers."""

    def models() -> list[Any]:
        return [m for m in (agent.policy, agent.value) if m is not None]

    def scalers() -> list[Any]:
        return [getattr(agent, f"_{k}_preprocessor", None) for k in ("observation", "state", "value")]

    return Source(
        lambda: torch_components(models(), agent.optimizer, scalers()),
        lambda: perturb_torch(models(), scalers()),
    )


def skrl_jax_source(agent: Any) -> Source:
    """skrl's JAX ``PPO`` agent: flax parameters, optimizer states and rates, any running scalers."""
    import jax

    def components() -> dict[str, list[Any]]:
        stats = []
        for name in ("_observation_preprocessor", "_state_preprocessor", "_value_preprocessor"):
            state = getattr(getattr(agent, name, None), "state_dict", None)
            state = getattr(state, "params", state)  # skrl's JAX scaler wraps its dict in .params
            if isinstance(state, dict):
                stats += [np.asarray(v) for _, v in sorted(state.items())]
        rates = np.array([float(agent.policy_learning_rate), float(agent.value_learning_rate)])
        leaves = jax.tree.leaves
        models, optimizers = (agent.policy, agent.value), (agent.policy_optimizer, agent.value_optimizer)
        return {
            "policy": [np.asarray(x) for m in models for x in leaves(m.state_dict.params)],
            "optimizer": [*(np.asarray(x) for o in optimizers for x in leaves(o.state)), rates],
            "normalizer": stats,
        }

    def perturb() -> str:
        # one policy parameter, as the worker's skrl JAX back-end has always nudged
        model = agent.policy
        leaves, tree = jax.tree.flatten(model.state_dict.params)
        leaves[0] = leaves[0].at[(0,) * leaves[0].ndim].add(1e-3)
        model.state_dict = model.state_dict.replace(params=jax.tree.unflatten(tree, leaves))
        return "policy"

    return Source(components, perturb)


def rl_games_models(agent: Any) -> list[Any]:
    """rl-games' A2C agent's model (with its ``RunningMeanStd``) and any central value net."""
    central = getattr(agent, "central_value_net", None)
    extra = [central] if getattr(agent, "has_central_value", False) and central is not None else []
    return [agent.model, *extra]


def rl_games_source(agent: Any) -> Source:
    """rl-games' A2C agent: its :func:`rl_games_models` and its optimizer."""
    models = lambda: rl_games_models(agent)  # noqa: E731
    return Source(lambda: torch_components(models(), agent.optimizer), lambda: perturb_torch(models()))


def _host(value: Any) -> np.ndarray:
    """A tensor (or a number) as a host array, in its own dtype."""
    if hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    return np.asarray(value)
