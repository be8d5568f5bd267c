"""Every patch mgpu applies to an upstream library, one module per library.

Rank side: applied in each rank, never in the ``mgpu`` process.

- :mod:`.isaaclab` — Isaac Lab's, and :func:`~.isaaclab.patched`, which applies every patch a rank
  needs around Isaac Lab's training call;
- :mod:`.rsl_rl` — rsl-rl's ``OnPolicyRunner`` (CPU ranks, observation, the resumed iteration count);
- :mod:`.skrl` — skrl's import-time set-up, its JAX all-reduces and short-run logging, observation,
  the resumed timestep count;
- :mod:`.rl_games` — rl-games' ``A2CBase`` (CPU ranks, observation);
- :mod:`.base` — what they share: the :class:`~.base.Observer` they report to, a scoped swap;
- :mod:`.tensorboard` — TensorBoard's restart marker, for a resumed run's writer;
- :mod:`.gloo` — gloo's small collectives on one node's CPU ranks through shared memory;
- :mod:`.timing` — ``torch.distributed``'s all-reduce and broadcasts timed into the rank's
  progress report (its wait in collectives, for the busy/wait split).

Each patch names the upstream function it changes and why. The Isaac Lab releases they are
written for are :mod:`isaaclab_mgpu.contract.isaaclab_version`'s.
"""
