"""Prompt identity: does trace-repro send, row by row, exactly what the paper sent?

For each archived row whose dataset row is present, :func:`compare_identity` recomputes every hash field of the
public schema from trace-repro's own request with upstream's definitions (:mod:`trace_lib.archive.hashes`):
``source_row_sha256``, ``ordered_media_sha256`` (the SHA-256 of each image file trace-repro materialises, in
prompt order), ``media_set_sha256``, ``source_record_sha256``, ``prompt_sha256`` (the persisted prompt text),
``request_sha256`` (with the neutral generation settings of trace-repro's own request), and, given the run's
dataset view (:func:`dataset_view`: every benchmark the run covers, hashed from the data root),
``dataset_sha256`` and ``prompt_contract_sha256``. A differing row says why: ``dataset row`` (the row's fields),
``prompt text``, ``image bytes`` (or image count/order), ``decoding field`` (naming the settings that differ),
``dataset view`` (another benchmark or row of the view differs).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from trace_lib.archive import hashes
from trace_lib.archive.schema import MEDIA_CONTRACT_VERSION, ArchiveRow, SliceKey
from trace_lib.release.load import sha256_file

#: The producer-era media contract string whose SHA-256 the public settings carry
#: (upstream ``trace_eval_media_contract.MEDIA_CONTRACT_VERSION``).
SOURCE_MEDIA_CONTRACT = "trace-final25-media-v2"
#: Every hash field of the public schema, in pipeline order (all are recomputed and compared).
HASH_FIELDS = ("dataset_sha256", "source_row_sha256", "ordered_media_sha256", "media_set_sha256",
               "source_record_sha256", "prompt_sha256", "request_sha256", "prompt_contract_sha256")
#: The two fields that need the run's whole dataset view (not compared without it).
VIEW_FIELDS = ("dataset_sha256", "prompt_contract_sha256")
FIRST_ROWS = 10


def media_inputs(mm_processor_kwargs: Mapping[str, int], transport: str = "file-url") -> dict[str, Any]:
    """The seven neutral media inputs of a trace-repro request (pixel bounds from its ``mm_processor_kwargs``)."""
    return {
        "media_contract_version": MEDIA_CONTRACT_VERSION,
        "source_media_contract_sha256": hashes.text_sha256(SOURCE_MEDIA_CONTRACT),
        "media_transport": transport,
        "min_image_pixels": mm_processor_kwargs.get("min_pixels"),
        "max_image_pixels": mm_processor_kwargs.get("max_pixels"),
        "max_image_side": None,
        "image_jpeg_quality": None,
    }


@dataclass(frozen=True)
class OurIdentity:
    """The public hashes of one trace-repro request and the settings they were computed from
    (``dataset_sha256``/``prompt_contract_sha256`` None without the run's dataset view)."""

    source_row_sha256: str
    ordered_media_sha256: tuple[str, ...]
    media_set_sha256: str
    source_record_sha256: str
    prompt_sha256: str
    request_sha256: str
    settings: Mapping[str, Any]
    dataset_sha256: str | None = None
    prompt_contract_sha256: str | None = None

    # the per-benchmark snapshot reads these names (trace_lib.data.manifest.dataset_snapshot)
    ordinal: int = 0
    index: str = ""

    @property
    def source_row_hash(self) -> str:
        return self.source_row_sha256


def _image_hashes(prepared: Any, cache: dict[Path, str]) -> list[str]:
    media = []
    for path in prepared.request.image_paths():
        if path not in cache:
            cache[path] = sha256_file(path)
        media.append(cache[path])
    return media


def our_identity(prepared: Any, *, model_id: str, file_hashes: dict[Path, str] | None = None,
                 dataset_sha256: str | None = None) -> OurIdentity:
    """Hashes of a :class:`~trace_lib.generation.run.PreparedRow` (``file_hashes`` caches image digests);
    ``dataset_sha256`` (the run's view, :func:`dataset_view`) adds it and ``prompt_contract_sha256``."""
    media = _image_hashes(prepared, {} if file_hashes is None else file_hashes)
    settings = hashes.generation_settings(dict(prepared.request.sampling), model_id=model_id,
                                          media_inputs=media_inputs(prepared.request.mm_processor_kwargs))
    media_set = hashes.media_set_sha256(media)
    record = hashes.source_record_sha256(prepared.source_row_hash, media_set)
    prompt = hashes.prompt_sha256(prepared.prompt)
    request = hashes.request_sha256(prompt_digest=prompt, ordered_media_sha256=media, settings=settings)
    contract = None if dataset_sha256 is None else hashes.prompt_contract_sha256(
        dataset_sha256=dataset_sha256, source_row_sha256=prepared.source_row_hash, source_record_sha256=record,
        media_set_sha256=media_set, prompt_sha256=prompt, request_sha256=request)
    return OurIdentity(prepared.source_row_hash, tuple(media), media_set, record, prompt, request, settings,
                       dataset_sha256, contract, int(prepared.ordinal), str(prepared.index))


def benchmark_snapshot(prepared: Sequence[Any], *, file_hashes: dict[Path, str] | None = None) -> str:
    """The per-benchmark ``dataset_snapshot_sha256`` of trace-repro's own prepared rows (every row, in order)."""
    from trace_lib.data.manifest import dataset_snapshot

    cache = {} if file_hashes is None else file_hashes
    rows = []
    for p in prepared:
        media = hashes.media_set_sha256(_image_hashes(p, cache))
        rows.append(OurIdentity(p.source_row_hash, (), media, hashes.source_record_sha256(p.source_row_hash, media),
                                "", "", {}, ordinal=int(p.ordinal), index=str(p.index)))
    return dataset_snapshot(rows)


def dataset_view(suite: Any, snapshots: Mapping[str, str], rows: Mapping[str, int]) -> Any:
    """The run's :class:`~trace_lib.data.manifest.DatasetView` from each view benchmark's snapshot and row count
    (``suite``: the release's; a row count other than the suite's is a note, not a refusal)."""
    from trace_lib.data.manifest import DatasetView, row_count_note

    notes = []
    for key in sorted(rows):
        try:
            expected = suite.benchmark(key).rows
        except Exception:  # noqa: BLE001 - a benchmark the suite does not list: noted, still hashed
            expected = None
            notes.append(f"{key}: not a benchmark of suite {suite.suite_id}; hashed as found")
        note = row_count_note(key, rows[key], expected)
        if note:
            notes.append(note)
    return DatasetView(suite.sha256, suite.vlmevalkit_commit, dict(snapshots), dict(rows), tuple(notes))


@dataclass(frozen=True)
class RowDifference:
    """One row whose hashes differ, and why."""

    source_index: str
    fields: tuple[str, ...]
    reasons: tuple[str, ...]

    def render(self) -> str:
        return f"{self.source_index}: {', '.join(self.reasons)} ({', '.join(self.fields)})"


@dataclass(frozen=True)
class IdentityReport:
    """Prompt identity of one slice: rows compared, identical, and the first differing rows with reasons."""

    key: SliceKey
    compared: int
    identical: int
    reasons: Mapping[str, int]  # reason -> rows
    first: tuple[RowDifference, ...]
    not_compared: Mapping[str, str] = field(default_factory=dict)  # hash field -> why it cannot be compared
    notes: tuple[str, ...] = ()  # where the data root departs from the suite (hashed as found)

    @property
    def ok(self) -> bool:
        return self.compared > 0 and self.identical == self.compared

    @property
    def fields(self) -> tuple[str, ...]:
        """The hash fields compared on every row."""
        return tuple(f for f in HASH_FIELDS if f not in self.not_compared)

    def explain(self) -> str:
        if self.ok:
            return (f"{self.key.id}: {self.identical}/{self.compared} rows identical to the paper's requests in "
                    f"{len(self.fields)} hash fields")
        if self.compared == 0:
            return f"{self.key.id}: no archived row was compared"
        why = ", ".join(f"{n} {r}" for r, n in sorted(self.reasons.items()))
        return (f"{self.key.id}: {self.compared - self.identical}/{self.compared} rows differ from the paper's "
                f"requests ({why}); first: " + "; ".join(d.render() for d in self.first))

    def properties(self) -> list[tuple[str, str]]:
        props = [("identity_rows", f"{self.identical}/{self.compared}"),
                 ("identity_fields", ",".join(self.fields))]
        props += [(f"identity_{r.replace(' ', '_')}", str(n)) for r, n in sorted(self.reasons.items())]
        props += [(f"identity_diff[{i}]", d.render()) for i, d in enumerate(self.first)]
        props += [(f"identity_not_compared[{name}]", why) for name, why in sorted(self.not_compared.items())]
        props += [(f"identity_note[{i}]", note) for i, note in enumerate(self.notes)]
        return props


def _decoding_diff(ours: Mapping[str, Any], archived_json: str) -> list[str]:
    try:
        theirs = json.loads(archived_json)
    except (TypeError, json.JSONDecodeError):
        return ["generation_settings_json unreadable"]
    keys = sorted(set(ours) | set(theirs))
    return [f"{k}={ours.get(k)!r}!={theirs.get(k)!r}" for k in keys if ours.get(k) != theirs.get(k)]


def difference(archived: ArchiveRow, ours: OurIdentity, fields: Sequence[str] = HASH_FIELDS) -> RowDifference | None:
    """The difference between an archived row and trace-repro's hashes of the same row over ``fields`` (None when
    equal; a field trace-repro did not compute, None, is not compared): ``dataset row``, ``prompt text``,
    ``image count``/``image bytes``/``image order``, ``decoding field k=ours!=theirs``, ``dataset view``,
    ``source record``/``prompt contract`` (the hash alone differs)."""
    differing = tuple(f for f in fields
                      if getattr(ours, f) is not None and tuple_or(getattr(ours, f)) != tuple_or(getattr(archived, f)))
    if not differing:
        return None
    why = []
    if "dataset_sha256" in differing:
        why.append("dataset view")
    if "source_row_sha256" in differing:
        why.append("dataset row")
    if "prompt_sha256" in differing:
        why.append("prompt text")
    if {"media_set_sha256", "ordered_media_sha256"} & set(differing):
        if len(ours.ordered_media_sha256) != len(archived.ordered_media_sha256):
            why.append("image count")
        elif sorted(ours.ordered_media_sha256) == sorted(archived.ordered_media_sha256):
            why.append("image order")
        else:
            why.append("image bytes")
    if "request_sha256" in differing and not {"prompt_sha256", "media_set_sha256"} & set(differing):
        why.append("decoding field " + " ".join(_decoding_diff(ours.settings, archived.generation_settings_json)))
    if not why:
        why.append("source record" if "source_record_sha256" in differing else "prompt contract")
    return RowDifference(archived.source_index, differing, tuple(why))


def tuple_or(value: Any) -> Any:
    """Lists and tuples compare as tuples (``ordered_media_sha256`` is a list in Parquet, a tuple here)."""
    return tuple(value) if isinstance(value, (list, tuple)) else value


class IdentityTally:
    """Accumulates per-row differences into an :class:`IdentityReport` (counts per reason, the first rows)."""

    def __init__(self) -> None:
        self.compared = 0
        self.identical = 0
        self.reasons: dict[str, int] = {}
        self.first: list[RowDifference] = []

    def add(self, diff: RowDifference | None) -> None:
        self.compared += 1
        if diff is None:
            self.identical += 1
            return
        for r in diff.reasons:
            name = "decoding field" if r.startswith("decoding field") else r
            self.reasons[name] = self.reasons.get(name, 0) + 1
        if len(self.first) < FIRST_ROWS:
            self.first.append(diff)

    def report(self, key: SliceKey, *, not_compared: Mapping[str, str] | None = None,
               notes: Sequence[str] = ()) -> IdentityReport:
        return IdentityReport(key, self.compared, self.identical, dict(self.reasons), tuple(self.first),
                              dict(not_compared or {}), tuple(notes))


def compare_identity(key: SliceKey, archived: Sequence[ArchiveRow], prepared: Sequence[Any], *,
                     model_id: str, view: Any = None) -> IdentityReport:
    """Compare each archived row with trace-repro's prepared request of the same row (matched by ordinal and
    index; a dataset row trace-repro does not have is a ``dataset row`` difference). ``view``: the run's
    :class:`~trace_lib.data.manifest.DatasetView` (None: ``dataset_sha256`` and ``prompt_contract_sha256`` are
    listed as not compared, with why)."""
    by_key = {(p.ordinal, p.index): p for p in prepared}
    cache: dict[Path, str] = {}
    tally = IdentityTally()
    dataset = None if view is None else view.dataset_sha256
    for a in archived:
        p = by_key.get((a.source_ordinal, a.source_index))
        if p is None:
            tally.add(RowDifference(a.source_index, ("source_index",), ("dataset row",)))
        else:
            tally.add(difference(a, our_identity(p, model_id=model_id, file_hashes=cache, dataset_sha256=dataset)))
    not_compared = {} if view is not None else {f: "the run's dataset view is not all in the data root"
                                                for f in VIEW_FIELDS}
    return tally.report(key, not_compared=not_compared, notes=() if view is None else view.notes)
