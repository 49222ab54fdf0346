"""Score one slice: dataset rows + responses + protocol -> :class:`SliceScore`, persisted as per-row records.

:func:`score_slice` is pure (rows and responses in, the protocol's ``SliceScore`` out, alignment checked);
:func:`write_slice_scores` persists it atomically into an output directory:

- ``records.jsonl``: one line per row in dataset order: ``index``, ``extracted``, ``score`` (the row's credit),
  ``judge_calls``, ``fallback``, ``detail``;
- ``scores.json``: the reported score, rows, sub-metrics, counts, judge/fallback totals, the protocol identity,
  the SHA-256 of the dataset, responses and records files it was computed from, and the pandas / XlsxWriter /
  openpyxl versions of the prediction-workbook round trip (``workbook_libraries``).

The two files are one unit, committed under an exclusive lock on the directory (``.scoring.lock``, removed when
done; a second scorer on the same directory is refused in one line): ``scores.json`` -- the commit marker, naming
the SHA-256 of the ``records.jsonl`` beside it -- is removed first, the records replaced, and ``scores.json``
written last, so its presence means the slice is scored with exactly those records (``reports.verify`` relies on
it), and a crash in between leaves the slice unscored, never scores and records that disagree.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ContextManager, Mapping, Sequence

from trace_lib import __version__
from trace_lib.atomic import atomic_output, fsync_directory, temp_name
from trace_lib.protocol import Protocol, Row, RowScore, ScoringContext, SliceScore
from trace_lib.data.prompts import name_data_file
from trace_lib.errors import InputError, JudgeError, MissingColumn
from trace_lib.extraction.workbook import library_versions
from trace_lib.filelock import locked_directory
from trace_lib.scoring.judge import Judge

SCORES_SCHEMA = "trace-repro-slice-score-v1"
SCORES_FILE = "scores.json"
RECORDS_FILE = "records.jsonl"
LOCK_FILE = ".scoring.lock"


@dataclass(frozen=True)
class FileRef:
    """A file an output was computed from: its path (as given) and SHA-256."""

    path: str
    sha256: str


@dataclass(frozen=True)
class ScoredSlice:
    """A scored slice on disk: the score and where its records and summary were written."""

    score: SliceScore
    scores_path: Path
    records_path: Path
    summary: Mapping[str, Any]  # the content of scores.json


def responses_for_rows(rows: Sequence[Row], stored: Sequence[Any], *, source: str = "responses") -> list[str]:
    """The stored responses in dataset row order, matched by row key (ordinal, index and row-content hash).

    ``stored`` are :class:`~trace_lib.generation.store.StoredResponse` objects (``row_key``, ``response``). A row
    whose content changed since generation has another row key, so its old response is never scored against it.

    Raises:
        InputError: a row has no response, or a response belongs to no row of this dataset.
    """
    from trace_lib.data.rowhash import row_key, source_row_hash

    expected = [row_key(ordinal, row["index"], source_row_hash(row)) for ordinal, row in enumerate(rows)]
    by_key = {r.row_key: r.response for r in stored}
    missing = [k for k in expected if k not in by_key]
    if missing:
        raise InputError(
            f"responses do not cover the dataset (expected {len(expected)} rows, found {len(expected) - len(missing)})",
            file=source,
            hint=f"first missing row {missing[0]}; finish generation (it resumes), or pass the dataset the responses "
            "were generated from",
        )
    if len(by_key) != len(expected):
        known = set(expected)
        extra = next(k for k in by_key if k not in known)
        raise InputError(
            "response for a row this dataset does not have",
            file=source,
            field=f"row_key {extra}",
            hint="the dataset changed since generation, or --dataset names another file",
        )
    return [by_key[k] for k in expected]


def check_judge(protocol: Protocol, judge: Judge | None) -> None:
    """Refuse to score a protocol that always calls the judge without one (never a silent fallback).

    Protocols whose judge use is ``fallback`` (e.g. only when rule-based extraction fails) may start without a
    judge; they raise :class:`JudgeError` themselves on the first row that needs it.
    """
    if protocol.judge == "always" and judge is None:
        raise JudgeError(
            f"judge URL not set (--judge-url / TRACE_JUDGE_URL) for judge route {protocol.key}",
            hint="serve Qwen3-32B (see README) and pass its URL",
        )


def score_slice(
    protocol: Protocol, rows: Sequence[Row], responses: Sequence[str | None], context: ScoringContext, *,
    source: str | os.PathLike[str] | None = None,
) -> SliceScore:
    """Score ``responses`` (one per row, in row order) with ``protocol``; pure apart from judge calls.

    Raises:
        JudgeError: the protocol always needs the judge and ``context`` has none, or the judge failed.
        InputError: the rows lack a column the protocol reads (naming ``source``, the data file, and the column).
        RuntimeError: the protocol broke its contract (another benchmark, another row count).
    """
    check_judge(protocol, context.judge)
    if len(responses) != len(rows):
        raise ValueError(f"{protocol.key}: {len(responses)} responses for {len(rows)} rows")
    try:
        result = protocol.score(rows, responses, context)
    except MissingColumn as exc:
        if exc.file is not None:
            raise
        raise name_data_file(exc, protocol.key, source) from None
    if result.benchmark != protocol.key:
        raise RuntimeError(f"protocol {protocol.key} returned a score for {result.benchmark!r}")
    if result.rows != len(rows) or len(result.records) != len(rows):
        raise RuntimeError(
            f"protocol {protocol.key} scored {result.rows} rows with {len(result.records)} records for {len(rows)} rows"
        )
    return result


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [_jsonable(v) for v in items]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def record_to_dict(record: RowScore) -> dict[str, Any]:
    """One per-row record as written to ``records.jsonl``."""
    return {
        "index": record.index,
        "extracted": _jsonable(record.extracted),
        "score": _jsonable(record.score),
        "judge_calls": record.judge_calls,
        "fallback": record.fallback,
        "detail": _jsonable(dict(record.detail)),
    }


def build_summary(
    score: SliceScore,
    protocol: Protocol,
    *,
    seed: int,
    records_sha256: str,
    dataset: FileRef | None = None,
    responses: FileRef | None = None,
    judge_url: str | None = None,
    identity: Mapping[str, Any] | None = None,
    dropped_rows: int = 0,
) -> dict[str, Any]:
    """The ``scores.json`` document of a scored slice (``identity``: model, slice id, ... when known;
    ``dropped_rows``: responses to rows the benchmark's loader drops, not scored, as upstream)."""
    return {
        "schema_version": SCORES_SCHEMA,
        **_jsonable(dict(identity or {})),
        "benchmark": score.benchmark,
        "seed": seed,
        "score": score.score,
        "rows": score.rows,
        "metrics": _jsonable(dict(score.metrics)),
        "counts": _jsonable(dict(score.counts)),
        "judge_calls": score.judge_calls,
        "fallbacks": score.fallbacks,
        "dropped_rows": dropped_rows,
        "protocol": {"key": protocol.key, "version": protocol.version, "upstream": protocol.upstream,
                     "judge": protocol.judge},
        "judge_url": judge_url,
        "inputs": {
            "dataset": None if dataset is None else {"path": dataset.path, "sha256": dataset.sha256},
            "responses": None if responses is None else {"path": responses.path, "sha256": responses.sha256},
        },
        "records": {"path": RECORDS_FILE, "sha256": records_sha256},
        "trace_repro_version": __version__,
        "workbook_libraries": library_versions(),
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def write_slice_scores(
    out_dir: Path,
    score: SliceScore,
    protocol: Protocol,
    *,
    seed: int,
    dataset: FileRef | None = None,
    responses: FileRef | None = None,
    judge_url: str | None = None,
    identity: Mapping[str, Any] | None = None,
    dropped_rows: int = 0,
) -> ScoredSlice:
    """Persist ``score`` into ``out_dir`` as one unit, under the directory's lock (see the module docstring).

    Raises:
        InputError: another process is scoring into ``out_dir``.
    """
    with scoring_lock(out_dir):
        return _commit(Path(out_dir), score, protocol, seed=seed, dataset=dataset, responses=responses,
                       judge_url=judge_url, identity=identity, dropped_rows=dropped_rows)


def scoring_lock(out_dir: Path) -> ContextManager[Path]:
    """Hold the exclusive lock of a score output directory (:func:`trace_lib.filelock.locked_directory`).

    Raises:
        InputError: another process holds it.
    """
    return locked_directory(out_dir, LOCK_FILE, busy=lambda: InputError(
        "another process is scoring into this directory", file=str(out_dir),
        hint="wait for it to finish, or score into another directory"))


def _commit(
    out_dir: Path,
    score: SliceScore,
    protocol: Protocol,
    *,
    seed: int,
    dataset: FileRef | None,
    responses: FileRef | None,
    judge_url: str | None,
    identity: Mapping[str, Any] | None,
    dropped_rows: int,
) -> ScoredSlice:
    from trace_lib.release.load import sha256_bytes

    lines = [json.dumps(record_to_dict(r), ensure_ascii=False, sort_keys=True) for r in score.records]
    records_sha = sha256_bytes("".join(line + "\n" for line in lines).encode("utf-8"))
    summary = build_summary(score, protocol, seed=seed, records_sha256=records_sha, dataset=dataset,
                            responses=responses, judge_url=judge_url, identity=identity, dropped_rows=dropped_rows)
    text = json.dumps(summary, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)  # fails before any write
    scores_path, records_path = out_dir / SCORES_FILE, out_dir / RECORDS_FILE
    aside: Path | None = None
    records_in = False
    try:  # both files are written and fsynced before anything is replaced: a full disk leaves both as they were
        with atomic_output(scores_path, durable=False) as marker:  # a FIFO or link there is refused up front
            marker.write((text + "\n").encode("utf-8"))
            marker.flush()
            os.fsync(marker.fileno())  # here, not after the records' rename: only renames are left by then
            with atomic_output(records_path) as handle:
                for line in lines:
                    handle.write((line + "\n").encode("utf-8"))
                handle.flush()
                os.fsync(handle.fileno())
                aside = _set_aside(scores_path)  # the commit marker goes before the new records replace the old
            records_in = True  # the new marker's rename is all that is left
    except BaseException:
        if aside is not None and not records_in:
            os.replace(aside, scores_path)  # the old records stand: so does the receipt that names them
        raise
    finally:
        if aside is not None and records_in:
            aside.unlink(missing_ok=True)
    fsync_directory(out_dir)
    return ScoredSlice(score=score, scores_path=scores_path, records_path=records_path, summary=summary)


def _set_aside(path: Path) -> Path | None:
    """Move ``path`` to a temp name beside it (None when absent), to be put back if what follows fails."""
    aside = path.with_name(temp_name(path))
    try:
        os.replace(path, aside)
    except FileNotFoundError:
        return None
    return aside


def scores_dir(campaign_root: Path, *, model: str, seed: int, benchmark: str) -> Path:
    """Where one slice's ``scores.json`` and ``records.jsonl`` live under a campaign root (beside
    ``generation/seed_<seed>/<model>/<benchmark>.jsonl``)."""
    return Path(campaign_root) / "scoring" / f"seed_{seed}" / model / benchmark


def check_header_slice(path: Path, header: Mapping[str, Any], *, benchmark: str, seed: int | None = None,
                       model: str | None = None) -> int:
    """The header's seed, once the header (as :func:`~trace_lib.generation.store.load_header` read it, its fields
    typed) names the slice the file is read as: ``benchmark``, and ``seed`` and ``model`` where given (a file
    filed under ``seed_43/`` must hold seed 43's responses).

    Raises:
        InputError: another benchmark, seed or model (naming the header field).
    """
    if header.get("benchmark") != benchmark:
        raise InputError("responses belong to another benchmark", file=str(path), field="header.benchmark",
                         expected=benchmark, found=header.get("benchmark"))
    header_seed = header["seed"]  # an integer in 0..MAX_INT: the store's reader checks the header's types
    if seed is not None and seed != header_seed:
        raise InputError("the response file holds another seed than the slice it is read as", file=str(path),
                         field="header.seed", expected=seed, found=header_seed,
                         hint="a file under seed_N/ (or scored with --seed N) must be seed N's responses")
    if model is not None and header.get("model") != model:
        raise InputError("the response file holds another model than the slice it is read as", file=str(path),
                         field="header.model", expected=model, found=header.get("model"))
    return header_seed


def run_scoring(
    protocol: Protocol,
    rows: Sequence[Row],
    responses_path: Path,
    out_dir: Path,
    *,
    judge: Judge | None = None,
    judge_url: str | None = None,
    dataset: FileRef | None = None,
    seed: int | None = None,
    model: str | None = None,
) -> ScoredSlice:
    """Score a response file against ``rows`` and persist the result into ``out_dir``.

    A trace-repro store file gives the seed, model and slice id in its header, which must name ``protocol.key``
    (``seed`` and ``model``, if given, must agree: a file filed under another seed or model is refused). A plain
    file (:mod:`trace_lib.scoring.plain_responses`) has no header: ``seed`` is then required (it seeds
    deterministic fallbacks) and ``model`` names whose responses they are (for the verdict).

    Raises:
        InputError: unreadable/corrupt response file, another benchmark's responses, rows not covered.
        JudgeError: see :func:`score_slice`.
    """
    with scoring_lock(out_dir):  # a second scorer is refused before any judge work
        return _score_into(protocol, rows, Path(responses_path), Path(out_dir), judge=judge, judge_url=judge_url,
                           dataset=dataset, seed=seed, model=model)


def _score_into(protocol: Protocol, rows: Sequence[Row], responses_path: Path, out_dir: Path, *,
                judge: Judge | None, judge_url: str | None, dataset: FileRef | None,
                seed: int | None, model: str | None) -> ScoredSlice:
    from trace_lib.generation.store import read_response_file
    from trace_lib.release.load import sha256_file

    from trace_lib.data.vlmeval_tsv import dropped_noimg_indices
    from trace_lib.scoring.plain_responses import is_store_file, read_plain_responses

    if not is_store_file(responses_path):
        if seed is None:
            raise InputError("a plain response file needs the decoding seed", file=str(responses_path),
                             hint="pass --seed 42|43|44 (it seeds the deterministic stand-ins for random choices)")
        lookup = None if dataset is None else (lambda: dropped_noimg_indices(dataset.path))
        texts, dropped = read_plain_responses(responses_path, rows, dropped=lookup)
        score = score_slice(protocol, rows, texts, ScoringContext(seed=seed, judge=judge),
                            source=None if dataset is None else dataset.path)
        return _commit(out_dir, score, protocol, seed=seed, dataset=dataset, dropped_rows=dropped,
                       responses=FileRef(str(responses_path), sha256_file(responses_path)),
                       judge_url=judge_url, identity={"slice": None, "model": model, "model_revision": None,
                                                      "generation_contract_hash": None})
    header, stored = read_response_file(responses_path)  # one read: the header and rows of the same bytes
    seed = check_header_slice(responses_path, header, benchmark=protocol.key, seed=seed, model=model)
    texts = responses_for_rows(rows, stored, source=str(responses_path))
    score = score_slice(protocol, rows, texts, ScoringContext(seed=seed, judge=judge),
                        source=None if dataset is None else dataset.path)
    identity = {
        "slice": header.get("slice"),
        "model": header.get("model"),
        "model_revision": header.get("model_revision"),
        "generation_contract_hash": header.get("contract_hash"),
    }
    from trace_lib.environment.engine import random_weights

    if random_weights(header.get("engine")):  # a benchmark's responses: scored for timing, never given a verdict
        identity["random_weights"] = True
    return _commit(out_dir, score, protocol, seed=seed, dataset=dataset,
                   responses=FileRef(str(responses_path), sha256_file(responses_path)), judge_url=judge_url,
                   identity=identity, dropped_rows=0)
