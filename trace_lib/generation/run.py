"""Generate one slice, resumably: rows -> requests -> backend -> durable store, only for rows still missing.

``run_generation`` builds every row's request (the protocol's prompt, the suite's decoding settings, the
slice's seed), keeps stored rows whose ``request_hash`` still matches, drops stale ones, sends the rest to the
backend and appends each answer to the store in small durable batches, so a killed run loses at most the
rows in flight and a re-run neither loses nor duplicates a row.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence

from trace_lib.data.prompts import build_row_prompt
from trace_lib.data.rowhash import row_key, source_row_hash
from trace_lib.errors import BackendError, InputError
from trace_lib.generation.request import ChatRequest, GenerationResult, build_eval_request, prompt_text
from trace_lib.generation.store import SliceIdentity, SliceStore, StoredResponse, response_path

if TYPE_CHECKING:
    from trace_lib.protocol import Protocol, Row
    from trace_lib.data.manifest import DatasetEntry
    from trace_lib.slices import ModelDescriptor
    from trace_lib.slices import Slice
    from trace_lib.generation.backends.base import Backend

#: Version of what :func:`generation_contract` covers; bump when request construction changes.
CONTRACT_VERSION = "trace-repro-generation-v1"
_CONTRACT_FIELDS = ("temperature", "top_p", "top_k", "presence_penalty", "repetition_penalty", "max_tokens",
                    "media_transport", "min_image_pixels", "max_image_pixels")


def generation_contract(
    generation: Mapping[str, Any], *, seed: int, model: str, model_revision: str,
    dataset_snapshot: str | None = None,
) -> dict[str, Any]:
    """Everything besides the row that changes a response (hashed into the store header).

    The model's local path is deliberately not part of it: the revision binds the weights, so moving a
    model directory does not invalidate responses (upstream hashes the path string; see the README).
    """
    contract = {name: generation[name] for name in _CONTRACT_FIELDS}
    contract.update(contract_version=CONTRACT_VERSION, seed=seed, model=model, model_revision=model_revision,
                    dataset_snapshot_sha256=dataset_snapshot)
    return contract


def slice_identity(
    slice_: Slice, model: ModelDescriptor, generation: Mapping[str, Any], *, dataset_snapshot: str | None = None,
    engine: Mapping[str, Any] | None = None,
) -> SliceIdentity:
    """The identity a slice's response file is bound to (``engine``: the generation engine record, see store)."""
    return SliceIdentity(
        slice=slice_.id, model=slice_.model, model_revision=model.revision, seed=slice_.seed,
        benchmark=slice_.benchmark,
        contract=generation_contract(generation, seed=slice_.seed, model=slice_.model,
                                     model_revision=model.revision, dataset_snapshot=dataset_snapshot),
        engine=engine,
    )


def open_slice_store(
    campaign_root: Path, slice_: Slice, model: ModelDescriptor, generation: Mapping[str, Any], *,
    dataset_snapshot: str | None = None, engine: Mapping[str, Any] | None = None,
) -> SliceStore:
    """Open (create or resume) the response file of ``slice_`` under ``campaign_root``; ``engine`` is recorded in
    a new header and must match a resumed one's (see :mod:`trace_lib.generation.store`)."""
    path = response_path(campaign_root, model=slice_.model, seed=slice_.seed, benchmark=slice_.benchmark)
    return SliceStore.open(path, slice_identity(slice_, model, generation, dataset_snapshot=dataset_snapshot,
                                                engine=engine))


@dataclass(frozen=True)
class PreparedRow:
    """One dataset row ready to send: its identity, request and the prompt text that is persisted."""

    ordinal: int
    index: str
    source_row_hash: str
    request: ChatRequest
    request_hash: str
    prompt: str


def iter_prepared_rows(
    rows: Sequence[Row], protocol: Protocol, image_dir: Path, *, served_name: str, generation: Mapping[str, Any],
    seed: int, source: Path | None = None,
) -> Iterator[PreparedRow]:
    """:func:`prepare_rows` one row at a time, in order (the campaign scheduler queues a slice's first rows while
    the rest are still being prepared)."""
    seen: set[str] = set()
    for ordinal, row in enumerate(rows):
        if "index" not in row:
            raise InputError("row has no index", field=f"{protocol.key}[{ordinal}]")
        row_hash = source_row_hash(row)
        key = row_key(ordinal, row["index"], row_hash)
        if key in seen:
            raise InputError("duplicate row key", field=f"{protocol.key}[{ordinal}]", found=key)
        seen.add(key)
        items = build_row_prompt(protocol, row, image_dir, source=source)  # a bad cell names source and benchmark
        for item in items:
            if item.kind == "image" and not Path(item.value).is_file():
                raise InputError("prompt image does not exist", field=f"{protocol.key}[{ordinal}]",
                                 found=item.value, hint="run 'trace-repro prepare-data' for this benchmark")
        request = build_eval_request(items, request_id=key, generation=generation, seed=seed)
        yield PreparedRow(ordinal, str(row["index"]), row_hash, request, request.request_hash(served_name),
                          prompt_text(items))


def prepare_rows(
    rows: Sequence[Row], protocol: Protocol, image_dir: Path, *, served_name: str, generation: Mapping[str, Any],
    seed: int, source: Path | None = None,
) -> list[PreparedRow]:
    """Every row's request, built from the protocol's prompt (materialising its images under ``image_dir``);
    ``source``: the data file the rows were read from, named by an error a row's cell raises.

    Raises:
        InputError: a row has no ``index``, two rows share a row key, a cell does not decode (naming ``source``
            and the benchmark) or a prompt image does not exist.
    """
    return list(iter_prepared_rows(rows, protocol, image_dir, served_name=served_name, generation=generation,
                                   seed=seed, source=source))


class ManifestCheck:
    """Prepared rows against a dataset's manifest entry: the row count once, then rows in any batches. Each image
    is re-hashed once per check, or once per ``hashed`` cache shared by the checks of one run (a benchmark's seeds
    read the same images)."""

    def __init__(self, dataset: DatasetEntry, data_root: Path, *, hashed: dict[Path, str] | None = None) -> None:
        self.dataset = dataset
        self.root = Path(data_root).resolve()
        self._hashed: dict[Path, str] = {} if hashed is None else hashed

    def row_count(self, count: int) -> None:
        """Raises InputError when ``count`` differs from the manifest's row count."""
        if count != len(self.dataset.row_media):
            raise InputError("row count differs from the dataset manifest", field=self.dataset.key,
                             expected=len(self.dataset.row_media), found=count)

    def rows(self, prepared: Iterable[PreparedRow]) -> None:
        """Raises InputError for the first row whose identity, image paths or image bytes differ."""
        from trace_lib.release.load import sha256_file

        where = self.dataset.key
        for row in prepared:
            recorded = self.dataset.row_media[row.ordinal]
            if (recorded.index, recorded.source_row_hash) != (row.index, row.source_row_hash):
                raise InputError("row differs from the dataset manifest", field=f"{where}[{row.ordinal}]",
                                 expected=f"{recorded.index}:{recorded.source_row_hash[:16]}",
                                 found=f"{row.index}:{row.source_row_hash[:16]}",
                                 hint="re-run 'trace-repro prepare-data' for this benchmark")
            paths = [p.resolve() for p in row.request.image_paths()]
            expected_paths = [self.root / rel for rel in recorded.media]
            if paths != expected_paths:
                raise InputError("prompt images differ from the dataset manifest", field=f"{where}[{row.ordinal}]",
                                 expected=[str(p) for p in expected_paths], found=[str(p) for p in paths])
            for path, sha in zip(paths, recorded.media_sha256):
                if path not in self._hashed:
                    self._hashed[path] = sha256_file(path)
                if self._hashed[path] != sha:
                    raise InputError("image content differs from the dataset manifest", file=str(path),
                                     field=f"{where}[{row.ordinal}]", hint="re-run 'trace-repro prepare-data'")


def check_against_manifest(prepared: Sequence[PreparedRow], dataset: DatasetEntry, data_root: Path) -> None:
    """Each row's identity and prompt images must be the ones the manifest recorded (images re-hashed).

    Raises:
        InputError: row count, index, row hash, image path or image content differs from the manifest.
    """
    check = ManifestCheck(dataset, data_root)
    check.row_count(len(prepared))
    check.rows(prepared)


@dataclass(frozen=True)
class SliceWork:
    """A slice's prepared rows checked against its open store: what is reused, dropped and still pending."""

    prepared: list[PreparedRow]
    by_key: dict[str, PreparedRow]
    dropped: int
    reused: int
    pending: list[ChatRequest]


def plan_slice_rows(
    slice_: Slice, rows: Sequence[Row], protocol: Protocol, store: SliceStore, image_dir: Path, *,
    generation: Mapping[str, Any], dataset: DatasetEntry | None = None, data_root: Path | None = None,
    source: Path | None = None,
) -> SliceWork:
    """Build every row's request (checked against the manifest when ``dataset`` is given), drop stored rows
    whose request changed (atomic rewrite of ``store``) and list the requests still to generate.

    Raises:
        InputError: bad rows or prompts (see :func:`prepare_rows`, :func:`check_against_manifest`).
    """
    prepared = prepare_rows(rows, protocol, image_dir, served_name=slice_.model, generation=generation,
                            seed=slice_.seed, source=source)
    if dataset is not None:
        check_against_manifest(prepared, dataset, data_root if data_root is not None else image_dir)
    by_key = {p.request.request_id: p for p in prepared}
    dropped = store.retain(lambda r: r.row_key in by_key and by_key[r.row_key].request_hash == r.request_hash)
    reused = len(store.done)
    pending = [p.request for p in prepared if p.request.request_id not in store.done]
    return SliceWork(prepared, by_key, dropped, reused, pending)


def stored_response(row: PreparedRow, result: GenerationResult, store: SliceStore, backend: str) -> StoredResponse:
    """The store line for ``result``, the answer to ``row`` (one definition for every generation path)."""
    return StoredResponse(
        row_key=row.request.request_id, index=row.index, ordinal=row.ordinal,
        source_row_hash=row.source_row_hash, request_hash=row.request_hash, response=result.text,
        finish_reason=result.finish_reason, prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens, model_revision=store.header["model_revision"],
        backend=backend, prompt=row.prompt,
    )


@dataclass(frozen=True)
class SliceRun:
    """What one ``run_generation`` call did."""

    slice_id: str
    path: Path
    rows: int  # rows in the dataset
    reused: int  # rows already stored with the current request hash
    dropped: int  # stored rows dropped as stale (request changed, or row no longer in the dataset)
    generated: int  # rows generated by this call
    repaired_bytes: int  # bytes of a torn last line truncated on open
    seconds: float

    @property
    def complete(self) -> bool:
        return self.reused + self.generated == self.rows

    @property
    def rows_per_second(self) -> float:
        return self.generated / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        return (f"{self.slice_id}: {self.reused + self.generated}/{self.rows} rows stored "
                f"(generated {self.generated} at {self.rows_per_second:.2f} rows/s, reused {self.reused}, "
                f"dropped stale {self.dropped}, repaired {self.repaired_bytes} torn bytes) -> {self.path}")


Progress = Callable[[int, int, str], Any]  # factory(total, initial, description) -> object with update(n), close()


def _plain_progress(total: int, initial: int, description: str) -> Any:
    class _Line:
        def __init__(self) -> None:
            self.n = initial
            self.last = 0.0

        def update(self, n: int) -> None:
            self.n += n
            now = time.monotonic()
            if now - self.last >= 10 or self.n == total:
                self.last = now
                print(f"[generate] {description}: {self.n}/{total}", file=sys.stderr, flush=True)

        def close(self) -> None:
            pass

    return _Line()


def default_progress(total: int, initial: int, description: str) -> Any:
    """A tqdm bar when tqdm is installed, else a plain status line every 10 s on stderr."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _plain_progress(total, initial, description)
    return tqdm(total=total, initial=initial, desc=description, unit="row", dynamic_ncols=True)


def logged_progress(total: int, initial: int, description: str, *, every_s: float = 30.0) -> Any:
    """Progress for captured runs (pytest): a ``trace_lib.progress`` INFO record every ``every_s`` seconds with rows,
    rate and ETA (shown live by ``pytest --log-cli-level INFO``, kept in the failure report otherwise)."""
    import logging

    log = logging.getLogger("trace_lib.progress")
    started = time.monotonic()

    class _Logged:
        def __init__(self) -> None:
            self.n = initial
            self.last = started
            log.info("%s: %d/%d rows already stored, generating the rest", description, initial, total)

        def update(self, n: int) -> None:
            self.n += n
            now = time.monotonic()
            if now - self.last >= every_s or self.n == total:
                self.last = now
                rate = (self.n - initial) / max(now - started, 1e-9)
                eta = (total - self.n) / rate if rate > 0 else float("inf")
                log.info("%s: %d/%d rows (%.2f rows/s, ETA %.0f s)", description, self.n, total, rate, eta)

        def close(self) -> None:
            log.info("%s: generation done in %.0f s", description, time.monotonic() - started)

    return _Logged()


def logged_counts(description: str, *, every_s: float = 30.0) -> Callable[[int, int], None]:
    """``progress(done, total)`` for callers that report counts (validation generation): :func:`logged_progress`'s
    records, throttled to one per ``every_s`` seconds (and the last)."""
    state: dict[str, Any] = {}

    def report(done: int, total: int) -> None:
        if "bar" not in state:
            state["bar"], state["n"] = logged_progress(total, done, description, every_s=every_s), done
        state["bar"].update(done - state["n"])
        state["n"] = done

    return report


def _no_progress(total: int, initial: int, description: str) -> Any:
    class _Quiet:
        def update(self, n: int) -> None:
            pass

        def close(self) -> None:
            pass

    return _Quiet()


def run_generation(
    slice_: Slice,
    rows: Sequence[Row],
    protocol: Protocol,
    backend: Backend,
    store: SliceStore,
    image_dir: Path,
    *,
    generation: Mapping[str, Any],
    progress: bool | Progress = True,
    batch_size: int = 64,
    flush_interval_s: float = 2.0,
    dataset: DatasetEntry | None = None,
    data_root: Path | None = None,
    source: Path | None = None,
) -> SliceRun:
    """Generate the rows of ``slice_`` that ``store`` does not hold yet; returns what was done.

    Rows are appended in batches of ``batch_size`` (or every ``flush_interval_s``), each batch durable before
    the next result is awaited; an exception (including ``KeyboardInterrupt``) first persists every result
    already received. With ``dataset`` (the manifest entry) and ``data_root``, every row and prompt image is
    checked against the manifest before anything is sent. ``source``: the data file ``rows`` were read from (named
    by an error a row's cell raises).

    Raises:
        InputError: bad rows or prompts (see :func:`prepare_rows`).
        BackendError: the backend failed, answered an unknown or repeated request, or left requests unanswered.
    """
    started = time.monotonic()
    work = plan_slice_rows(slice_, rows, protocol, store, image_dir, generation=generation, dataset=dataset,
                           data_root=data_root, source=source)
    prepared, by_key, dropped, reused, pending = (work.prepared, work.by_key, work.dropped, work.reused,
                                                  work.pending)
    factory = default_progress if progress is True else (_no_progress if progress is False else progress)
    bar = factory(len(prepared), reused, slice_.id)
    buffer: list[StoredResponse] = []
    answered: set[str] = set()
    last_flush = time.monotonic()

    def flush() -> None:
        nonlocal last_flush
        if buffer:
            store.append(buffer)
            bar.update(len(buffer))
            buffer.clear()
        last_flush = time.monotonic()

    answers = backend.generate(pending) if pending else iter(())
    try:
        if pending:
            for result in answers:
                row = by_key.get(result.request_id)
                if row is None or result.request_id in store.done:
                    raise BackendError("backend answered a request it was not sent", field=backend.name,
                                       found=result.request_id)
                if result.request_id in answered:
                    raise BackendError("backend answered a request twice", field=backend.name,
                                       found=result.request_id)
                answered.add(result.request_id)
                buffer.append(stored_response(row, result, store, backend.name))
                if len(buffer) >= batch_size or time.monotonic() - last_flush >= flush_interval_s:
                    flush()
    finally:
        try:
            flush()  # idempotent: rows already durable are not written again (SliceStore.append)
        finally:
            close = getattr(answers, "close", None)
            if close is not None:
                close()  # a backend still working cancels what it holds (the openai backend's requests in flight)
            bar.close()
    if len(answered) != len(pending):
        raise BackendError("backend left requests unanswered", field=backend.name, expected=len(pending),
                           found=len(answered), hint="re-run to generate the missing rows")
    return SliceRun(slice_.id, store.path, len(prepared), reused, dropped, len(answered), store.repaired_bytes,
                    time.monotonic() - started)
