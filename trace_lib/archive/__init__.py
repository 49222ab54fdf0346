"""The paper's own evaluation archive (``maveryn/trace-eval-runs``): schema, hashes, fetch, reader, re-score.

Public API for other modules (e.g. a stage-attribution ``diagnose``): :mod:`.schema` (config and column names,
:class:`~.schema.ArchiveRow`), :mod:`.hashes` (upstream's hash definitions), :mod:`.reader`
(:func:`~.reader.open_archive`, :meth:`~.reader.ArchiveRun.iter_slice`), :mod:`.fetch`, :mod:`.replay_judge`,
:mod:`.identity`, :mod:`.rescore`.
"""
