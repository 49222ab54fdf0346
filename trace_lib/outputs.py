"""The one output-path policy of trace-repro: what a command may write, checked before any work or network.

- A file trace-repro writes is a *regular file*: a path that names a device, FIFO, socket, directory or a symbolic
  link (to anything) is refused, never replaced (:func:`check_replaceable`; :mod:`trace_lib.atomic` applies it to
  every write, so every writer inherits it).
- A name the user gives for a file inside an output directory (``--stem``) is one path component: never empty,
  ``.``, ``..`` or holding a separator, so nothing lands outside the directory the user named (:func:`file_name`).
- An output directory (``--out``, ``--dest``, ``--log-dir``, ``--campaign-root``) is checked up front without
  creating anything (:func:`check_output_dir`): it is a directory, or it does not exist yet and its nearest existing
  ancestor is a writable directory; writers create it (and its missing parents, the ones the user named) only when
  they write. An output *file* (``env constraints --out FILE``) goes into a directory that exists already, as a
  shell redirection does: trace-repro creates the directories it is named, never the parents of a file
  (:func:`check_output_file`).
- An output directory never lies in a tree the command reads (an archive, a data root, the reference run of a
  diagnosis): writing there would change the input under the command, or the next reader's
  (:func:`check_outside_inputs`).

Every refusal is a :class:`~trace_lib.errors.UsageError` (one line naming the flag and the path; exit 2).
"""

from __future__ import annotations

import errno
import os
import stat
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Iterable, Iterator

from trace_lib.errors import UsageError

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


def kind(mode: int) -> str:
    """What ``mode`` (an ``lstat`` mode) names, in words: ``"a regular file"``, ``"a FIFO"``, ..."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return "a regular file" if stat.S_ISREG(mode) else "a special file"


def not_regular(path: Path | str) -> str | None:
    """What is wrong with ``path`` when something other than a regular file is there (None when it is one or
    nothing is there), in words, without opening it."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if not os.path.islink(path):
            return None
        mode = os.lstat(path).st_mode  # a dangling link
    except OSError as exc:  # e.g. a file where a directory of the path should be
        return exc.strerror
    return None if stat.S_ISREG(mode) else f"is {kind(mode)}, not a regular file"


def check_replaceable(path: Path | str, *, flag: str | None = None) -> Path:
    """``path`` is absent or a writable regular file (a link is not followed), so renaming a new file onto it
    replaces only what trace-repro may replace.

    Raises:
        UsageError: ``path`` names a directory, device, FIFO, socket or symbolic link, or a regular file without
            any write permission bit (read-only on purpose), or runs under a file.
    """
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return path
    except NotADirectoryError:
        raise _not_a_directory_parent(path, flag) from None
    if not stat.S_ISREG(mode):
        raise UsageError(f"is {kind(mode)}; trace-repro writes regular files only and never replaces one that "
                         "is not", file=str(path), field=flag, hint="name a new file or a regular file")
    if not mode & 0o222:
        raise UsageError("is read-only (no write permission); trace-repro does not replace it", file=str(path),
                         field=flag, hint="name another file, or make it writable (chmod u+w) if it may go")
    return path


def _nearest_existing(path: Path) -> tuple[Path, os.stat_result]:
    """The nearest ancestor-or-self of ``path`` that exists (links followed), with its stat: a directory, or the file
    the path runs under."""
    current = path.absolute()
    while True:
        try:
            return current, os.stat(current)
        except (FileNotFoundError, NotADirectoryError):
            if os.path.islink(current):  # a dangling link exists: as a link to nothing, never a directory
                return current, os.lstat(current)
            if current.parent == current:
                raise
            current = current.parent


def _not_a_directory_parent(path: Path, flag: str | None) -> UsageError:
    existing, st = _nearest_existing(path.parent)
    return UsageError(f"is {kind(st.st_mode)}, not a directory, so {path} cannot be written", file=str(existing),
                      field=flag)


def _check_writable_dir(directory: Path, flag: str | None, target: Path) -> None:
    if not os.access(directory, os.W_OK | os.X_OK):
        reason = "on a read-only filesystem" if _read_only(directory) else "not writable by this user"
        raise UsageError(f"directory is {reason}, so {target} cannot be written", file=str(directory), field=flag)


def _read_only(directory: Path) -> bool:
    try:
        return bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def check_output_dir(path: Path | str, *, flag: str | None = None, target: Path | None = None) -> Path:
    """``path`` can be an output directory: an existing writable directory, or absent with its nearest existing
    ancestor a writable directory. Creates nothing. ``target`` names the file to be written there (for the
    message of :func:`check_output_file`).

    Raises:
        UsageError: ``path`` (or a component of it) is a file, or the directory is not writable.
    """
    path = Path(path).expanduser()
    existing, st = _nearest_existing(path)
    if not stat.S_ISDIR(st.st_mode):
        what = kind(st.st_mode)
        if existing == path.absolute() and target is None:
            raise UsageError(f"is {what}, not a directory", file=str(path), field=flag,
                             hint="name a directory (it is created if absent)")
        if existing == path.absolute():
            raise UsageError(f"is {what}, not a directory, so {target} cannot be written", file=str(path),
                             field=flag)
        raise UsageError(f"is {what}, not a directory, so {path} cannot be created under it", file=str(existing),
                         field=flag)
    _check_writable_dir(existing, flag, path)
    return path


def check_outside_inputs(path: Path | str, inputs: Iterable[tuple[str, Path | str]], *, flag: str) -> Path:
    """``path`` (an output directory) is neither one of ``inputs`` nor inside one: each is ``(what, directory)``, a
    tree the command reads, ``what`` naming it in the line. Links are resolved on both sides; creates nothing.

    Raises:
        UsageError: ``PATH: FLAG: lies inside the <what> this command reads (<directory>); ...``.
    """
    path = Path(path).expanduser()
    resolved = path.resolve()
    for what, directory in inputs:
        tree = Path(directory).expanduser().resolve()
        if resolved == tree or tree in resolved.parents:
            raise UsageError(f"lies inside the {what} this command reads ({tree}); outputs are never written into "
                             "an input", file=str(path), field=flag, hint="name a directory outside it")
    return path


def check_output_file(path: Path | str, *, flag: str | None = None) -> Path:
    """``path`` can be written as a regular file: :func:`check_replaceable`, and its directory exists and is
    writable (it is not created: the user named a file, not a directory). Creates nothing.

    Raises:
        UsageError: as those two.
    """
    path = Path(path).expanduser()
    if not path.name or path.name in (".", ".."):
        raise UsageError("names a directory, not a file", field=flag, found=str(path))
    check_output_dir(path.parent, flag=flag, target=path)
    if not path.parent.is_dir():
        raise UsageError(f"directory does not exist, so {path} cannot be written", file=str(path.parent),
                         field=flag, hint="create it first, or name a file in an existing directory")
    check_replaceable(path, flag=flag)
    return path


def file_name(name: str, *, flag: str) -> str:
    """``name`` as the single path component a file inside an output directory may have.

    Raises:
        UsageError: ``name`` is empty, ``.``/``..``, starts with a dot, or holds a path separator, NUL or another
            control character (a newline in a file name breaks every line-based listing of the directory).
    """
    seps = {os.sep, "/"} | ({os.altsep} if os.altsep else set())
    if (not name or name in (".", "..") or name.startswith(".") or any(s in name for s in seps)
            or any(ord(c) < 0x20 or ord(c) == 0x7f for c in name)):
        raise UsageError("must be a plain file name (no directory part or control character, not empty, not "
                         "starting with '.')", field=flag, found=name)
    return name


def ensure_parent(path: Path) -> list[Path]:
    """Create ``path``'s missing parent directories (those under the directory the user named); returns those it
    created, deepest first, for :func:`remove_empty` when the write they were made for fails.

    Raises:
        UsageError: a component of the parent is not a directory.
    """
    made: list[Path] = []
    current = path.parent
    while not current.exists() and not current.is_symlink() and current.parent != current:
        made.append(current)
        current = current.parent
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return made
    except (FileExistsError, NotADirectoryError):
        raise _not_a_directory_parent(path, None) from None
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            raise _not_a_directory_parent(path, None) from None
        raise


def remove_empty(directories: Iterable[Path]) -> None:
    """``rmdir`` each of ``directories`` (deepest first, as :func:`ensure_parent` returns them) that is empty: what a
    failed write made for itself goes again, a directory someone filled meanwhile stays."""
    for directory in directories:
        try:
            os.rmdir(directory)
        except OSError:
            pass  # holds a file: kept


class NewFiles:
    """The files a block of :func:`no_empty_tree_left` creates under its root, named (:meth:`add`) before each is
    written, so that a block that fails takes them away again, and the directories made for them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: list[Path] = []
        self.dirs: list[Path] = []

    def add(self, path: Path | str) -> Path:
        """Record ``path`` (about to be created) and its missing directories under the root; returns ``path``."""
        path = Path(path).absolute()
        if not path.exists():
            self.files.append(path)
        parent = path.parent
        while parent != self.root and self.root in parent.parents and not parent.exists():
            self.dirs.append(parent)
            parent = parent.parent
        return path

    def remove(self) -> None:
        """Remove every recorded file, then each recorded directory left empty (deepest first)."""
        for path in self.files:
            path.unlink(missing_ok=True)
        remove_empty(sorted(set(self.dirs), key=lambda d: -len(d.parts)))

    @contextmanager
    def recording(self) -> Iterator[NewFiles]:
        """Within the block (in this thread), every file :mod:`trace_lib.atomic` creates under the root is recorded
        as :meth:`add` records it: for writers that do not know they run inside a block (a protocol materialising
        its images)."""
        token = _RECORDING.set(self)
        try:
            yield self
        finally:
            _RECORDING.reset(token)


_RECORDING: ContextVar[NewFiles | None] = ContextVar("trace_lib_new_files", default=None)


def record_new_file(path: Path | str) -> None:
    """Called by the atomic writers before they create ``path``: the :meth:`NewFiles.recording` active in this
    context, if any and ``path`` lies under its root, records it."""
    new = _RECORDING.get()
    if new is not None and new.root in Path(path).absolute().parents:
        new.add(path)


@contextmanager
def no_empty_tree_left(root: Path | str) -> Iterator[NewFiles]:
    """Run the block; afterwards remove the directories it created for ``root`` (``root`` and its missing
    parents, those that did not exist before) that hold no file, so a failed download leaves no empty data root.
    Only empty directories are removed (``rmdir``), never a file, except the new files the block recorded in the
    :class:`NewFiles` it is given: a block that fails removes those first (a rejected input leaves nothing
    half-written)."""
    root = Path(root).absolute()
    top = None
    current = root
    while not current.exists() and current.parent != current:
        top, current = current, current.parent
    new = NewFiles(root)
    try:
        yield new
    except BaseException:
        new.remove()
        raise
    finally:
        if top is not None and top.is_dir():
            remove_empty(Path(d) for d, _, _ in sorted(os.walk(top), key=lambda entry: -len(Path(entry[0]).parts)))
