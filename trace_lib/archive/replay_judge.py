"""A judge that answers from the archive's recorded judge outputs instead of a served Qwen3-32B.

What the schema allows: the archive keeps, per row, the judge's *final* output (``judge_output``, after any
retries) and ``used_judge``, but not the judge prompt. A benchmark's judge prompt is a pure function of the dataset
row and the response, so the replay is keyed by the exact prompt text trace-repro builds for that (row, response):

1. :func:`build_replay` scores each row whose archived extraction used the judge *on its own*, with a
   :class:`_RowJudge` that answers that row's prompts from its recorded calls and records the prompts asked. A row
   asking one distinct prompt with one recorded output, or as many distinct prompts as recorded calls (in order),
   maps ``(system, prompt) -> output``.
2. :class:`ReplayJudge` then serves the whole slice from that map.

Rows that cannot be replayed are counted, never guessed (:class:`ReplayStats`): ``multi_prompt`` (the row asks
a number of distinct prompts other than its recorded calls), ``conflict`` (two rows ask the same prompt with different
recorded outputs), and at scoring time ``missing`` (trace-repro asks a prompt no archived judge output answers,
e.g. its deterministic parser failed where upstream's succeeded). Any miss invalidates the replayed slice score.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from trace_lib.scoring.judge import VLMEVAL_FAIL_MSG, Judge, JudgeReply

Key = tuple[str | None, str]


def _reply(text: str) -> JudgeReply:
    # upstream stored VLMEvalKit's failure text when the judge never answered usefully: replay it as a failure
    return JudgeReply(text=text, finish_reason="stop", ok=text.strip() != VLMEVAL_FAIL_MSG.strip())


class _RowJudge(Judge):
    """Answers the k-th distinct prompt of one row with its k-th recorded call (the last one past the end) and
    records the prompts asked."""

    def __init__(self, calls: Sequence[str]) -> None:
        self.calls = tuple(calls)
        self.asked: list[Key] = []

    def _answer(self, keys: Sequence[Key]) -> list[JudgeReply]:
        replies = []
        for key in keys:
            self.asked.append(key)
            distinct = list(dict.fromkeys(self.asked))
            replies.append(_reply(self.calls[min(distinct.index(key), len(self.calls) - 1)]))
        return replies

    def chat(self, prompts: Sequence[str], *, max_tokens: int = 256, temperature: float = 0.0) -> list[JudgeReply]:
        return self._answer([(None, p) for p in prompts])

    def complete(self, prompts, *, max_tokens=256, temperature=0.0, top_p=1.0, system=None):  # type: ignore[override]
        return self._answer([(system, p) for p in prompts])


@dataclass
class ReplayStats:
    """How far the replay reached: rows with a recorded judge output, keyed, and those that could not be."""

    recorded: int = 0  # rows whose archived extraction used the judge
    keyed: int = 0  # of those, rows whose prompt is known exactly
    not_asked: int = 0  # recorded rows for which trace-repro asks no judge prompt (its parser resolved them)
    multi_prompt: list[str] = field(default_factory=list)  # source_index of rows asking several distinct prompts
    conflict: list[str] = field(default_factory=list)  # source_index of rows whose prompt maps to two outputs
    missing: list[str] = field(default_factory=list)  # prompts asked at scoring time with no recorded output (head)
    missing_count: int = 0  # distinct requests
    served: int = 0

    @property
    def complete(self) -> bool:
        """True when every judge request of the slice was answered from the archive."""
        return self.missing_count == 0 and not self.conflict

    def properties(self) -> list[tuple[str, str]]:
        return [("replay_recorded", str(self.recorded)), ("replay_keyed", str(self.keyed)),
                ("replay_not_asked", str(self.not_asked)), ("replay_multi_prompt", str(len(self.multi_prompt))),
                ("replay_conflict", str(len(self.conflict))), ("replay_missing", str(self.missing_count)),
                ("replay_served", str(self.served))]

    def explain(self) -> str:
        parts = [f"{self.missing_count} judge request(s) without a recorded output"] if self.missing_count else []
        if self.conflict:
            parts.append(f"{len(self.conflict)} row(s) with conflicting outputs for one prompt "
                         f"(first index {self.conflict[0]})")
        if self.multi_prompt:
            parts.append(f"{len(self.multi_prompt)} row(s) asking several prompts (first index {self.multi_prompt[0]})")
        return "; ".join(parts) or "complete"


class ReplayJudge(Judge):
    """Serves judge requests from ``outputs`` (``(system, prompt) -> text``); a request it cannot answer is
    counted in ``stats`` and answered with a failure reply marked ``ok=False`` (the slice score is then void)."""

    def __init__(self, outputs: dict[Key, str], stats: ReplayStats) -> None:
        self.outputs = outputs
        self.stats = stats
        self._missed: set[Key] = set()

    def _serve(self, keys: Sequence[Key]) -> list[JudgeReply]:
        replies = []
        for key in keys:
            text = self.outputs.get(key)
            if text is None:
                if key not in self._missed:  # a re-asked request (judge rounds, ladders) counts once
                    self._missed.add(key)
                    self.stats.missing_count += 1
                    if len(self.stats.missing) < 5:
                        self.stats.missing.append(key[1][:200])
                replies.append(JudgeReply(text="", finish_reason="replay-missing", ok=False))
            else:
                self.stats.served += 1
                replies.append(_reply(text))
        return replies

    def chat(self, prompts: Sequence[str], *, max_tokens: int = 256, temperature: float = 0.0) -> list[JudgeReply]:
        return self._serve([(None, p) for p in prompts])

    def complete(self, prompts, *, max_tokens=256, temperature=0.0, top_p=1.0, system=None):  # type: ignore[override]
        return self._serve([(system, p) for p in prompts])


def build_replay(
    rows: Sequence[Any], responses: Sequence[str], recorded: Sequence[tuple[str, str | None]],
    score_one: Callable[[Any, str, Judge], Any],
) -> ReplayJudge:
    """A :class:`ReplayJudge` for one slice.

    Args:
        rows, responses: the dataset rows and the archived responses, aligned.
        recorded: per row, ``(source_index, outputs)`` from the archive (:meth:`ArchiveRow.judge_outputs`; a
            single text or None is accepted too). A row asking as many distinct prompts as it recorded calls maps
            them in order (upstream lists a row's calls by cache file name, which for MathVerse's
            ``..._extract.jsonl`` / ``..._score.jsonl`` is the order they are asked); any other count is
            ``multi_prompt``.
        score_one: ``(row, response, judge) -> anything``: scores one row alone through the protocol.
    """
    stats = ReplayStats()
    outputs: dict[Key, str] = {}
    conflicted: set[Key] = set()
    for row, response, (index, recorded_outputs) in zip(rows, responses, recorded):
        calls = (recorded_outputs,) if isinstance(recorded_outputs, str) else tuple(recorded_outputs or ())
        if not calls:
            continue
        stats.recorded += 1
        probe = _RowJudge(calls)
        try:
            score_one(row, response, probe)
        except Exception:  # noqa: BLE001 - a row that cannot be scored alone is simply not keyed
            pass
        asked = list(dict.fromkeys(probe.asked))
        if not asked:
            stats.not_asked += 1
            continue
        if len(set(calls)) == 1 and len(asked) == 1:
            pairs = [(asked[0], calls[0])]
        elif len(asked) == len(calls):
            pairs = list(zip(asked, calls))  # one recorded call per distinct prompt, in asking order
        else:
            stats.multi_prompt.append(index)
            continue
        clash = [key for key, output in pairs if key in outputs and outputs[key] != output]
        if clash:
            conflicted.update(clash)
            stats.conflict.append(index)
            continue
        for key, output in pairs:
            outputs[key] = output
        stats.keyed += 1
    for key in conflicted:
        outputs.pop(key, None)
    return ReplayJudge(outputs, stats)
