"""The launcher side's notes (``launcher.notes``): every kind a run gives has its console line."""

import inspect

from isaaclab_mgpu.launcher import attempts
from isaaclab_mgpu.launcher.notes import Note
from isaaclab_mgpu.launcher.supervise import notes as supervise_notes
from isaaclab_mgpu.report.supervise import tell


def _kinds(module) -> set[type]:
    classes = (c for _, c in inspect.getmembers(module, inspect.isclass))
    return {c for c in classes if issubclass(c, Note) and c is not Note}


def test_every_note_of_a_run_has_a_renderer():
    kinds = _kinds(supervise_notes) | _kinds(attempts)
    assert len(kinds) >= 16, kinds  # the supervisor's 14 and the attempts loop's 2
    assert kinds - set(tell.registry) == set()
