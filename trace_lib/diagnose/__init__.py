"""``trace-repro diagnose``: which pipeline stage made two runs of a slice differ.

Sources are read into :class:`~trace_lib.diagnose.views.SliceView` (:mod:`.campaign_view` for a trace-repro
campaign, :mod:`.archive_view` for the paper's archive); :func:`~trace_lib.diagnose.attribution.diagnose_slice`
charges each row to the first stage that differs; :mod:`.report` writes JSON, Markdown and one PNG per model.
"""
