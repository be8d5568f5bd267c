"""The worker's own command-line entry: :func:`parse_args` over :mod:`isaaclab_mgpu.contract.worker_args`.

A refusal becomes the rank's one ``isaaclab_mgpu.worker: error:`` line on stderr (kept as its
reason) and exit status 2.
"""

from __future__ import annotations

from isaaclab_mgpu.contract.worker_args import WorkerArgs, WorkerArgsError, parse
from isaaclab_mgpu.rank.console import worker_error


def parse_args(argv: list[str]) -> WorkerArgs:
    """Parse ``argv``; exit 2 with one stderr line on any bad or unknown argument."""
    try:
        return parse(argv)
    except WorkerArgsError as exc:
        worker_error(f"{exc} (options: python -m isaaclab_mgpu.worker --help)")
        raise SystemExit(2) from None
