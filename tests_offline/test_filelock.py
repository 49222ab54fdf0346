"""One writer per resource (trace_lib.filelock): a non-blocking exclusive lock whose file is removed on release,
that never locks or removes what is not a regular lock file, and that retries when its file was replaced."""

from __future__ import annotations

import errno
import fcntl
import os
import stat

import pytest

from trace_lib.filelock import FileLock, locked_directory

pytestmark = pytest.mark.offline


class Busy(Exception):
    pass


def _lock(path) -> FileLock:  # noqa: ANN001
    return FileLock(path, busy=lambda: Busy(f"{path} is busy"))


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_held_lock_refuses_another_holder_at_once_and_release_removes_its_file(tmp_path):
    """The second acquirer gets the caller's error (no chained OSError); release removes the file, twice is a no-op,
    and the lock can then be taken again."""
    path = tmp_path / "x.lock"
    first = _lock(path)
    assert not first.held
    umask = os.umask(0)
    os.umask(umask)
    with first as entered:
        assert entered is first and first.held and path.is_file()
        assert stat.S_IMODE(path.stat().st_mode) == 0o644 & ~umask
        fds = _open_fds()
        with pytest.raises(Busy, match="x.lock is busy") as info:
            _lock(path).acquire()
        assert info.value.__cause__ is None and info.value.__suppress_context__
        assert _open_fds() == fds  # the refused acquirer closed its descriptor
        with pytest.raises(RuntimeError, match="lock already held by this object"):
            first.acquire()
    assert not first.held and not path.exists()
    first.release()
    with _lock(path):
        assert path.exists()
    assert list(tmp_path.iterdir()) == []


def test_a_fifo_or_a_link_at_the_lock_path_is_refused_and_left_as_it_is(tmp_path):
    fifo = tmp_path / "f.lock"
    os.mkfifo(fifo)
    fds = _open_fds()
    with pytest.raises(OSError) as info:
        _lock(fifo).acquire()
    assert info.value.errno == errno.EEXIST and "exists and is not a regular lock file; move it away" in str(info.value)
    assert fifo.exists() and not fifo.is_file() and _open_fds() == fds
    link = tmp_path / "l.lock"
    link.symlink_to(tmp_path / "target")
    with pytest.raises(OSError):
        _lock(link).acquire()
    assert link.is_symlink() and not (tmp_path / "target").exists()


def test_an_unexpected_flock_error_is_raised_as_it_is(tmp_path, monkeypatch):
    def broken(fd: int, how: int) -> None:
        raise OSError(errno.ENOLCK, "no locks available")

    monkeypatch.setattr(fcntl, "flock", broken)
    fds = _open_fds()
    with pytest.raises(OSError) as info:
        _lock(tmp_path / "x.lock").acquire()
    assert info.value.errno == errno.ENOLCK and _open_fds() == fds


@pytest.mark.parametrize("meanwhile", ["replaced", "removed"])
def test_an_acquirer_whose_file_was_replaced_or_removed_meanwhile_locks_the_file_now_at_the_path(tmp_path, monkeypatch,
                                                                                               meanwhile):
    """Between the open and the flock the previous holder released (removed the file) and perhaps another process
    made a new one: the acquirer does not keep the stale file but retries on the one at the path."""
    path = tmp_path / "x.lock"
    real, calls = fcntl.flock, []

    def racing(fd: int, how: int) -> None:
        calls.append(fd)
        if len(calls) == 1:
            path.unlink()
            if meanwhile == "replaced":
                path.write_bytes(b"")
        real(fd, how)

    monkeypatch.setattr(fcntl, "flock", racing)
    fds = _open_fds()
    lock = _lock(path).acquire()
    try:
        assert len(calls) == 2 and _open_fds() == fds + 1  # the stale descriptor was closed
        assert os.fstat(lock._fd).st_ino == os.stat(path).st_ino
    finally:
        lock.release()
    assert not path.exists()


def test_release_leaves_a_file_that_replaced_its_own_and_copes_with_one_already_gone(tmp_path):
    path = tmp_path / "x.lock"
    lock = _lock(path).acquire()
    path.unlink()
    path.write_bytes(b"another holder's")
    lock.release()
    assert path.read_bytes() == b"another holder's" and not lock.held
    lock = _lock(tmp_path / "y.lock").acquire()
    (tmp_path / "y.lock").unlink()
    lock.release()
    assert not lock.held


def test_locked_directory_makes_the_directory_and_on_failure_removes_only_what_it_made_and_left_empty(tmp_path):
    """The directory and its missing parents are made and the lock held inside; a failure removes the directories
    this made while they are empty (deepest first) and keeps those it found or that hold something."""
    out = tmp_path / "a" / "b" / "c"
    with locked_directory(out, ".lock", busy=lambda: Busy("busy")) as yielded:
        assert yielded == out and (out / ".lock").is_file()
    assert out.is_dir() and list(out.iterdir()) == []
    fresh = tmp_path / "x" / "y"
    with pytest.raises(ValueError, match="failed"):
        with locked_directory(fresh, ".lock", busy=lambda: Busy("busy")):
            raise ValueError("failed")
    assert list(tmp_path.iterdir()) == [tmp_path / "a"]
    with pytest.raises(ValueError):
        with locked_directory(fresh, ".lock", busy=lambda: Busy("busy")):
            (fresh.parent / "kept").write_text("")
            raise ValueError("failed")
    assert fresh.parent.is_dir() and not fresh.exists() and os.listdir(fresh.parent) == ["kept"]


def test_locked_directory_held_elsewhere_raises_busy_and_removes_what_it_made(tmp_path):
    out = tmp_path / "d" / "e"
    out.mkdir(parents=True)
    with _lock(out / ".lock"):
        with pytest.raises(Busy):
            with locked_directory(out, ".lock", busy=lambda: Busy("busy")):
                pass
        with pytest.raises(Busy):
            with locked_directory(out / "f", "../.lock", busy=lambda: Busy("busy")):
                pass
        assert sorted(p.name for p in out.iterdir()) == [".lock"]


def _swap_for_a_link(path) -> None:  # noqa: ANN001
    """Move the lock file away and leave a symbolic link to it at its path."""
    path.rename(path.with_name("moved"))
    path.symlink_to(path.with_name("moved"))


def test_a_link_put_at_the_lock_path_is_neither_locked_nor_removed(tmp_path, monkeypatch):
    """The path is compared without following links: a link to the locked file swapped in while acquiring is
    refused (the retry does not open a link), and one swapped in while holding is not removed on release."""
    path = tmp_path / "x.lock"
    lock = _lock(path).acquire()
    _swap_for_a_link(path)
    lock.release()
    assert path.is_symlink() and (tmp_path / "moved").exists()
    path.unlink()
    (tmp_path / "moved").unlink()
    real = fcntl.flock

    def racing(fd: int, how: int) -> None:
        real(fd, how)
        if not path.is_symlink():
            _swap_for_a_link(path)

    monkeypatch.setattr(fcntl, "flock", racing)
    with pytest.raises(OSError) as info:
        _lock(path).acquire()
    assert info.value.errno == errno.ELOOP and path.is_symlink()
