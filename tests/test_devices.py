"""The one device-list reader (contract/devices.py): CUDA_VISIBLE_DEVICES as CUDA reads it."""

from __future__ import annotations

import pytest

from isaaclab_mgpu.contract.devices import (
    AMBIGUOUS,
    MALFORMED,
    NEGATIVE,
    OUT_OF_RANGE,
    REPEATED,
    UNKNOWN,
    identity,
    parse_device_list,
)

UUIDS = ("GPU-00000000-aaaa", "GPU-00000001-aaaa", "GPU-11111111-aaaa")


@pytest.mark.parametrize(
    ("value", "entries"),
    [
        ("0,1,2", ("0", "1", "2")),
        ("", ()),
        ("  ", ()),
        (" 1 , 3 ", ("1", "3")),
        ("01", ("1",)),
        ("GPU-8f6e1c2a-1111-2222-3333-444455556666,1", ("GPU-8f6e1c2a-1111-2222-3333-444455556666", "1")),
        ("MIG-GPU-8f6e1c2a/1/0", ("MIG-GPU-8f6e1c2a/1/0",)),
    ],
)
def test_a_valid_list_is_read_to_its_end(value, entries):
    d = parse_device_list(value, count=4)
    assert (d.entries, d.visible, d.stop, d.reason, d.valid) == (entries, entries, None, None, True)


@pytest.mark.parametrize(
    ("value", "entries", "stop", "reason", "hidden"),
    [
        ("-1", (), "-1", NEGATIVE, ()),
        ("0,-1,1", ("0",), "-1", NEGATIVE, ("1",)),
        ("0,abc,1", ("0",), "abc", MALFORMED, ("1",)),
        ("0,,1", ("0",), "", MALFORMED, ("1",)),
        ("2,4,1", ("2",), "4", OUT_OF_RANGE, ("1",)),
        ("0,1,0", ("0", "1"), "0", REPEATED, ()),
    ],
)
def test_reading_stops_at_the_first_invalid_entry(value, entries, stop, reason, hidden):
    d = parse_device_list(value, count=4)
    assert (d.entries, d.stop, d.reason, d.hidden) == (entries, stop, reason, hidden)
    assert d.valid == (reason == NEGATIVE)  # -1 is how one hides GPUs, not a mistake
    assert (d.problem is None) == (d.fix is None)


def test_a_gpu_listed_twice_leaves_none_visible():
    assert parse_device_list("1,01", count=4).visible == ()
    # the same GPU by index and by UUID prefix, known once NVML's UUIDs are
    d = parse_device_list("0,GPU-00000000", uuids=UUIDS)
    assert d.reason == REPEATED and "listed twice" in (d.problem or "")
    assert parse_device_list("0,GPU-00000000").valid  # without UUIDs they cannot be told apart


@pytest.mark.parametrize(
    ("value", "reason", "words"),
    [
        ("GPU-deadbeef", UNKNOWN, "not a GPU of this machine"),
        ("GPU-0000000", AMBIGUOUS, "matches several GPUs"),
        ("3", OUT_OF_RANGE, "GPUs 0..2"),
    ],
)
def test_uuids_and_indices_are_checked_against_the_gpus_when_known(value, reason, words):
    d = parse_device_list(value, uuids=UUIDS)
    assert d.reason == reason and words in (d.problem or "")
    assert parse_device_list(value).valid  # unknown GPUs: taken as given


def test_identity_names_one_physical_gpu():
    assert identity("1", UUIDS) == identity("GPU-00000001", UUIDS) == UUIDS[1]
    assert identity("GPU-0000000", UUIDS) is None and identity("5", UUIDS) is None
    assert identity("MIG-x/1/0", UUIDS) == "MIG-x/1/0" and identity("7", None) == "7"
