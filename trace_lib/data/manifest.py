"""The content-bound dataset manifest: per benchmark, the data files, every prompt image and every row's hashes.

``build_dataset_entry`` loads a benchmark with its protocol (``load``), builds every prompt (``build_prompt``,
which materialises the images), checks the row count against ``suite.v1.json`` and records: data file sizes
and SHA-256, every unique image (size, SHA-256, width, height, format), and per row its ordinal, index,
``source_row_hash``, ordered image hashes, ``media_set_sha256`` and ``source_record_sha256`` (eval-campaign
spec §2.5). The per-benchmark snapshot and the view snapshot follow upstream's definitions, so
``dataset_revision`` (``trace-final25-datasets-v2:<view snapshot>``) is comparable with a canonical run that
used byte-identical data. Paths are stored relative to the data root; hashes are path-independent.

The manifest file is canonical JSON written atomically; :func:`load_manifest` re-derives every snapshot and
:func:`check_manifest` re-hashes every file, returning every problem it finds.
"""

from __future__ import annotations

import datetime as _dt
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from trace_lib.atomic import write_text_atomic
from trace_lib.data.prompts import build_row_prompt
from trace_lib.data.rowhash import canonical_sha256, media_set_sha256, source_record_sha256, source_row_hash
from trace_lib.errors import InputError
from trace_lib.jsonio import canonical_json_ascii, required
from trace_lib.outputs import no_empty_tree_left
from trace_lib.release.load import load_json, sha256_file

if TYPE_CHECKING:
    from trace_lib.protocol import Protocol
    from trace_lib.data.prepare import ArtifactSource
    from trace_lib.release.suite import Suite

SCHEMA_VERSION = "trace-repro-datasets-v1"
#: Upstream's producer-era schema id; it is part of the view-snapshot and dataset-revision definitions.
UPSTREAM_SCHEMA = "trace-final25-datasets-v2"
MANIFEST_NAME = "trace_eval_v1_dataset_manifest.json"


@dataclass(frozen=True)
class FileRecord:
    path: str  # relative to the data root
    size_bytes: int
    sha256: str


@dataclass(frozen=True)
class MediaRecord:
    path: str
    size_bytes: int
    sha256: str
    width: int
    height: int
    format: str


@dataclass(frozen=True)
class RowMedia:
    ordinal: int
    index: str
    source_row_hash: str
    media: tuple[str, ...]  # image paths in prompt order (relative)
    media_sha256: tuple[str, ...]
    media_set_sha256: str
    source_record_sha256: str


@dataclass(frozen=True)
class DatasetEntry:
    """One benchmark's receipt."""

    key: str
    alias: str
    expected_rows: int
    rows: int
    source: Mapping[str, Any]
    files: tuple[FileRecord, ...]
    media_files: tuple[MediaRecord, ...]
    row_media: tuple[RowMedia, ...]
    snapshot_sha256: str

    def row(self, ordinal: int) -> RowMedia:
        return self.row_media[ordinal]


@dataclass(frozen=True)
class Manifest:
    suite_id: str
    suite_sha256: str
    vlmevalkit_commit: str
    data_root: str
    datasets: Mapping[str, DatasetEntry]
    view: tuple[str, ...]  # the suite keys, in order
    created_at: str = ""
    updated_at: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return all(k in self.datasets for k in self.view)

    @property
    def view_snapshot_sha256(self) -> str | None:
        """Upstream's view snapshot of the whole suite (only when every suite benchmark is present)."""
        if not self.complete:
            return None
        return view_snapshot_sha256(suite_sha256=self.suite_sha256, vlmevalkit_commit=self.vlmevalkit_commit,
                                    snapshots={k: self.datasets[k].snapshot_sha256 for k in self.view})

    @property
    def dataset_revision(self) -> str | None:
        snap = self.view_snapshot_sha256
        return f"{UPSTREAM_SCHEMA}:{snap}" if snap else None


def dataset_snapshot(row_media: Sequence[Any]) -> str:
    """Upstream's per-benchmark snapshot (``dataset_snapshot_sha256``) over the rows' identity hashes, in order
    (any rows with ``ordinal``, ``index``, ``source_row_hash``, ``media_set_sha256``, ``source_record_sha256``)."""
    return canonical_sha256([
        {"ordinal": int(r.ordinal), "index": str(r.index), "source_row_hash": r.source_row_hash,
         "media_set_sha256": r.media_set_sha256, "source_record_sha256": r.source_record_sha256}
        for r in row_media
    ])


def view_snapshot_sha256(*, suite_sha256: str, vlmevalkit_commit: str, snapshots: Mapping[str, str]) -> str:
    """Upstream's view snapshot (``manifest_snapshot_sha256``) over the benchmarks of ``snapshots`` (benchmark ->
    per-benchmark snapshot): any subset of the suite, at any row counts. It is the archive's ``dataset_sha256``."""
    return canonical_sha256({
        "schema_version": UPSTREAM_SCHEMA, "suite_sha256": str(suite_sha256),
        "vlmevalkit_commit": str(vlmevalkit_commit),
        "datasets": {str(k): str(v) for k, v in sorted(snapshots.items())},
    })


@dataclass(frozen=True)
class DatasetView:
    """The benchmarks a run covers and each one's snapshot recomputed from trace-repro's own rows; ``notes`` say
    where the data root departs from the suite (other row counts) without refusing it."""

    suite_sha256: str
    vlmevalkit_commit: str
    snapshots: Mapping[str, str]  # benchmark -> per-benchmark snapshot
    rows: Mapping[str, int]  # benchmark -> rows in the data root
    notes: tuple[str, ...] = ()

    @property
    def dataset_sha256(self) -> str:
        return view_snapshot_sha256(suite_sha256=self.suite_sha256, vlmevalkit_commit=self.vlmevalkit_commit,
                                    snapshots=self.snapshots)


def row_count_note(benchmark: str, found: int, expected: int | None) -> str | None:
    """The note for a benchmark whose data root holds another row count than the suite (None when equal)."""
    if expected is None or found == expected:
        return None
    return f"{benchmark}: {found} rows in the data root, the suite lists {expected}; hashed as found"


# -- building --------------------------------------------------------------------------------------------------

def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        raise InputError("file lies outside the data root", field="data_root", expected=str(root),
                         found=str(path)) from None


def _files_under(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and ".cache" not in p.relative_to(path).parts)
    return [path]


def _media_record(path: Path, root: Path) -> MediaRecord:
    from PIL import Image

    try:
        with Image.open(path) as img:
            img.load()
            width, height, fmt = img.width, img.height, img.format or ""
    except Exception as exc:  # PIL raises many types for unreadable files
        raise InputError(f"unreadable image ({type(exc).__name__})", file=str(path)) from None
    size = path.stat().st_size
    if size == 0:
        raise InputError("empty image", file=str(path))
    return MediaRecord(_relative(path, root), size, sha256_file(path), width, height, fmt)


def build_dataset_entry(
    source: ArtifactSource, data_root: Path, protocol: Protocol, suite: Suite, *, workers: int = 8,
    progress: Callable[[int], Any] | None = None,
) -> DatasetEntry:
    """Load, prompt and hash one benchmark (images are materialised by the protocol's ``build_prompt``); a failure
    removes the images this call materialised (and the directories made for them), never one that was there.

    Raises:
        InputError: row count differs from the suite, a row without image, a cell that does not decode (naming
            the data file), an unreadable image, a file outside the data root.
    """
    data_root = Path(data_root)
    with no_empty_tree_left(source.image_dir(data_root)) as new, new.recording():  # a refused row leaves no image
        return _dataset_entry(source, data_root, protocol, suite, workers, progress)


def _dataset_entry(source: ArtifactSource, data_root: Path, protocol: Protocol, suite: Suite, workers: int,
                   progress: Callable[[int], Any] | None) -> DatasetEntry:
    data_path = source.local_path(data_root)
    image_dir = source.image_dir(data_root)
    rows = protocol.load(data_path)
    expected = suite.benchmark(source.key).rows
    if len(rows) != expected:
        raise InputError("row count differs from the suite", file=str(data_path), field=source.key,
                         expected=expected, found=len(rows))
    row_paths: list[tuple[int, str, str, list[Path]]] = []
    for ordinal, row in enumerate(rows):
        items = build_row_prompt(protocol, row, image_dir, source=data_path)  # a bad cell names the data file
        images = [Path(i.value) for i in items if i.kind == "image"]
        if not images:
            raise InputError("row has no image", file=str(data_path), field=f"{source.key}[{ordinal}]")
        row_paths.append((ordinal, str(row["index"]), source_row_hash(row), images))
        if progress is not None:
            progress(1)
    unique = sorted({p for *_, paths in row_paths for p in paths})
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        media = list(pool.map(lambda p: _media_record(p, data_root), unique))
    by_path = {m.path: m for m in media}
    row_media = []
    for ordinal, index, row_hash, paths in row_paths:
        rel = tuple(_relative(p, data_root) for p in paths)
        hashes = tuple(by_path[r].sha256 for r in rel)
        media_set = media_set_sha256(hashes)
        row_media.append(RowMedia(ordinal, index, row_hash, rel, hashes, media_set,
                                  source_record_sha256(row_hash, media_set)))
    sources = _files_under(data_path)
    if source.kind == "hf_snapshot":
        sources += _files_under(source.snapshot_dir(data_root))
    files = tuple(FileRecord(_relative(p, data_root), p.stat().st_size, sha256_file(p)) for p in sources)
    return DatasetEntry(
        key=source.key, alias=source.alias, expected_rows=expected, rows=len(rows),
        source={"kind": source.kind, "location": source.describe(), "md5": source.md5},
        files=files, media_files=tuple(media), row_media=tuple(row_media), snapshot_sha256=dataset_snapshot(row_media),
    )


def new_manifest(suite: Suite, data_root: Path) -> Manifest:
    now = _now()
    return Manifest(suite.suite_id, suite.sha256, suite.vlmevalkit_commit, str(Path(data_root).resolve()), {},
                    suite.keys, now, now)


def with_entry(manifest: Manifest, entry: DatasetEntry) -> Manifest:
    datasets = dict(manifest.datasets)
    datasets[entry.key] = entry
    return Manifest(manifest.suite_id, manifest.suite_sha256, manifest.vlmevalkit_commit, manifest.data_root,
                    {k: datasets[k] for k in manifest.view if k in datasets}, manifest.view, manifest.created_at,
                    _now())


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


# -- (de)serialisation ----------------------------------------------------------------------------------------

def _entry_json(entry: DatasetEntry) -> dict[str, Any]:
    return {
        "key": entry.key, "alias": entry.alias, "expected_rows": entry.expected_rows, "rows": entry.rows,
        "source": dict(entry.source),
        "files": [vars(f) for f in entry.files],
        "media_files": [vars(m) for m in entry.media_files],
        "row_media": [
            {"ordinal": r.ordinal, "index": r.index, "source_row_hash": r.source_row_hash, "media": list(r.media),
             "media_sha256": list(r.media_sha256), "media_set_sha256": r.media_set_sha256,
             "source_record_sha256": r.source_record_sha256}
            for r in entry.row_media
        ],
        "dataset_snapshot_sha256": entry.snapshot_sha256,
    }


def manifest_json(manifest: Manifest) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "suite_id": manifest.suite_id,
        "suite_sha256": manifest.suite_sha256,
        "vlmevalkit_commit": manifest.vlmevalkit_commit,
        "data_root": manifest.data_root,
        "created_at": manifest.created_at,
        "updated_at": manifest.updated_at,
        "dataset_views": {manifest.suite_id: list(manifest.view)},
        "datasets": {k: _entry_json(e) for k, e in manifest.datasets.items()},
        "view_snapshot_sha256": manifest.view_snapshot_sha256,
        "dataset_revision": manifest.dataset_revision,
    }


def write_manifest(path: Path, manifest: Manifest) -> None:
    """Write canonical JSON plus a newline, atomically (temp file + rename)."""
    write_text_atomic(path, canonical_json_ascii(manifest_json(manifest)) + "\n", encoding="ascii")


def load_manifest(path: Path) -> Manifest:
    """Read a manifest strictly and re-derive every row, benchmark and view hash from its records.

    Raises:
        InputError: missing/malformed file, wrong schema, or a recorded hash that does not re-derive.
    """
    file = str(path)
    try:
        doc = load_json(Path(path), name=file)
    except Exception as exc:  # ReleaseFileError from the strict reader -> an input error of this file
        raise InputError(str(exc)) from None
    if required(doc, "schema_version", file=file, error=InputError) != SCHEMA_VERSION:
        raise InputError("unknown manifest schema", file=file, field="schema_version", expected=SCHEMA_VERSION,
                         found=doc.get("schema_version"))
    at = ["suite_id"]  # the field being read, for a record of the wrong shape
    try:
        manifest = _manifest_from(doc, file, at)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        what = f"missing field {exc.args[0]!r}" if isinstance(exc, KeyError) else f"wrong type ({exc})"
        raise InputError(f"malformed manifest: {what}", file=file, field=at[-1],
                         hint="re-run 'trace-repro prepare-data' to rewrite it") from None
    if manifest.view_snapshot_sha256 != doc.get("view_snapshot_sha256"):
        raise InputError("view snapshot does not re-derive", file=file, field="view_snapshot_sha256",
                         expected=manifest.view_snapshot_sha256, found=doc.get("view_snapshot_sha256"))
    return manifest


def _manifest_from(doc: Any, file: str, at: list[str]) -> Manifest:
    """The manifest ``doc`` records, every hash re-derived; ``at`` gets each field as it is read."""
    suite_id = required(doc, "suite_id", file=file, error=InputError)
    at.append("dataset_views")
    view = tuple(required(required(doc, "dataset_views", file=file, error=InputError), suite_id, file=file,
                          where="dataset_views.", error=InputError))
    datasets = {}
    at.append("datasets")
    for key, raw in required(doc, "datasets", file=file, error=InputError).items():
        where = f"datasets.{key}."
        at.append(f"datasets.{key}")
        rows = []
        for number, r in enumerate(required(raw, "row_media", file=file, where=where, error=InputError)):
            at.append(f"{where}row_media[{number}]")
            media_set = media_set_sha256(r["media_sha256"])
            record = source_record_sha256(r["source_row_hash"], media_set)
            if media_set != r["media_set_sha256"] or record != r["source_record_sha256"]:
                raise InputError("row hashes do not re-derive", file=file, field=f"{where}row_media[{r['ordinal']}]")
            rows.append(RowMedia(r["ordinal"], r["index"], r["source_row_hash"], tuple(r["media"]),
                                 tuple(r["media_sha256"]), media_set, record))
        snapshot = dataset_snapshot(rows)
        if snapshot != required(raw, "dataset_snapshot_sha256", file=file, where=where, error=InputError):
            raise InputError("dataset snapshot does not re-derive", file=file, field=f"{where}dataset_snapshot_sha256",
                             expected=snapshot, found=raw.get("dataset_snapshot_sha256"))
        at.append(f"datasets.{key}")
        datasets[key] = DatasetEntry(
            key=key, alias=raw["alias"], expected_rows=raw["expected_rows"], rows=raw["rows"], source=raw["source"],
            files=tuple(FileRecord(**f) for f in raw["files"]),
            media_files=tuple(MediaRecord(**m) for m in raw["media_files"]),
            row_media=tuple(rows), snapshot_sha256=snapshot,
        )
    at.append("suite_sha256, vlmevalkit_commit, data_root")
    return Manifest(suite_id, doc["suite_sha256"], doc["vlmevalkit_commit"], doc["data_root"], datasets, view,
                    doc.get("created_at", ""), doc.get("updated_at", ""))


def check_manifest(manifest: Manifest, suite: Suite, *, rehash: bool = True,
                   keys: Iterable[str] | None = None) -> list[str]:
    """Every problem with ``manifest`` against ``suite`` and the files on disk (empty list = all good)."""
    problems: list[str] = []
    if manifest.suite_sha256 != suite.sha256:
        problems.append(f"suite_sha256: manifest built for another suite (expected {suite.sha256}, "
                        f"found {manifest.suite_sha256})")
    root = Path(manifest.data_root)
    for key in keys if keys is not None else manifest.view:
        entry = manifest.datasets.get(key)
        if entry is None:
            problems.append(f"datasets.{key}: not prepared")
            continue
        expected = suite.benchmark(key).rows
        if entry.rows != expected:
            problems.append(f"datasets.{key}.rows: differs from the suite (expected {expected}, found {entry.rows})")
        elif len(entry.row_media) != expected:
            problems.append(f"datasets.{key}.row_media: differs from the suite (expected {expected} rows, found "
                            f"{len(entry.row_media)})")
        records: list[FileRecord | MediaRecord] = [*entry.files, *entry.media_files]
        for record in records:
            path = root / record.path
            if not path.is_file():
                problems.append(f"datasets.{key}: {record.path}: file is missing")
            elif path.stat().st_size != record.size_bytes:
                problems.append(f"datasets.{key}: {record.path}: size changed (expected {record.size_bytes}, "
                                f"found {path.stat().st_size})")
            elif rehash and sha256_file(path) != record.sha256:
                problems.append(f"datasets.{key}: {record.path}: content changed (sha256 differs)")
    return problems


def manifest_path(data_root: Path) -> Path:
    return Path(data_root) / MANIFEST_NAME
