"""What crosses between mgpu's processes: one definition of each format, standard library only.

Both sides import this package and nothing here imports either side. Three kinds of process meet
in a run: the launcher (``mgpu``, :mod:`isaaclab_mgpu.launcher`), the ranks
(:mod:`isaaclab_mgpu.rank`) and the tools that read a run afterwards (``mgpu runs``). They share:

- :mod:`.errors` — the error hierarchy and the exit codes it maps to; :mod:`.reasons` — why a rank
  gave up, in one line; :mod:`.space` — disk space and the line for a full one;
- :mod:`.env` — the environment variables the launcher hands to the ranks;
- :mod:`.layout` — the run folder's layout; :mod:`.summary` — its ``summary.json``, one typed record;
  :mod:`.events` — its ledger ``events.jsonl``, one typed event per line (node 0's mgpu writes it);
- :mod:`.records` — the one reader and writer of typed records as JSON (the summary, checkpoint
  metadata, progress reports, the nodes' reports to each other), driven by the dataclasses' fields;
- :mod:`.files` — the one atomic file write;
- :mod:`.progress` — the progress report a rank writes and its supervisor (or the probe's parent)
  reads, both halves, and the ranks' reporting API (public as :mod:`isaaclab_mgpu.progress`);
- :mod:`.probe_channel` — what the probe ranks add to the progress channel: their stages, result
  and stack files;
- :mod:`.resume` — restarts, resume and requeue as the launcher and a rank agree on them;
  :mod:`.faults` — the rehearsed faults (``--simulate_fault``);
- :mod:`.signals` — the rank side's one signal recorder; :mod:`.stacks` — the stack-dump signal;
  :mod:`.elastic` — torch elastic's per-rank logs, error files and failure report;
- :mod:`.devices` — the device-list reader (``CUDA_VISIBLE_DEVICES``, ``--gpu_ids``), CUDA's rules;
- :mod:`.lines` — the console lines rank 0 prints and the launcher's bar reads;
- :mod:`.isaaclab_version` — the Isaac Lab releases mgpu drives, checked on both sides;
- :mod:`.text` — which characters of data never reach a terminal or a shell line raw (the launcher
  refuses, quotes or escapes them; a rank escapes them in its own lines);
- :mod:`.worker_args` — the built-in worker's command line, and :mod:`.settings` — what its
  ``env.…=``/``agent.…=`` overrides may set: the launcher parses a rank's arguments with them
  before it spawns anything, the rank parses them again at its start.

Importing any of it is cheap in any process: no torch, no Rich, no third-party package.
"""
