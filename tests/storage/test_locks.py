"""File locks: taking turns on a training work directory, and sweeping only dead runs' tmp/ debris."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

from baleen_storage import new_run_id
from baleen_storage.locks import held_lock


def _held(path) -> bool:
    """Whether someone holds the lock at ``path`` (probing takes it, briefly, when free)."""
    try:
        with held_lock(path, wait=False):
            return False
    except BlockingIOError:
        return True


def test_a_second_holder_waits_for_the_first_and_the_lock_file_goes(tmp_path):
    lock, events = tmp_path / "x.lock", []
    first_in, release = threading.Event(), threading.Event()

    def first():
        with held_lock(lock):
            events.append("first in")
            first_in.set()
            release.wait(10)
            events.append("first out")

    def second():
        first_in.wait(10)
        with held_lock(lock, on_wait=lambda: (events.append("second waits"), release.set())):
            events.append("second in")
            assert _held(lock)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert events == ["first in", "second waits", "first out", "second in"]
    assert not lock.exists() and not _held(lock)


def test_no_wait_raises_while_held(tmp_path):
    lock = tmp_path / "y.lock"
    with held_lock(lock):
        with pytest.raises(BlockingIOError):
            with held_lock(lock, wait=False):
                pass
    with held_lock(lock, wait=False):  # free again
        pass


def test_work_dir_is_held_while_in_use(store):
    with store.work_dir("flipr-abc") as path:
        assert path == store.root / "work" / "flipr-abc"
        assert _held(store.root / "work" / "flipr-abc.lock")
        with pytest.raises(Exception, match="safe name"):
            with store.work_dir("../escape"):
                pass
    assert not (store.root / "work" / "flipr-abc.lock").exists()


def test_sweep_removes_a_killed_writers_debris_but_not_a_live_one(store):
    killed = textwrap.dedent(
        f"""
        import os, signal
        from baleen_storage import ArtifactStore
        store = ArtifactStore({str(store.root)!r})
        with store.writer("passages", run_id="r1", producer="corpus", fingerprint="fp") as w:
            (w.tmp_dir / "half-written.parquet").write_bytes(b"x" * 100)
            os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    assert subprocess.run([sys.executable, "-c", killed], check=False).returncode == -9
    (store.root / "tmp" / "left-by-an-older-version").mkdir()  # an entry without a lock file
    debris = sorted(p.name for p in (store.root / "tmp").iterdir() if not p.name.endswith(".lock"))
    assert len(debris) == 2

    with store.writer("passages", run_id=new_run_id(), producer="corpus", fingerprint="fp2") as live:
        assert sorted(store.sweep_tmp()) == debris
        assert live.tmp_dir.is_dir()  # a live writer's entry is locked and survives
        live.write({"pid": [1], "title": ["T"], "source": ["s"], "source_id": [None], "source_file": ["f"], "source_line": [0], "n_sentences": [1], "n_chars": [1]})
    assert live.ref.rows == 1
    assert list((store.root / "tmp").iterdir()) == []  # no lock files left either
    assert store.sweep_tmp() == []


def test_sweep_removes_a_lock_whose_run_died_before_making_its_entry_but_not_a_held_one(store):
    from baleen_storage.locks import held_lock

    tmp = store.root / "tmp"
    tmp.mkdir(exist_ok=True)
    (tmp / "scratch-killed-before-mkdir.lock").write_text("")  # no entry beside it, no holder
    with held_lock(tmp / "scratch-about-to-mkdir.lock"):  # a live writer between its lock and its entry
        assert store.sweep_tmp() == ["scratch-killed-before-mkdir.lock"]
        assert sorted(p.name for p in tmp.iterdir()) == ["scratch-about-to-mkdir.lock"]
    assert list(tmp.iterdir()) == []
