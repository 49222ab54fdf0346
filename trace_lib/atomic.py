"""Atomic file writes: the one place where trace-repro writes a file as temp file + ``fsync`` + rename.

A writer fills ``.<name>.<random>.incomplete`` next to the target; on success the data is flushed, fsynced and
``os.replace``d onto the target (then the directory entry is fsynced); on any exception, ``KeyboardInterrupt``
included, the temp file is removed and an existing target is left untouched. So a reader sees the old file or
the new one, never half of one. New files get the usual ``0o666 & ~umask`` permissions. The target must be absent
or a regular file (:func:`trace_lib.outputs.check_replaceable`, checked before the temp file is made and again
before the rename): a device, FIFO, socket, directory or link is refused, never replaced.
The ``write_*_atomic`` helpers return the SHA-256 hex of the bytes written (callers record it in receipts).
Several files that belong together (a report's ``.md``, ``.xlsx`` and ``.png``) go through
:func:`atomic_outputs`: all are filled first, then put in place together, or none is.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ContextManager, Iterable, Iterator

from trace_lib.outputs import check_replaceable, ensure_parent, record_new_file, remove_empty

#: Suffix of every temp file (a leftover one marks an interrupted write and is never a finished file).
TEMP_SUFFIX = ".incomplete"
_MODES = ("wb", "w+b", "w", "w+")


def temp_name(path: Path) -> str:
    """A fresh temp file name for ``path``: ``.<name>.<random>.incomplete`` (the name's leading dots dropped)."""
    return f".{path.name.lstrip('.')}.{secrets.token_hex(4)}{TEMP_SUFFIX}"


def _exclusive(name: str, flags: int) -> int:
    return os.open(name, flags | os.O_EXCL, 0o666)


def _open_temp(path: Path, mode: str, encoding: str | None, newline: str | None) -> tuple[Path, IO[Any]]:
    while True:
        tmp = path.with_name(temp_name(path))
        try:
            return tmp, open(tmp, mode, encoding=encoding, newline=newline, opener=_exclusive)
        except FileExistsError:  # pragma: no cover - 32 random bits collided
            continue
        except BaseException:  # e.g. an unknown encoding, raised after the file was created
            tmp.unlink(missing_ok=True)
            raise


def fsync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable (best effort: some filesystems cannot open or fsync a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@dataclass
class _Temp:
    """A temp file being filled for ``target``: its path and its open handle."""

    target: Path
    path: Path
    handle: IO[Any]
    made: list[Path]  # the directories made for it (removed again when it does not go in)


@contextmanager
def _filled_temp(path: Path, mode: str, encoding: str | None, newline: str | None, durable: bool,
                 caller: str) -> Iterator[_Temp]:
    """A new temp file beside ``path`` (checked replaceable, parents made), flushed and (``durable``) fsynced when
    the block ends; any exception removes it and the directories made for it, and propagates, an ``OSError``
    naming ``path``."""
    if mode not in _MODES:
        raise ValueError(f"{caller}: mode must be one of {', '.join(_MODES)} (found {mode!r})")
    if "b" not in mode and encoding is None:
        encoding = "utf-8"
    check_replaceable(path)
    record_new_file(path)  # before its directories are made, so a recording block knows them as new
    made = ensure_parent(path)
    try:
        tmp, handle = _open_temp(path, mode, encoding, newline)
    except BaseException:
        remove_empty(made)
        raise
    try:
        with handle:
            yield _Temp(path, tmp, handle, made)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
    except BaseException as exc:
        _discard(tmp, exc, path, made)
        raise


def _discard(tmp: Path, exc: BaseException, path: Path, made: list[Path]) -> None:
    """Remove the temp file ``tmp`` of ``path`` and the directories made for it (a failed write leaves the disk as
    it was, an empty output directory included)."""
    tmp.unlink(missing_ok=True)
    remove_empty(made)
    if isinstance(exc, OSError) and exc.filename is None:
        exc.filename = str(path)  # a failed write/fsync names no file: name the one being written


@contextmanager
def atomic_output(path: Path | str, mode: str = "wb", *, encoding: str | None = None,
                  newline: str | None = None, durable: bool = True) -> Iterator[IO[Any]]:
    """Yield an open handle on a temp file next to ``path`` (``handle.name`` is its path); replace ``path`` with
    it when the block succeeds.

    ``mode`` is ``"wb"``/``"w+b"`` (bytes) or ``"w"``/``"w+"`` (text, ``encoding`` defaults to UTF-8). The
    parent directory is created. ``durable=False`` skips the two ``fsync`` calls (for large batches of
    re-derivable cache files); the rename stays atomic. Any exception removes the temp file and propagates.

    Raises:
        ValueError: ``mode`` is not a write mode listed above.
        UsageError: ``path`` is not absent or a regular file, or a parent component is a file; nothing is written.
    """
    path = Path(path)
    with _filled_temp(path, mode, encoding, newline, durable, "atomic_output") as temp:
        yield temp.handle
    try:
        check_replaceable(path)  # the path may have changed while the data was written
        os.replace(temp.path, path)
    except BaseException as exc:
        _discard(temp.path, exc, path, temp.made)
        raise
    if durable:
        fsync_directory(path.parent)


def write_bytes_atomic(path: Path | str, data: bytes) -> str:
    """Atomically replace ``path`` with ``data``; returns the SHA-256 hex of ``data``."""
    with atomic_output(path) as handle:
        handle.write(data)
    return hashlib.sha256(data).hexdigest()


def write_text_atomic(path: Path | str, text: str, *, encoding: str = "utf-8") -> str:
    """Atomically replace ``path`` with ``text`` encoded as given (no newline translation); returns its SHA-256.

    Raises:
        UnicodeEncodeError: ``text`` does not fit ``encoding`` (nothing is written).
    """
    return write_bytes_atomic(path, text.encode(encoding))


def write_lines_atomic(path: Path | str, lines: Iterable[str]) -> str:
    """Atomically write each of ``lines`` (given without newline) plus ``\\n`` as UTF-8, streaming; returns the
    SHA-256 of the bytes written. An exception raised while iterating ``lines`` leaves nothing behind."""
    digest = hashlib.sha256()
    with atomic_output(path) as handle:
        for line in lines:
            data = (line + "\n").encode("utf-8")
            digest.update(data)
            handle.write(data)
    return digest.hexdigest()


def write_json_atomic(path: Path | str, value: Any, *, indent: int | None = None, sort_keys: bool = False,
                      ensure_ascii: bool = True, separators: tuple[str, str] | None = None,
                      trailing_newline: bool = True) -> str:
    """Atomically write :func:`json_document` of ``value`` as UTF-8; returns the SHA-256 of the bytes written.

    Raises:
        ValueError: ``value`` holds NaN or an infinity (not valid JSON; the message names ``path``); nothing is
            written.
        TypeError: ``value`` holds something JSON cannot represent; nothing is written.
    """
    return write_text_atomic(path, json_document(value, path, indent=indent, sort_keys=sort_keys,
                                                 ensure_ascii=ensure_ascii, separators=separators,
                                                 trailing_newline=trailing_newline))


def json_document(value: Any, path: Path | str, *, indent: int | None = None, sort_keys: bool = False,
                  ensure_ascii: bool = True, separators: tuple[str, str] | None = None,
                  trailing_newline: bool = True) -> str:
    """``json.dumps(value, ..., allow_nan=False)`` plus ``\\n`` unless ``trailing_newline=False``: the text
    :func:`write_json_atomic` writes to ``path`` (named by the NaN error)."""
    try:
        text = json.dumps(value, indent=indent, sort_keys=sort_keys, ensure_ascii=ensure_ascii,
                          separators=separators, allow_nan=False)
    except ValueError as exc:
        if "Out of range float" not in str(exc):
            raise
        raise ValueError(f"{path}: refusing to write NaN or Infinity, which JSON cannot hold ({exc})") from None
    return text + "\n" if trailing_newline else text


class FileSet:
    """Several files written as one: each into its own temp file (:meth:`output`), then all put in place by
    :meth:`commit`, or none. Use it through :func:`atomic_outputs`."""

    def __init__(self) -> None:
        self._staged: list[tuple[Path, Path]] = []  # (temp, target), in the order written
        self._made: list[Path] = []  # the directories made for them, deepest first per file

    @contextmanager
    def output(self, path: Path | str, mode: str = "wb", *, encoding: str | None = None) -> Iterator[IO[Any]]:
        """A handle on a new temp file for ``path``, as :func:`atomic_output` gives, kept for :meth:`commit`."""
        with _filled_temp(Path(path), mode, encoding, None, True, "FileSet.output") as temp:
            yield temp.handle
        self._staged.append((temp.path, temp.target))
        self._made.extend(temp.made)

    def commit(self) -> None:
        """Put every staged file in place. Each target there is first linked (or copied) aside; if a rename
        fails, the targets already replaced get their old files back (or are removed when there were none). Any
        failure (a target that is no longer a regular file included) removes every staged temp file."""
        asides: dict[Path, Path | None] = {}
        done: list[Path] = []
        try:
            for _, target in self._staged:
                check_replaceable(target)  # a target that changed since it was staged: nothing goes in
            for _, target in self._staged:
                asides[target] = _keep_aside(target)
            for tmp, target in self._staged:
                os.replace(tmp, target)
                done.append(target)
        except BaseException:
            for target in reversed(done):
                aside = asides.pop(target, None)
                try:
                    if aside is None:
                        target.unlink(missing_ok=True)
                    else:
                        os.replace(aside, target)
                except OSError:
                    pass  # the old file stays beside the target under its temp name
            self.discard()
            raise
        finally:
            for aside in asides.values():
                if aside is not None:
                    aside.unlink(missing_ok=True)
        for directory in {target.parent for _, target in self._staged}:
            fsync_directory(directory)
        self._staged.clear()
        self._made.clear()

    def discard(self) -> None:
        """Remove every staged temp file and the directories made for them (the targets stay as they are)."""
        for tmp, _ in self._staged:
            tmp.unlink(missing_ok=True)
        remove_empty(sorted(set(self._made), key=lambda d: -len(d.parts)))
        self._staged.clear()
        self._made.clear()


def _keep_aside(path: Path) -> Path | None:
    """A copy of ``path`` beside it under a temp name (a hard link where the filesystem has them), or None when
    there is no ``path``: what :meth:`FileSet.commit` puts back."""
    if not path.exists():
        return None
    aside = path.with_name(temp_name(path))
    try:
        os.link(path, aside)
    except OSError:
        import shutil

        try:
            shutil.copy2(path, aside)
        except BaseException:
            aside.unlink(missing_ok=True)
            raise
    return aside


def staged_or_atomic(path: Path | str, mode: str = "wb", *, into: FileSet | None = None) -> ContextManager[IO[Any]]:
    """``into.output(path, mode)`` when writing into a :class:`FileSet`, else :func:`atomic_output`."""
    return into.output(path, mode) if into is not None else atomic_output(path, mode)


@contextmanager
def atomic_outputs() -> Iterator[FileSet]:
    """A :class:`FileSet` whose files are put in place together when the block succeeds; on any exception
    nothing is (every temp file removed), so a reader never sees one new file beside another's old one."""
    files = FileSet()
    try:
        yield files
    except BaseException:
        files.discard()
        raise
    files.commit()
