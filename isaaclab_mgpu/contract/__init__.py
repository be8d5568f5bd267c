"""What crosses between mgpu's processes: one definition of each format, standard library only.

Both sides import this package and nothing here imports either side. Three kinds of process meet
in a run: the launcher (``mgpu``, :mod:`isaaclab_mgpu.launcher`), the ranks
(:mod:`isaaclab_mgpu.rank`) and the tools that read a run afterwards (``mgpu runs``). They share
the exit codes (:mod:`.errors`), the environment the launcher hands the ranks (:mod:`.env`), the
run folder with its ``summary.json`` and ledger (:mod:`.layout`, :mod:`.summary`, :mod:`.events`,
all through :mod:`.records`), the progress channel (:mod:`.progress`), restarts and resume
(:mod:`.resume`), torch elastic's logs (:mod:`.elastic`) and the worker's command line
(:mod:`.worker_args`, :mod:`.settings`), which the launcher parses before it spawns anything;
``docs/architecture.md`` lists every module.

Importing any of it is cheap in any process: no torch, no Rich, no third-party package.
"""
