"""Every patch mgpu applies to an upstream library, one module per library; applied in each rank only.

:mod:`.rsl_rl`, :mod:`.skrl`, :mod:`.rl_games` and :mod:`.isaaclab` (whose :func:`~.isaaclab.patched`
applies every patch a rank needs around Isaac Lab's training call); :mod:`.tensorboard`, the restart
marker of a resumed run's writer; :mod:`.gloo`, one node's small CPU collectives through shared
memory; :mod:`.timing`, the collectives' wait in the rank's progress report; :mod:`.base`, what
they share. Each patch names the upstream function it changes and why. The Isaac Lab releases they
are written for are :mod:`isaaclab_mgpu.contract.isaaclab_version`'s.
"""
