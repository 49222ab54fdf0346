"""Row and media identity hashes, shared by the manifest and generation.

``source_row_hash`` hashes a row's fields without its media columns; ``row_key`` is upstream's per-row
identity ``<ordinal:08d>:<index>:<source_row_hash[:16]>``; ``media_set_sha256`` and ``source_record_sha256``
bind a row's ordered images. All values are path-independent.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable, Mapping

from trace_lib.jsonio import canonical_json_ascii

#: Row fields left out of ``source_row_hash`` (the media, which is bound separately by content).
MEDIA_FIELDS = frozenset(
    {"image", "images", "image_path", "image_paths", "img", "picture", "video", "videos", "video_path",
     "video_paths"}
)


def _plain(value: Any) -> Any:
    """numpy scalars/arrays -> Python values; anything else JSON cannot hold -> ``str``."""
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    item = getattr(value, "item", None)
    if callable(item):
        return item()
    return str(value)


def source_row_hash(row: Mapping[str, Any]) -> str:
    """SHA-256 of the row's non-media fields: JSON with sorted keys, default separators, ``ensure_ascii=False``."""
    fields = {k: v for k, v in row.items() if k not in MEDIA_FIELDS and not str(k).startswith("__trace_")}
    text = json.dumps(fields, ensure_ascii=False, sort_keys=True, default=_plain)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def row_key(ordinal: int, index: Any, row_hash: str) -> str:
    """Upstream's row identity: ``<ordinal zero-padded to 8>:<index>:<first 16 hex of source_row_hash>``."""
    return f"{ordinal:08d}:{index}:{row_hash[:16]}"


def canonical_sha256(value: Any) -> str:
    """SHA-256 of the canonical JSON (sorted keys, compact, ASCII) of ``value``."""
    return hashlib.sha256(canonical_json_ascii(value).encode("utf-8")).hexdigest()


def media_set_sha256(media_sha256: Iterable[str]) -> str:
    """Hash of a row's ordered images: ``CJ([{"type": "image", "sha256": h}, ...])``."""
    return canonical_sha256([{"type": "image", "sha256": h} for h in media_sha256])


def source_record_sha256(row_hash: str, media_set: str) -> str:
    """``CJ({"source_row_hash": ..., "media_set_sha256": ...})``."""
    return canonical_sha256({"source_row_hash": row_hash, "media_set_sha256": media_set})
