"""trace_lib.atomic: exact bytes on success; on any failure no target change and no temp file left behind."""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat

import pytest

from trace_lib.atomic import (
    TEMP_SUFFIX,
    atomic_output,
    temp_name,
    write_bytes_atomic,
    write_json_atomic,
    write_lines_atomic,
    write_text_atomic,
)


class _Boom(Exception):
    pass


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_success_writes_exact_bytes_and_returns_their_sha256(tmp_path):
    data = b"\x00binary\r\n\xff"
    assert write_bytes_atomic(tmp_path / "a.bin", data) == _sha(data)
    assert (tmp_path / "a.bin").read_bytes() == data

    assert write_text_atomic(tmp_path / "t.txt", "é\nx\r\n") == _sha("é\nx\r\n".encode())
    assert (tmp_path / "t.txt").read_bytes() == "é\nx\r\n".encode()  # no newline translation

    assert write_lines_atomic(tmp_path / "l.jsonl", iter(["a", "ü"])) == _sha("a\nü\n".encode())
    assert (tmp_path / "l.jsonl").read_bytes() == "a\nü\n".encode()

    with atomic_output(tmp_path / "h.txt", "w") as handle:
        handle.write("π\n")
    assert (tmp_path / "h.txt").read_bytes() == "π\n".encode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin", "h.txt", "l.jsonl", "t.txt"]


@pytest.mark.parametrize("kwargs", [
    {},
    {"indent": 2, "sort_keys": True, "ensure_ascii": False},
    {"sort_keys": True, "ensure_ascii": False, "separators": (",", ":"), "trailing_newline": False},
])
def test_json_bytes_are_json_dumps_plus_newline(tmp_path, kwargs):
    value = {"b": [1, 2.5, None], "a": "ü"}
    newline = kwargs.pop("trailing_newline", True)
    expected = (json.dumps(value, **kwargs) + ("\n" if newline else "")).encode("utf-8")
    assert write_json_atomic(tmp_path / "v.json", value, trailing_newline=newline, **kwargs) == _sha(expected)
    assert (tmp_path / "v.json").read_bytes() == expected


def test_an_exception_inside_the_context_leaves_no_file_and_no_temp(tmp_path):
    target = tmp_path / "sub" / "out.bin"
    with pytest.raises(_Boom):
        with atomic_output(target) as handle:
            handle.write(b"half")
            assert os.path.dirname(handle.name) == str(target.parent)  # temp lives beside the target
            raise _Boom
    assert list(tmp_path.iterdir()) == []  # no temp, and the directory made for it goes again


@pytest.mark.parametrize("interrupt", [_Boom, KeyboardInterrupt])
def test_an_existing_file_is_untouched_on_failure(tmp_path, interrupt):
    target = tmp_path / "keep.jsonl"
    target.write_bytes(b"old\n")

    def lines():
        yield "new"
        raise interrupt

    with pytest.raises(interrupt):
        write_lines_atomic(target, lines())
    with pytest.raises(interrupt):
        with atomic_output(target) as handle:
            handle.write(b"new")
            raise interrupt
    assert target.read_bytes() == b"old\n"
    assert list(tmp_path.iterdir()) == [target]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_json_nan_is_refused_with_a_clear_error_and_nothing_written(tmp_path, bad):
    target = tmp_path / "scores.json"
    target.write_text("{}\n")
    with pytest.raises(ValueError, match=r"scores\.json: refusing to write NaN or Infinity"):
        write_json_atomic(target, {"score": [1.0, bad]})
    assert target.read_text() == "{}\n"
    assert list(tmp_path.iterdir()) == [target]


def test_text_that_does_not_fit_the_encoding_writes_nothing(tmp_path):
    with pytest.raises(UnicodeEncodeError):
        write_text_atomic(tmp_path / "m.json", "ü", encoding="ascii")
    assert list(tmp_path.iterdir()) == []


def test_a_bad_mode_or_encoding_leaves_nothing(tmp_path):
    with pytest.raises(ValueError, match="mode must be one of"):
        with atomic_output(tmp_path / "x", "ab"):
            pass
    with pytest.raises(LookupError):
        with atomic_output(tmp_path / "x", "w", encoding="no-such-codec"):
            pass
    assert list(tmp_path.iterdir()) == []


def test_temp_names_are_hidden_unique_and_marked_incomplete(tmp_path):
    names = {temp_name(tmp_path / ".marker.json") for _ in range(50)}
    assert len(names) == 50
    assert all(n.startswith(".marker.json.") and n.endswith(TEMP_SUFFIX) for n in names)


def test_new_files_get_umask_permissions_not_private_temp_ones(tmp_path):
    old = os.umask(0o022)
    try:
        write_bytes_atomic(tmp_path / "f", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o644


def _write_set(writes):
    """Write ``(path, bytes)`` pairs as one file set; a bytes value of None raises Ctrl-C half-way through."""
    from trace_lib.atomic import atomic_outputs

    with atomic_outputs() as files:
        for path, data in writes:
            with files.output(path) as handle:
                handle.write(data or b"half")
                if data is None:
                    raise KeyboardInterrupt


def _old_pair(tmp_path):
    a, b = tmp_path / "report.md", tmp_path / "report.json"
    a.write_bytes(b"old md\n")
    b.write_bytes(b"old json\n")
    return a, b


@pytest.mark.parametrize("link", [True, False], ids=["hard link aside", "copy aside"])
def test_a_file_set_goes_in_whole_or_not_at_all(tmp_path, monkeypatch, link):
    import errno

    a, b = _old_pair(tmp_path)
    if not link:  # a filesystem without hard links: the old files are copied aside
        monkeypatch.setattr("trace_lib.atomic.os.link", lambda *args: (_ for _ in ()).throw(
            OSError(errno.EPERM, "no links here")))
    real = os.replace

    def failing(src, dst):
        if str(dst) == str(b):  # the second rename fails, after the first went in
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(src, dst)

    monkeypatch.setattr("trace_lib.atomic.os.replace", failing)
    with pytest.raises(OSError):
        _write_set([(a, b"new\n"), (b, b"new\n")])
    assert (a.read_bytes(), b.read_bytes()) == (b"old md\n", b"old json\n")  # the first put back
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "report.md"]  # no temp, no aside
    monkeypatch.setattr("trace_lib.atomic.os.replace", real)
    _write_set([(a, b"new\n"), (b, b"new\n")])
    assert (a.read_bytes(), b.read_bytes()) == (b"new\n", b"new\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "report.md"]


def test_a_file_set_whose_block_fails_writes_nothing(tmp_path):
    a, b = _old_pair(tmp_path)
    new = tmp_path / "new.png"
    with pytest.raises(KeyboardInterrupt):
        _write_set([(new, b"png"), (a, None)])
    assert (a.read_bytes(), b.read_bytes()) == (b"old md\n", b"old json\n") and not new.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "report.md"]


def test_a_file_set_refuses_a_target_that_is_not_a_regular_file(tmp_path):
    from trace_lib.errors import UsageError

    a, _ = _old_pair(tmp_path)
    fifo = tmp_path / "report.png"
    os.mkfifo(fifo)
    with pytest.raises(UsageError):
        _write_set([(a, b"new\n"), (fifo, b"png")])
    assert a.read_bytes() == b"old md\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "report.md", "report.png"]


def _fsyncs(monkeypatch):
    """Record each ``os.fsync``: ``("dir", path)`` for a directory, else ``("file", size at that moment)``."""
    calls = []
    real = os.fsync

    def spy(fd):
        st = os.fstat(fd)
        calls.append(("dir", None) if stat.S_ISDIR(st.st_mode) else ("file", st.st_size))
        return real(fd)

    monkeypatch.setattr("trace_lib.atomic.os.fsync", spy)
    return calls


def test_a_durable_write_fsyncs_every_byte_then_the_directory_entry(tmp_path, monkeypatch):
    """The data is flushed and fsynced before the rename, the directory after it; ``durable=False`` skips both."""
    calls = _fsyncs(monkeypatch)
    write_bytes_atomic(tmp_path / "a.bin", b"x" * 10)
    assert calls == [("file", 10), ("dir", None)]
    calls.clear()
    with atomic_output(tmp_path / "b.bin", durable=False) as handle:
        handle.write(b"y")
    assert calls == [] and (tmp_path / "b.bin").read_bytes() == b"y"
    from trace_lib.atomic import atomic_outputs

    with atomic_outputs() as files:
        with files.output(tmp_path / "c.bin") as handle:
            handle.write(b"abc")
    assert calls == [("file", 3), ("dir", None)]


def test_a_failed_fsync_names_the_file_being_written(tmp_path, monkeypatch):
    import errno

    def failing(fd):
        raise OSError(errno.EIO, os.strerror(errno.EIO))  # names no file, as os.fsync's error does

    monkeypatch.setattr("trace_lib.atomic.os.fsync", failing)
    target = tmp_path / "out.json"
    with pytest.raises(OSError) as failed:
        write_bytes_atomic(target, b"{}")
    assert failed.value.filename == str(target) and list(tmp_path.iterdir()) == []


def test_text_is_utf_8_whatever_the_locale(tmp_path):
    import subprocess
    import sys

    code = ("import sys; from trace_lib.atomic import atomic_output\n"
            "with atomic_output(sys.argv[1], 'w') as handle:\n    handle.write('\\u00e9\\u03c0')\n")
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0",
           "PYTHONIOENCODING": "ascii"}
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "t.txt")], env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "t.txt").read_bytes() == "éπ".encode("utf-8")


def test_a_temp_name_another_writer_holds_is_never_reused(tmp_path, monkeypatch):
    """Two writers of one target draw their temp names at random; should a name be taken, the file there is left
    alone and another name drawn."""
    taken = tmp_path / ".out.txt.aaaaaaaa.incomplete"
    taken.write_bytes(b"another writer's half")
    names = iter(["aaaaaaaa", "bbbbbbbb"])
    monkeypatch.setattr("trace_lib.atomic.secrets.token_hex", lambda n: next(names))
    write_text_atomic(tmp_path / "out.txt", "mine")
    assert (tmp_path / "out.txt").read_text() == "mine" and taken.read_bytes() == b"another writer's half"


def test_a_file_set_that_fails_half_way_removes_the_new_files_it_put_in(tmp_path, monkeypatch):
    """The first target did not exist: once the second rename fails, the first is removed again (nothing new is
    left beside the old files)."""
    import errno

    new, old = tmp_path / "new.md", tmp_path / "old.json"
    old.write_bytes(b"old\n")
    real = os.replace

    def failing(src, dst):
        if str(dst) == str(old):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(src, dst)

    monkeypatch.setattr("trace_lib.atomic.os.replace", failing)
    with pytest.raises(OSError):
        _write_set([(new, b"new\n"), (old, b"new\n")])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.json"] and old.read_bytes() == b"old\n"
    monkeypatch.setattr("trace_lib.atomic.os.replace", real)
    _write_set([(new, b"new\n"), (old, b"new\n")])  # new files go in with the others
    assert (new.read_bytes(), old.read_bytes()) == (b"new\n", b"new\n")


def test_a_copy_aside_that_fails_leaves_no_partial_copy(tmp_path, monkeypatch):
    import errno
    import shutil

    a, b = _old_pair(tmp_path)
    monkeypatch.setattr("trace_lib.atomic.os.link", lambda *args: (_ for _ in ()).throw(
        OSError(errno.EPERM, "no links here")))

    def full_disk(src, dst):
        with open(dst, "wb") as half:
            half.write(b"ol")  # half a copy, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(shutil, "copy2", full_disk)
    with pytest.raises(OSError):
        _write_set([(a, b"new\n"), (b, b"new\n")])
    assert (a.read_bytes(), b.read_bytes()) == (b"old md\n", b"old json\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "report.md"]


def test_a_target_swapped_for_a_fifo_after_it_was_staged_is_not_replaced(tmp_path):
    from trace_lib.atomic import atomic_outputs
    from trace_lib.errors import UsageError

    a, b = _old_pair(tmp_path)
    with pytest.raises(UsageError, match="a FIFO"):
        with atomic_outputs() as files:
            for path in (a, b):
                with files.output(path) as handle:
                    handle.write(b"new\n")
            b.unlink()
            os.mkfifo(b)  # the second target changes before the set goes in: nothing is replaced
    assert a.read_bytes() == b"old md\n" and stat.S_ISFIFO(os.lstat(b).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "report.md"]


def test_staged_or_atomic_writes_into_the_set_when_given_one(tmp_path):
    from trace_lib.atomic import atomic_outputs, staged_or_atomic

    target = tmp_path / "plot.png"
    with pytest.raises(KeyboardInterrupt):
        with atomic_outputs() as files:
            with staged_or_atomic(target, into=files) as handle:
                handle.write(b"png")
            raise KeyboardInterrupt  # the set fails: its staged file never goes in
    assert list(tmp_path.iterdir()) == []
    with staged_or_atomic(target) as handle:
        handle.write(b"png")
    assert target.read_bytes() == b"png"
