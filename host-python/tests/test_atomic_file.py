"""atomic_file: the final name holds the old file or the complete new one, never a partial
file; a large file it replaces is freed in the background, and nothing is left behind."""

from __future__ import annotations

import os
import threading

import pytest

from torchlens.atomic_file import DEFERRED_FREE_MIN_BYTES, atomic_file


def _join_freeing_threads() -> None:
    for thread in threading.enumerate():
        if thread.name == "torchlens-free-replaced":
            thread.join()


def _hidden(folder) -> list:
    return sorted(name for name in os.listdir(folder) if name.startswith("."))


def test_replacing_a_large_file_frees_it_off_the_callers_path(tmp_path):
    path = tmp_path / "big.tlspec"
    old = os.urandom(1024) * (DEFERRED_FREE_MIN_BYTES // 1024 + 1)
    new = os.urandom(4096) * (DEFERRED_FREE_MIN_BYTES // 4096 + 2)
    path.write_bytes(old)
    with open(path, "rb") as reader:  # a reader of the old file keeps reading the old file
        phases: dict = {}
        with atomic_file(str(path), buffering=0, phase_seconds=phases) as out:
            out.write(new)
        assert set(phases) == {"fsync", "rename"}
        assert path.read_bytes() == new
        assert reader.read() == old
    _join_freeing_threads()
    assert _hidden(tmp_path) == []


def test_a_small_file_is_replaced_without_a_thread(tmp_path):
    path = tmp_path / "small.json"
    path.write_text("old")
    before = threading.active_count()
    with atomic_file(str(path), "w", prefix=".json-") as out:
        out.write("new")
    assert threading.active_count() == before
    assert path.read_text() == "new" and _hidden(tmp_path) == []


def test_a_failure_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "kept.tlspec"
    old = b"x" * (DEFERRED_FREE_MIN_BYTES + 1)
    path.write_bytes(old)
    with pytest.raises(RuntimeError):
        with atomic_file(str(path)) as out:
            out.write(b"partial")
            raise RuntimeError("the writer failed")
    assert path.read_bytes() == old
    _join_freeing_threads()
    assert _hidden(tmp_path) == []


def test_a_symlink_at_the_path_is_replaced_and_its_target_kept(tmp_path):
    target = tmp_path / "target.bin"
    target.write_bytes(b"t" * (DEFERRED_FREE_MIN_BYTES + 1))
    link = tmp_path / "link.tlspec"
    link.symlink_to(target)
    with atomic_file(str(link)) as out:
        out.write(b"new")
    _join_freeing_threads()
    assert not link.is_symlink() and link.read_bytes() == b"new"
    assert target.stat().st_size == DEFERRED_FREE_MIN_BYTES + 1
    assert _hidden(tmp_path) == []
