"""The launcher side's notes (``launcher.notes``): every kind has its console line in the sink it goes to."""

import inspect

import pytest

from isaaclab_mgpu.launcher import attempts, scale
from isaaclab_mgpu.launcher.notes import Note
from isaaclab_mgpu.launcher.probe import run as probe_run
from isaaclab_mgpu.launcher.supervise import notes as supervise_notes
from isaaclab_mgpu.report.probe import ProbeDisplay
from isaaclab_mgpu.report.scale import ScaleProgress
from isaaclab_mgpu.report.supervise import tell


def _kinds(*modules) -> set[type]:
    classes = (c for m in modules for _, c in inspect.getmembers(m, inspect.isclass))
    return {c for c in classes if issubclass(c, Note) and c not in (Note, supervise_notes.StoppingNote)}


@pytest.mark.parametrize(
    ("modules", "registry", "count"),
    [
        ((supervise_notes, attempts), tell.registry, 16),  # the supervisor's 14, the attempts loop's 2
        ((probe_run,), ProbeDisplay.__dict__["__call__"].dispatcher.registry, 5),
        ((scale,), ScaleProgress.__dict__["__call__"].dispatcher.registry, 2),
    ],
    ids=["run", "probe", "scale"],
)
def test_every_note_has_a_renderer_in_its_sink(modules, registry, count):
    kinds = _kinds(*modules)
    assert len(kinds) == count, kinds
    assert kinds - set(registry) == set()
