"""Prompt identity: does trace-repro send, row by row, exactly what the paper sent?

For each archived row whose dataset row is present, :func:`compare_identity` computes ``source_row_sha256``,
``media_set_sha256`` (over the SHA-256 of each image file trace-repro materialises, in prompt order),
``source_record_sha256``, ``prompt_sha256`` (the persisted prompt text) and ``request_sha256`` (with the neutral
generation settings of trace-repro's own request) with upstream's definitions (:mod:`trace_lib.archive.hashes`)
and compares them with the archive. A differing row says why: ``dataset row`` (the row's fields), ``prompt text``,
``image bytes`` (or image count), ``decoding field`` (naming the settings that differ).
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
HASH_FIELDS = ("source_row_sha256", "media_set_sha256", "source_record_sha256", "prompt_sha256", "request_sha256")
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
    """The public hashes of one trace-repro request and the settings they were computed from."""

    source_row_sha256: str
    ordered_media_sha256: tuple[str, ...]
    media_set_sha256: str
    source_record_sha256: str
    prompt_sha256: str
    request_sha256: str
    settings: Mapping[str, Any]


def our_identity(prepared: Any, *, model_id: str, file_hashes: dict[Path, str] | None = None) -> OurIdentity:
    """Hashes of a :class:`~trace_lib.generation.run.PreparedRow` (``file_hashes`` caches image digests)."""
    cache = {} if file_hashes is None else file_hashes
    media = []
    for path in prepared.request.image_paths():
        if path not in cache:
            cache[path] = sha256_file(path)
        media.append(cache[path])
    settings = hashes.generation_settings(dict(prepared.request.sampling), model_id=model_id,
                                          media_inputs=media_inputs(prepared.request.mm_processor_kwargs))
    media_set = hashes.media_set_sha256(media)
    prompt = hashes.prompt_sha256(prepared.prompt)
    return OurIdentity(prepared.source_row_hash, tuple(media), media_set,
                       hashes.source_record_sha256(prepared.source_row_hash, media_set), prompt,
                       hashes.request_sha256(prompt_digest=prompt, ordered_media_sha256=media, settings=settings),
                       settings)


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

    @property
    def ok(self) -> bool:
        return self.compared > 0 and self.identical == self.compared

    def explain(self) -> str:
        if self.ok:
            return f"{self.key.id}: {self.identical}/{self.compared} rows byte-identical to the paper's requests"
        why = ", ".join(f"{n} {r}" for r, n in sorted(self.reasons.items()))
        return (f"{self.key.id}: {self.compared - self.identical}/{self.compared} rows differ from the paper's "
                f"requests ({why}); first: " + "; ".join(d.render() for d in self.first))

    def properties(self) -> list[tuple[str, str]]:
        props = [("identity_rows", f"{self.identical}/{self.compared}")]
        props += [(f"identity_{r.replace(' ', '_')}", str(n)) for r, n in sorted(self.reasons.items())]
        props += [(f"identity_diff[{i}]", d.render()) for i, d in enumerate(self.first)]
        props += [(f"identity_not_compared[{name}]", why) for name, why in sorted(self.not_compared.items())]
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
    equal): ``dataset row``, ``prompt text``, ``image count``/``image bytes``, ``decoding field k=ours!=theirs``."""
    differing = tuple(f for f in fields if getattr(ours, f) != getattr(archived, f))
    if not differing:
        return None
    why = []
    if "source_row_sha256" in differing:
        why.append("dataset row")
    if "prompt_sha256" in differing:
        why.append("prompt text")
    if "media_set_sha256" in differing:
        why.append("image count" if len(ours.ordered_media_sha256) != len(archived.ordered_media_sha256)
                   else "image bytes")
    if "request_sha256" in differing and not {"prompt_sha256", "media_set_sha256"} & set(differing):
        why.append("decoding field " + " ".join(_decoding_diff(ours.settings, archived.generation_settings_json)))
    return RowDifference(archived.source_index, differing, tuple(why) or ("source record",))


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

    def report(self, key: SliceKey, *, not_compared: Mapping[str, str] | None = None) -> IdentityReport:
        return IdentityReport(key, self.compared, self.identical, dict(self.reasons), tuple(self.first),
                              dict(not_compared or {}))


def compare_identity(key: SliceKey, archived: Sequence[ArchiveRow], prepared: Sequence[Any], *,
                     model_id: str) -> IdentityReport:
    """Compare each archived row with trace-repro's prepared request of the same row (matched by row key,
    ordinal and index; a dataset row trace-repro does not have is a ``dataset row`` difference)."""
    by_key = {(p.ordinal, p.index): p for p in prepared}
    cache: dict[Path, str] = {}
    tally = IdentityTally()
    for a in archived:
        p = by_key.get((a.source_ordinal, a.source_index))
        if p is None:
            tally.add(RowDifference(a.source_index, ("source_index",), ("dataset row",)))
        else:
            tally.add(difference(a, our_identity(p, model_id=model_id, file_hashes=cache)))
    return tally.report(key)
