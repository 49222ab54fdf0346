"""The paper's own evaluation archive (``maveryn/trace-eval-runs``): schema, hashes, fetch, reader, re-score.

Public API for other modules (e.g. a stage-attribution ``diagnose``):

- :mod:`.schema`: config and column names, :class:`~.schema.SliceKey`, :class:`~.schema.ArchiveRow` (one sample
  joined across responses/extractions/scores), :class:`~.schema.SliceAggregate`;
- :mod:`.hashes`: upstream's hash definitions (prompt, request, source row/record, media set, public ids);
- :mod:`.reader`: :func:`~.reader.open_archive` -> ``find(model, seed, benchmark)``, ``iter_slice(key)``,
  ``aggregate(key)``, ``slices()`` (parts hash-verified before use);
- :mod:`.fetch`: release pins and verified downloads (``trace-repro fetch-runs``);
- :mod:`.rescore` / :mod:`.replay_judge` / :mod:`.identity` / :mod:`.validation`: the checks of the ``archive``
  reproduction lane (:mod:`.lane`).
"""
