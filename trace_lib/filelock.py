"""One writer per resource: an exclusive, non-blocking ``flock`` on a lock file that is removed on release.

:class:`FileLock` is the one lock of trace-repro (response files, score output directories). Acquiring never
waits: a lock held by another process raises the error the caller supplies (one line naming what is busy).
The lock file is unlinked while the lock is still held and only then closed; an acquirer that locked a file
that was unlinked meanwhile sees a different inode at the path and retries, so two processes never both believe
they hold the lock, and no ``.lock`` file outlives a clean release (a killed holder leaves one behind; the next
acquirer locks it, as the kernel dropped the killed holder's lock). Standard library only.
"""

from __future__ import annotations

import errno
import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator


class FileLock:
    """An exclusive lock on ``path`` (created if missing); ``busy()`` builds the error raised when it is held."""

    def __init__(self, path: Path | str, busy: Callable[[], BaseException]) -> None:
        self.path = Path(path)
        self._busy = busy
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> FileLock:
        """Take the lock or raise ``busy()`` at once.

        Raises:
            BaseException: ``busy()`` when another process holds the lock.
            OSError: the lock file cannot be created or opened, or is not a regular file (EEXIST; left as it is).
        """
        import fcntl

        if self._fd is not None:
            raise RuntimeError(f"{self.path}: lock already held by this object")
        while True:
            # O_NONBLOCK: a FIFO or device at the path must not block the open (it is refused just below)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # never lock, nor remove on release, what is not ours
                os.close(fd)
                raise OSError(errno.EEXIST, "exists and is not a regular lock file; move it away", str(self.path))
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EAGAIN, errno.EACCES):
                    raise self._busy() from None
                raise
            try:
                mine, there = os.fstat(fd), os.stat(self.path, follow_symlinks=False)
            except FileNotFoundError:
                os.close(fd)  # its holder removed it on release after we opened it: take the new one
                continue
            except BaseException:
                os.close(fd)
                raise
            if (mine.st_dev, mine.st_ino) != (there.st_dev, there.st_ino):
                os.close(fd)
                continue
            self._fd = fd
            return self

    def release(self) -> None:
        """Remove the lock file (still holding the lock), then drop the lock; a no-op when not held."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            mine, there = os.fstat(fd), os.stat(self.path, follow_symlinks=False)
            if (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino):
                os.unlink(self.path)
        except OSError:
            pass  # already gone, or a read-only directory: the next acquirer re-locks the file
        finally:
            os.close(fd)  # closing the last descriptor drops the flock

    def __enter__(self) -> FileLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


@contextmanager
def locked_directory(out_dir: Path | str, name: str, busy: Callable[[], BaseException]) -> Iterator[Path]:
    """Hold the exclusive lock ``<out_dir>/<name>`` of an output directory (created if missing, with its missing
    parents; on failure every directory this made is removed again while it is still empty, so a refused or failed
    writer leaves the disk as it found it). Yields ``out_dir``.

    Raises:
        BaseException: ``busy()`` when another process holds it.
        UsageError: ``out_dir`` or a parent of it is a file, a FIFO or another non-directory (nothing is made).
    """
    from trace_lib.outputs import check_output_dir

    out_dir = check_output_dir(Path(out_dir))
    created = [p for p in (out_dir, *out_dir.parents) if not p.exists()]  # deepest first
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(out_dir / name, busy=busy):
            yield out_dir
    except BaseException:
        for directory in created:
            try:
                directory.rmdir()
            except OSError:
                break  # not empty: something was committed, or another writer's files
        raise
