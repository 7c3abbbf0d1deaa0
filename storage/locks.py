"""Advisory file locks (``flock``) for the store.

The OS releases a lock when its process dies, however it dies, so a SIGKILLed run never leaves a
lock held: that is what lets :meth:`ArtifactStore.sweep_tmp` tell debris from work in progress,
and lets two runs that need the same training work directory take turns instead of sharing it.

A lock file is removed by its holder on release. Whoever was waiting on the old file then holds
a lock on a file no longer at that path, so :func:`held_lock` checks, after locking, that the
path still names the file it locked, and starts over when it does not.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def held_lock(path: Path, on_wait: Callable[[], None] | None = None, wait: bool = True) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if needed) for the ``with`` block, waiting for
    another holder if there is one (``on_wait`` is called once before waiting), or raising
    :class:`BlockingIOError` at once when ``wait`` is False. The lock file is removed when the
    block ends."""
    path.parent.mkdir(parents=True, exist_ok=True)
    waited = False
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not wait:
                    raise
                if on_wait is not None and not waited:
                    on_wait()
                waited = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            if _same_file(fd, path):
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # the holder we waited for removed this file: lock the one there now
    try:
        yield
    finally:
        path.unlink(missing_ok=True)  # while still held, so nobody can lock this file and keep it
        os.close(fd)


def _same_file(fd: int, path: Path) -> bool:
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino)
