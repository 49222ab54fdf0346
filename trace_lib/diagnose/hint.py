"""The line a failing live slice adds when the paper's archive is at hand: where its run parts from the paper's."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from trace_lib.diagnose.views import SliceKey
from trace_lib.errors import TraceReproError


def archive_divergence_hint(campaign_root: Path | str, archive_root: Path | str, key: SliceKey, *,
                            routes: Mapping[str, str] | None = None) -> str:
    """The slice's first diverging stage against the archive and the ``diagnose`` command that shows the rest;
    never raises (a diagnosis that cannot be made says why in the same place). ``routes``: benchmark -> scoring
    route (:func:`trace_lib.archive.extraction_form.benchmark_routes`), which says where extractions compare."""
    from trace_lib.diagnose.archive_view import ArchiveReference
    from trace_lib.diagnose.attribution import diagnose_slice
    from trace_lib.diagnose.campaign_view import load_campaign_slice

    command = f"trace-repro diagnose --candidate {campaign_root} --reference {archive_root} --slice {key.id}"
    try:
        left = load_campaign_slice(Path(campaign_root), key)
        right = ArchiveReference.open(Path(archive_root), routes=routes).slice(key)
    except TraceReproError as exc:
        return f"against the paper's archive: not diagnosed ({exc.render()})"
    if left is None or right is None:
        missing = "this run's responses" if left is None else "the archive's slice"
        return f"against the paper's archive: not diagnosed ({missing} not found)"
    return f"against the paper's archive: {diagnose_slice(left, right).headline()}\n  details: {command}"
