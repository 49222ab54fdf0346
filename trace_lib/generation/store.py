"""The per-slice response store: one append-only JSONL file per (model, seed, benchmark).

Layout: ``<campaign_root>/generation/seed_<seed>/<model>/<benchmark>.jsonl`` (:func:`response_path`).

Format (UTF-8, one JSON object per line, each line ending in ``\\n``):

- line 1, the identity header::

    {"kind": "header", "schema_version": "trace-repro-responses-v1", "slice": "<model>-seed<S>-<benchmark>",
     "model": slug, "model_revision": rev, "seed": S, "benchmark": key,
     "contract_hash": sha256 of the canonical JSON of "contract", "contract": {...}, "created_at": ISO-8601,
     "engine": {...}}

  ``engine`` (when the caller knows it; :func:`trace_lib.environment.engine.generation_engine`) records the
  engine the slice is generated on -- vllm, torch, transformers, CUDA, GPU, backend -- and whether it equals the
  paper's pins. It is not part of the identity, but resuming on another engine is refused (one-line error
  naming the differing package): one slice's rows come from one engine. A file without ``engine`` (written
  before engines were recorded) resumes as before.

  ``contract`` holds everything that changes a response besides the row itself: the decoding settings, pixel
  bounds and media transport of the suite, the seed, the model revision and (when prepared) the dataset
  snapshot. A file whose header differs from the current identity is refused (one-line error naming the
  field), never mixed.
- every further line, one generated row::

    {"kind": "row", "row_key": "<ordinal:08d>:<index>:<source_row_hash[:16]>", "index": str, "ordinal": int,
     "source_row_hash": hex, "request_hash": hex, "response": str, "finish_reason": str,
     "prompt_tokens": int|null, "completion_tokens": int|null, "model_revision": rev, "backend": name,
     "prompt": str}

Guarantees: rows are appended in batches, each written then fsynced; a failed or interrupted append (disk
full, Ctrl-C) truncates the file back to its last durable length, so the file is as it was before the call; a
crash can only tear the *last* line, which :meth:`SliceStore.open` detects and truncates; resuming skips rows already stored with
the same ``request_hash`` and regenerates the others (stale rows are dropped by an atomic rewrite), so the
file never holds two lines for one ``row_key``; one writer per file (a :class:`~trace_lib.filelock.FileLock` on ``<file>.lock``, removed on close).
Readers use :func:`load_responses` (read-only; ignores a torn last line).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from trace_lib.atomic import write_bytes_atomic
from trace_lib.decoding import check_input_file, decode
from trace_lib.errors import InputError
from trace_lib.filelock import FileLock
from trace_lib.interrupts import signals_held
from trace_lib.jsonio import canonical_json_ascii as canonical_json
from trace_lib.jsonio import MAX_INT, loads_strict
from trace_lib.outputs import check_replaceable
from trace_lib.release.load import sha256_bytes

SCHEMA_VERSION = "trace-repro-responses-v1"
#: Header fields that must match for a file to be resumed (``created_at`` is informational).
IDENTITY_FIELDS: tuple[str, ...] = ("schema_version", "slice", "model", "model_revision", "seed", "benchmark",
                                     "contract_hash")


def response_path(campaign_root: Path, *, model: str, seed: int, benchmark: str) -> Path:
    """Where the responses of one slice live under ``campaign_root``."""
    return Path(campaign_root) / "generation" / f"seed_{seed}" / model / f"{benchmark}.jsonl"


@dataclass(frozen=True)
class SliceIdentity:
    """What a response file is bound to; the header line is its JSON form."""

    slice: str
    model: str
    model_revision: str
    seed: int
    benchmark: str
    contract: Mapping[str, Any] = field(default_factory=dict)
    engine: Mapping[str, Any] | None = None  # the generation engine record (informational; checked on resume)

    @property
    def contract_hash(self) -> str:
        return sha256_bytes(canonical_json(dict(self.contract)).encode("utf-8"))

    def header(self) -> dict[str, Any]:
        header = {
            "kind": "header",
            "schema_version": SCHEMA_VERSION,
            "slice": self.slice,
            "model": self.model,
            "model_revision": self.model_revision,
            "seed": self.seed,
            "benchmark": self.benchmark,
            "contract_hash": self.contract_hash,
            "contract": dict(self.contract),
            "created_at": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        }
        if self.engine is not None:
            header["engine"] = dict(self.engine)
        return header


@dataclass(frozen=True)
class StoredResponse:
    """One generated row as stored (see the module docstring for the line format)."""

    row_key: str
    index: str
    ordinal: int
    source_row_hash: str
    request_hash: str
    response: str
    finish_reason: str
    prompt_tokens: int | None
    completion_tokens: int | None
    model_revision: str
    backend: str
    prompt: str = ""

    def to_line(self) -> bytes:
        record = {"kind": "row", **self.__dict__}  # the fields in order (all scalars; asdict() deep-copies, slowly)
        return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")

    @classmethod
    def from_record(cls, record: Mapping[str, Any], *, file: str, line: int) -> StoredResponse:
        """The row of a parsed line, each field of the type the writer gives it (:data:`_ROW_TYPES`).

        Raises:
            InputError: a field missing or of another type, or an integer outside ``0..MAX_INT`` (naming it).
        """
        return cls(**_typed_fields(record, _ROW_TYPES, what="row", file=file, prefix=f"line {line}"))


#: Each row field's types as the store writes them (None: JSON null allowed).
_ROW_TYPES: dict[str, tuple[type | None, ...]] = {
    "row_key": (str,), "index": (str,), "ordinal": (int,), "source_row_hash": (str,), "request_hash": (str,),
    "response": (str,), "finish_reason": (str, None), "prompt_tokens": (int, None),
    "completion_tokens": (int, None), "model_revision": (str,), "backend": (str,), "prompt": (str,),
}
#: The header's fields and their types as :meth:`SliceIdentity.header` writes them.
_HEADER_TYPES: dict[str, tuple[type | None, ...]] = {
    "slice": (str,), "model": (str,), "model_revision": (str,), "seed": (int,), "benchmark": (str,),
    "contract_hash": (str,), "contract": (dict,), "created_at": (str,), "engine": (dict,),
}
#: Header fields a file may lack: ``engine`` (files written before engines were recorded) and ``created_at``.
_HEADER_OPTIONAL = frozenset({"created_at", "engine"})


def _typed_fields(record: Mapping[str, Any], types: Mapping[str, tuple[type | None, ...]], *, what: str, file: str,
                  prefix: str, optional: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``record``'s fields named in ``types``, each checked to be of one of its types (integers in ``0..MAX_INT``).

    Raises:
        InputError: a required field missing, or a field of another type or range (naming ``prefix.field``).
    """
    values = {}
    for name, allowed in types.items():
        if name not in record:
            if name in optional:
                continue
            raise InputError(f"{what} line lacks a field", file=file, field=f"{prefix}.{name}")
        value = record[name]
        ok = (value is None and None in allowed) or any(
            isinstance(value, t) and not isinstance(value, bool) for t in allowed if t is not None)
        if ok and isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= MAX_INT:
            ok = False
        if not ok:
            expected = " or ".join("null" if t is None else _JSON_NAMES.get(t, t.__name__) for t in allowed)
            raise InputError(f"{what} field has the wrong type or range", file=file,
                             field=f"{prefix}.{name}",
                             expected=expected + (f" (0..{MAX_INT})" if int in allowed else ""), found=value)
        values[name] = value
    return values


_JSON_NAMES = {dict: "object", str: "string", int: "integer"}


# -- reading ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Parsed:
    header: dict[str, Any]
    rows: list[StoredResponse]
    good_bytes: int  # length of the prefix made of complete, parseable lines
    torn_bytes: int  # bytes after it (a torn or zero-filled last line)


def _parse(path: Path, data: bytes) -> _Parsed:
    file = str(path)
    lines = data.split(b"\n")
    complete, tail = lines[:-1], lines[-1]  # tail is b"" when the file ends with a newline
    header: dict[str, Any] | None = None
    rows: list[StoredResponse] = []
    offset = 0
    good = 0
    for number, raw in enumerate(complete, start=1):
        text = decode(raw, file=file, offset=offset)  # invalid UTF-8 or a BOM: one line with the byte offset
        offset += len(raw) + 1
        try:
            record = loads_strict(text)  # duplicate keys, NaN and nesting too deep are corrupt lines too
            if not isinstance(record, dict):
                raise ValueError("not an object")
        except ValueError:
            is_last = number == len(complete) and not tail
            if is_last and number > 1:
                break  # a last line that is not JSON: torn (e.g. zero-filled after a crash)
            raise InputError(f"line {number} is not a JSON object", file=file,
                             hint="the file is corrupt; move it away to regenerate the slice") from None
        if number == 1:
            if record.get("kind") != "header":
                raise InputError("first line is not a header", file=file, field="line 1")
            if record.get("schema_version") != SCHEMA_VERSION:
                raise InputError("unknown response-file schema version", file=file, field="header.schema_version",
                                 expected=SCHEMA_VERSION, found=record.get("schema_version"))
            _typed_fields(record, _HEADER_TYPES, what="header", file=file, prefix="header",
                         optional=_HEADER_OPTIONAL)
            header = record
        else:
            if record.get("kind") != "row":
                raise InputError("unexpected line kind", file=file, field=f"line {number}.kind",
                                 expected="row", found=record.get("kind"))
            rows.append(StoredResponse.from_record(record, file=file, line=number))
        good = offset
    if header is None:
        raise InputError("no header line (the file was cut before its first line ended)", file=file,
                         hint="remove the file to regenerate the slice")
    return _Parsed(header, rows, good, len(data) - good)


def load_header(path: Path) -> dict[str, Any]:
    """The identity header of a response file.

    Raises:
        InputError: missing file, corrupt header.
    """
    return _read(path).header


def _read(path: Path) -> _Parsed:
    try:
        data = check_input_file(path).read_bytes()  # a FIFO or device is refused, never read (it could block)
    except FileNotFoundError:
        raise InputError("response file is missing", file=str(path)) from None
    return _parse(Path(path), data)


def load_responses(path: Path) -> list[StoredResponse]:
    """The stored rows of a response file in ordinal order (read-only; a torn last line is ignored).

    Raises:
        InputError: missing file, corrupt header, a corrupt line that is not the last, two lines for one row.
    """
    return read_response_file(path)[1]


def read_response_file(path: Path) -> tuple[dict[str, Any], list[StoredResponse]]:
    """The header and the rows (in ordinal order) of a response file, as :func:`load_responses` reads them."""
    parsed = _read(path)
    seen: dict[str, StoredResponse] = {}
    for row in parsed.rows:
        if row.row_key in seen:
            raise InputError("two lines for one row", file=str(path), field=row.row_key)
        seen[row.row_key] = row
    return parsed.header, sorted(seen.values(), key=lambda r: r.ordinal)


# -- writing ---------------------------------------------------------------------------------------------------

def _header_line(header: Mapping[str, Any]) -> bytes:
    return (json.dumps(dict(header), ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def _discard_header_only(path: Path) -> None:
    """Remove ``path`` when it holds its header line and nothing else (called under the store's lock)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(1 << 20)
        if data.endswith(b"\n") and data.count(b"\n") == 1 and len(data) < 1 << 20:
            path.unlink()
    except OSError:
        pass


class SliceStore:
    """An open response file: the rows already stored, and ``append`` for new ones (single writer).

    ``durable_bytes`` is the length of the file's durable prefix (header and whole rows, fsynced); ``_file`` is
    the raw, unbuffered append handle every row goes through (fault-injection tests wrap it).
    """

    def __init__(self, path: Path, header: dict[str, Any], rows: Iterable[StoredResponse], lock: FileLock,
                 repaired_bytes: int, *, created: bool = False) -> None:
        self.path = path
        self.created = created  # this open wrote the file (its header); see close(failed=True)
        self.header = header
        self.done: dict[str, StoredResponse] = {r.row_key: r for r in rows}
        self.repaired_bytes = repaired_bytes
        self._lock: FileLock | None = lock
        self._file: Any = None
        self._reopen()

    def _reopen(self) -> None:
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 - raw O_APPEND writes, no hidden buffer
        self.durable_bytes = os.fstat(self._file.fileno()).st_size

    @classmethod
    def open(cls, path: Path, identity: SliceIdentity) -> SliceStore:
        """Create the file (header only, atomically) or resume it: check its header, repair a torn last line.

        Raises:
            InputError: the header was written for another identity (names the differing field), the file
                is corrupt before its last line, or another process holds the file.
            UsageError: the path is not absent or a writable regular file (a FIFO would block the read, a link
                would be written through).
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(path.with_name(path.name + ".lock"), busy=lambda: InputError(
            "another process is writing this slice", file=str(path), hint="wait for it to finish or stop it"))
        lock.acquire()
        created = False
        try:
            check_replaceable(path)
            created = not path.exists()
            if created:
                write_bytes_atomic(path, _header_line(identity.header()))
            data = path.read_bytes()
            parsed = _parse(path, data)
            _check_header(path, parsed.header, identity.header())
            if parsed.torn_bytes:
                with open(path, "r+b") as handle:
                    handle.truncate(parsed.good_bytes)
                    handle.flush()
                    os.fsync(handle.fileno())
            rows = parsed.rows
            keys = [r.row_key for r in rows]
            if len(keys) != len(set(keys)):
                raise InputError("two lines for one row", file=str(path), hint="move the file away to regenerate")
            return cls(path, parsed.header, rows, lock, parsed.torn_bytes, created=created)
        except BaseException:
            if created:
                _discard_header_only(path)
            lock.release()
            raise

    def append(self, responses: Iterable[StoredResponse]) -> int:
        """Append rows durably (written, then ``fsync``); returns how many were written.

        All or nothing: when the write or the ``fsync`` fails or is interrupted (``ENOSPC``, ``EFBIG``,
        ``KeyboardInterrupt``, ...), the file is truncated back to its last durable length and fsynced, so it
        is exactly as before the call, and the exception propagates (an ``OSError`` then names this file).
        SIGINT and SIGTERM are held until the write and any roll-back are done (:func:`signals_held`), so a
        second Ctrl-C cannot land between a torn write and its undoing. Rows
        this store has already written -- the same objects, e.g. a buffer flushed again from a ``finally``
        after an interrupt -- are skipped, so a batch is never written twice.

        Raises:
            InputError: another row with the key of a stored row (the caller generated it twice).
            OSError: the rows could not be made durable (the file is unchanged).
        """
        batch = [r for r in responses if self.done.get(r.row_key) is not r]
        if not batch:
            return 0
        keys = [r.row_key for r in batch]
        duplicate = next((k for k in keys if k in self.done), None) or (
            None if len(set(keys)) == len(keys) else keys[0]
        )
        if duplicate:
            raise InputError("row already stored", file=str(self.path), field=duplicate)
        if self._file is None:
            raise InputError("the response file is not open for writing", file=str(self.path),
                             hint="an earlier write failed and could not be undone; re-run to resume")
        data = b"".join(r.to_line() for r in batch)
        start = self.durable_bytes
        with signals_held():
            try:
                view, written = memoryview(data), 0
                while written < len(data):
                    written += self._file.write(view[written:]) or 0
                os.fsync(self._file.fileno())
            except BaseException as exc:
                self._roll_back(start)
                if isinstance(exc, OSError):
                    raise OSError(exc.errno, exc.strerror or str(exc), str(self.path)) from exc
                raise
        self.durable_bytes = start + len(data)
        self.done.update(zip(keys, batch))
        return len(batch)

    def _roll_back(self, length: int) -> None:
        """Cut the file back to ``length`` durably; if even that fails, stop writing (the next open repairs a
        torn tail, and whole rows that reached the disk are rows like any other)."""
        try:
            os.ftruncate(self._file.fileno(), length)
            os.fsync(self._file.fileno())
        except OSError:
            self._file.close()
            self._file = None

    def retain(self, keep: Callable[[StoredResponse], bool]) -> int:
        """Drop stored rows for which ``keep`` is false (atomic rewrite); returns how many were dropped."""
        kept = [r for r in self.done.values() if keep(r)]
        dropped = len(self.done) - len(kept)
        if not dropped:
            return 0
        if self._file is not None:
            self._file.close()
            self._file = None  # until reopened: append says the file is not open, never writes a closed handle
        kept.sort(key=lambda r: r.ordinal)
        try:
            write_bytes_atomic(self.path, _header_line(self.header) + b"".join(r.to_line() for r in kept))
        except BaseException:
            try:
                self._reopen()  # the file is as it was: appends may go on
            except OSError:
                pass
            raise
        self.done = {r.row_key: r for r in kept}
        self._reopen()
        return dropped

    def close(self, *, failed: bool = False) -> None:
        """Close the file and release the lock (its ``.lock`` file is removed). With ``failed`` (the run ended in
        an error or an interrupt) a file this store created that still holds no row is removed: a failed start
        leaves nothing behind, while a header-only file an earlier run created stays, to be resumed."""
        if self._file is not None and not self._file.closed:
            self._file.close()
        if failed and self.created and not self.done and self._lock is not None:
            _discard_header_only(self.path)
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> SliceStore:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(failed=exc_type is not None)


def _check_header(path: Path, stored: Mapping[str, Any], current: Mapping[str, Any]) -> None:
    for name in IDENTITY_FIELDS:
        if stored.get(name) != current.get(name):
            hint = "use another --campaign-root, or move the file away to regenerate this slice"
            if name == "contract_hash":
                changed = sorted(
                    k for k in set(stored.get("contract", {})) | set(current.get("contract", {}))
                    if stored.get("contract", {}).get(k) != current.get("contract", {}).get(k)
                )
                raise InputError("responses were generated under another generation contract", file=str(path),
                                 field="header.contract", expected={k: current["contract"].get(k) for k in changed},
                                 found={k: stored.get("contract", {}).get(k) for k in changed}, hint=hint)
            raise InputError("responses were generated under another identity", file=str(path),
                             field=f"header.{name}", expected=current.get(name), found=stored.get(name), hint=hint)
    from trace_lib.environment.engine import refuse_engine_change

    refuse_engine_change(stored.get("engine"), current.get("engine"), file=str(path), field="header.engine",
                         hint="finish the slice on the engine it was started with, or move the file away to "
                         "regenerate it on this one")
