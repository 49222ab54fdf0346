"""The one output-path policy (trace_lib.outputs, applied by trace_lib.atomic): a path that is not a regular file is
refused and left exactly as it was; every check happens before anything is written."""

from __future__ import annotations

import os
import socket
import stat

import pytest

from trace_lib.atomic import atomic_output, write_text_atomic
from trace_lib.errors import UsageError
from trace_lib.outputs import check_output_dir, check_output_file, check_outside_inputs, file_name, not_regular
from trace_lib.testing.cli_runner import run_cli

pytestmark = pytest.mark.offline


def _fifo(tmp_path):
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def _socket(tmp_path):
    path = tmp_path / "sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.close()
    return path


def _symlink_to_fifo(tmp_path):
    link = tmp_path / "link"
    link.symlink_to(_fifo(tmp_path))
    return link


def _directory(tmp_path):
    path = tmp_path / "dir"
    path.mkdir()
    return path


def _read_only_file(tmp_path):
    path = tmp_path / "ro.txt"
    path.write_text("keep me\n")
    path.chmod(0o444)
    return path


SPECIAL = {"fifo": _fifo, "socket": _socket, "symlink to a fifo": _symlink_to_fifo, "directory": _directory,
           "read-only file": _read_only_file}


def _snapshot(tmp_path):
    return {p.relative_to(tmp_path): (os.lstat(p).st_mode, os.lstat(p).st_ino) for p in tmp_path.rglob("*")}


@pytest.mark.parametrize("make", SPECIAL.values(), ids=SPECIAL.keys())
def test_the_atomic_writer_refuses_a_target_that_is_not_a_writable_regular_file(tmp_path, make):
    target = make(tmp_path)
    before = _snapshot(tmp_path)
    with pytest.raises(UsageError, match="regular files only|read-only"):
        write_text_atomic(target, "x")
    with pytest.raises(UsageError):
        with atomic_output(target):
            pytest.fail("the block must not run")  # checked before any work
    assert _snapshot(tmp_path) == before  # same kind, same inode, no temp file left


def test_a_target_swapped_for_a_fifo_while_writing_is_not_replaced(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(UsageError, match="a FIFO"):
        with atomic_output(target) as handle:
            handle.write(b"data")
            os.mkfifo(target)
    assert stat.S_ISFIFO(os.lstat(target).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_a_parent_that_is_a_file_is_one_line_and_nothing_is_created(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match=r"file: is a regular file, not a directory"):
        write_text_atomic(tmp_path / "file" / "sub" / "out.txt", "x")
    for check in (check_output_dir, check_output_file):
        with pytest.raises(UsageError, match="regular file"):
            check(tmp_path / "file" / "sub" / "out", flag="--out")
    with pytest.raises(UsageError) as refused:  # the line names the file in the way, not the path under it
        check_output_dir(tmp_path / "file" / "sub", flag="--out")
    assert refused.value.render() == (f"{tmp_path / 'file'}: --out: is a regular file, not a directory, so "
                                      f"{tmp_path / 'file' / 'sub'} cannot be created under it")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_output_checks_create_nothing_and_accept_new_paths(tmp_path):
    assert check_output_dir(tmp_path / "a" / "b", flag="--out") == tmp_path / "a" / "b"
    assert check_output_file(tmp_path / "f.json", flag="--out") == tmp_path / "f.json"
    with pytest.raises(UsageError, match="directory does not exist"):  # a file's parents are not created
        check_output_file(tmp_path / "a" / "f.json", flag="--out")
    with pytest.raises(UsageError, match="a FIFO, not a directory"):
        check_output_dir(_fifo(tmp_path), flag="--out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


@pytest.mark.parametrize("name", ["", ".", "..", "../../x", "a/b", ".hidden", "x\0y", "x\ny", "x\ty", "x\x7fy"])
def test_a_file_name_flag_is_one_path_component(name):
    with pytest.raises(UsageError, match="--stem"):
        file_name(name, flag="--stem")


@pytest.mark.parametrize("make", [_fifo, _symlink_to_fifo, _read_only_file], ids=["fifo", "symlink", "read-only"])
def test_env_constraints_out_refuses_a_special_path_in_one_line(tmp_path, make):
    target = make(tmp_path)
    before = _snapshot(tmp_path)
    result = run_cli(["env", "constraints", "--out", str(target)])
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: ") and "--out" in lines[0] and str(target) in lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert _snapshot(tmp_path) == before


def test_a_failed_run_leaves_no_empty_tree_but_keeps_files_and_what_existed(tmp_path):
    from trace_lib.outputs import no_empty_tree_left

    root = tmp_path / "new" / "data"
    with pytest.raises(OSError):
        with no_empty_tree_left(root):
            (root / "snapshots" / "erqa").mkdir(parents=True)
            raise OSError("download failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # 'new' was created by the run: gone too
    with no_empty_tree_left(root):
        (root / "a").mkdir(parents=True)
        (root / "a" / "kept.txt").write_text("x")
        (root / "empty").mkdir()
    assert (root / "a" / "kept.txt").is_file() and not (root / "empty").exists()
    (tmp_path / "existing").mkdir()
    with no_empty_tree_left(tmp_path / "existing"):
        pass
    assert (tmp_path / "existing").is_dir()  # it was there before


def test_a_dangling_link_is_not_an_output_directory_to_create(tmp_path, capsys):
    from trace_lib.cli.main import main
    from trace_lib.options import check_directory

    dangling = tmp_path / "campaign"
    dangling.symlink_to(tmp_path / "nowhere")
    for path in (dangling, dangling / "sub"):
        with pytest.raises(UsageError) as refused:
            check_output_dir(path, flag="--campaign-root")
        assert "is a symbolic link, not a directory" in str(refused.value)
    with pytest.raises(UsageError, match="dangling symbolic link"):
        check_directory(str(dangling), field="--campaign-root")
    assert main(["status", "--campaign-root", str(dangling), "--no-gpu"]) == 2  # before any work, one line
    assert "dangling symbolic link" in capsys.readouterr().err
    assert not (tmp_path / "nowhere").exists()


def test_an_output_inside_an_input_tree_is_refused_through_links_too(tmp_path):
    """Inside, equal to, or reached through a link into a tree the command reads: refused naming the flag; beside
    or above it: accepted. Nothing is created either way."""
    archive = tmp_path / "archive"
    (archive / "runs").mkdir(parents=True)
    (tmp_path / "alias").symlink_to(archive)
    inputs = [("archive", archive)]
    for out in (archive, archive / "runs" / "new", tmp_path / "alias" / "x"):
        with pytest.raises(UsageError) as refused:
            check_outside_inputs(out, inputs, flag="--out")
        assert refused.value.render() == (f"{out}: --out: lies inside the archive this command reads ({archive}); "
                                          "outputs are never written into an input; name a directory outside it")
    for out in (tmp_path, tmp_path / "archive-2", tmp_path / "reports"):
        assert check_outside_inputs(out, inputs, flag="--out") == out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alias", "archive"]


def test_a_failed_block_takes_away_the_files_it_recorded_and_their_new_directories(tmp_path):
    """``NewFiles``: what a failing block wrote (recorded before each write) goes, in a root that existed before
    too, with the directories made for it; what was there before, and what was not recorded, stays."""
    from trace_lib.outputs import no_empty_tree_left

    root = tmp_path / "work"
    (root / "media" / "aa").mkdir(parents=True)
    (root / "media" / "aa" / "old.png").write_bytes(b"old")
    with pytest.raises(OSError):
        with no_empty_tree_left(root) as new:
            new.add(root / "media" / "aa" / "old.png").write_bytes(b"old")  # there before: not recorded
            target = new.add(root / "media" / "bb" / "new.png")
            target.parent.mkdir(parents=True)
            target.write_bytes(b"new")
            (root / "kept.txt").write_text("not recorded")
            raise OSError("disk full")
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == [
        "kept.txt", "media", "media/aa", "media/aa/old.png"]
    with no_empty_tree_left(root) as new:  # a block that succeeds keeps what it wrote
        new.add(root / "media" / "cc" / "x.png").parent.mkdir()
        (root / "media" / "cc" / "x.png").write_bytes(b"x")
    assert (root / "media" / "cc" / "x.png").is_file()


def test_a_failed_atomic_write_removes_the_directories_it_made(tmp_path, monkeypatch):
    """A report whose write fails (ENOSPC at its fsync) leaves no empty output directory behind (summarize's
    default ``<campaign>/results`` was left so), for one file and for a set."""
    import errno

    from trace_lib.atomic import atomic_outputs

    def fsync(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match="No space left"):
        write_text_atomic(tmp_path / "results" / "deep" / "summary.md", "x")
    with pytest.raises(OSError, match="No space left"):
        with atomic_outputs() as files:
            with files.output(tmp_path / "a" / "summary.md") as handle:
                handle.write(b"x")
    assert list(tmp_path.iterdir()) == []


def test_what_is_not_a_regular_file_is_said_in_words(tmp_path):
    """A missing path is nothing to report; a dangling link is a link (not a missing file); a path under a file
    says why it cannot be there."""
    (tmp_path / "file").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert not_regular(tmp_path / "file") is None and not_regular(tmp_path / "absent") is None
    assert not_regular(tmp_path / "dangling") == "is a symbolic link, not a regular file"
    assert not_regular(_fifo(tmp_path)) == "is a FIFO, not a regular file"
    assert not_regular(tmp_path / "file" / "sub") == "Not a directory"


def test_a_file_with_any_write_bit_may_be_replaced(tmp_path):
    """Read-only on purpose means no write bit at all: a file only its group may write is still replaceable."""
    target = tmp_path / "shared.json"
    target.write_text("{}")
    target.chmod(0o464)
    assert write_text_atomic(target, "[]") and target.read_text() == "[]"


def test_a_file_flag_naming_a_directory_is_refused_as_such(tmp_path):
    for name in ("..", str(tmp_path / "..")):
        with pytest.raises(UsageError) as refused:
            check_output_file(name, flag="--out")
        assert refused.value.render() == f"--out: names a directory, not a file (found {name!r})"


@pytest.mark.parametrize(("read_only_fs", "reason"), [(True, "on a read-only filesystem"),
                                                      (False, "not writable by this user")])
def test_an_output_directory_that_cannot_be_written_says_why(tmp_path, monkeypatch, read_only_fs, reason):
    """Checked before any work (as root every directory is writable, so the refusal is simulated)."""
    from types import SimpleNamespace

    monkeypatch.setattr("trace_lib.outputs.os.access", lambda path, mode: False)
    flags = SimpleNamespace(f_flag=os.ST_RDONLY if read_only_fs else 0)
    monkeypatch.setattr("trace_lib.outputs.os.statvfs", lambda path: flags)
    with pytest.raises(UsageError) as refused:
        check_output_dir(tmp_path / "new", flag="--out")
    assert refused.value.render() == (f"{tmp_path}: --out: directory is {reason}, so {tmp_path / 'new'} cannot be "
                                      "written")


def test_a_recording_block_records_the_atomic_writes_under_its_root_only(tmp_path):
    """``NewFiles.recording``: writers that know nothing of the block (``write_text_atomic`` here) have the files
    they create under the root recorded, so a failure takes them away; a file replaced, one outside the root and
    one written after the block stay."""
    from trace_lib.outputs import no_empty_tree_left

    root, outside = tmp_path / "images", tmp_path / "elsewhere.txt"
    root.mkdir()
    (root / "old.png").write_text("old")
    with pytest.raises(OSError):
        with no_empty_tree_left(root) as new, new.recording():
            write_text_atomic(root / "deep" / "new.png", "new")
            write_text_atomic(root / "old.png", "replaced")
            write_text_atomic(outside, "not under the root")
            raise OSError("disk full")
    assert sorted(p.name for p in root.rglob("*")) == ["old.png"] and (root / "old.png").read_text() == "replaced"
    assert outside.read_text() == "not under the root"
    with no_empty_tree_left(root) as new, new.recording():
        pass
    write_text_atomic(root / "after.png", "x")
    assert new.files == [] and (root / "after.png").exists()

