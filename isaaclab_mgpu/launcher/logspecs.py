"""mgpu's per-rank log layout for torchrun: ``torchrun --logs_specs mgpu``.

torch ≥ 2.3 lets a package choose where torchrun puts each worker's ``stdout.log``,
``stderr.log`` and ``error.json``: ``--logs_specs NAME`` loads the class registered as ``NAME``
under the ``torchrun.logs_specs`` entry point (``pyproject.toml`` registers :class:`RankLogsSpecs`
as ``mgpu``). :mod:`isaaclab_mgpu.launcher.build` passes it to every torchrun it starts, so the
files land where :mod:`isaaclab_mgpu.contract.elastic` says: ``<--log_dir>/rank_<global rank>/``.

What goes to a file, what is tee'd to the console and which local ranks are filtered stay
torch's (``DefaultLogsSpecs.reify``): only the folders change. Only the torchrun process imports
this module (it imports torch).

An interpreter without the package installed (or with an install older than the entry point)
makes torchrun stop with "Could not find entrypoint under 'torchrun.logs_specs[mgpu]' key";
:func:`isaaclab_mgpu.launcher.supervise.result.missing_logs_specs` turns that into mgpu's own
message rather than falling back to torch's layout, which mgpu's readers would not find.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from torch.distributed.elastic.multiprocessing.api import DefaultLogsSpecs, LogsDest

from isaaclab_mgpu.contract import elastic

__all__ = ["NAME", "RankLogsSpecs"]

#: The entry point's name: ``torchrun --logs_specs mgpu``.
NAME = "mgpu"


class RankLogsSpecs(DefaultLogsSpecs):
    """torch's ``DefaultLogsSpecs`` with each rank's files in ``<log_dir>/rank_<global rank>/``."""

    def reify(self, envs: dict[int, dict[str, str]]) -> LogsDest:
        """torch's destinations for the local ranks in ``envs``, moved into mgpu's rank folders."""
        root = self._root_log_dir
        if root is None or root == os.devnull:
            return super().reify(envs)
        with tempfile.TemporaryDirectory(prefix="mgpu-logspecs-") as scratch:
            # DefaultLogsSpecs.reify decides the streams and makes its folders under the folder it
            # made once (_run_log_dir); pointed at a scratch folder, it names every file there, and
            # each name is then moved to the rank's own folder. Its files are opened later, by the
            # process context, so none is ever written in the scratch folder.
            self._run_log_dir = scratch
            try:
                dest = super().reify(envs)
            finally:
                self._run_log_dir = None
            # A global rank names one folder on every node (envs' RANK; a bare local rank in tests).
            folders = {n: elastic.make_rank_dir(root, int(e.get("RANK", n))) for n, e in envs.items()}

            def moved(path: str) -> str:
                if not path.startswith(scratch + os.sep):
                    return path  # the console ("") or os.devnull
                found = Path(path)
                if found.parent.name.isdigit() and int(found.parent.name) in folders:
                    return str(folders[int(found.parent.name)] / found.name)
                return str(Path(root) / found.name)  # torch's filtered_*.log of the whole launcher

            for field in ("stdouts", "stderrs", "tee_stdouts", "tee_stderrs", "error_files"):
                setattr(dest, field, {local: moved(p) for local, p in getattr(dest, field).items()})
            dest.filtered_stdout = moved(dest.filtered_stdout)
            dest.filtered_stderr = moved(dest.filtered_stderr)
        for local, path in dest.error_files.items():
            envs[local]["TORCHELASTIC_ERROR_FILE"] = path
        return dest
