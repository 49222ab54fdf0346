"""The benchmark contract, where benchmark modules import it from (defined in :mod:`trace_lib.protocol`, below the
data, generation and scoring layers that call it)."""

from __future__ import annotations

from trace_lib.protocol import DataRow, JudgeUse, PromptItem, Protocol, Row, RowScore, ScoringContext, SliceScore

__all__ = ["DataRow", "JudgeUse", "PromptItem", "Protocol", "Row", "RowScore", "ScoringContext", "SliceScore"]
