"""The EASI LLM grader (P5) and the EASI ``eval_mcq_score`` summary, shared by SpatialViz-CoT, ERQA and EmbSpatial.

Mirrors ``VLMEvalKit@a8b12bf1:vlmeval/dataset/utils/spatial_bench/``: ``llm_extract.py``
(``GENERIC_EXTRACT_JUDGE_PROMPT``, ``build_option_str``, ``call_llm_extract``, ``extract_ans_by_llm``),
``tools/utils.py`` (``build_choices``, ``extract_choices_from_question``) and ``cal_scores.py``
(``compute_score_llm``: ``hit = grade == 'A'``; ``eval_mcq_score``: ``overall`` in percent, then
``<prefix><group>_accuracy`` per group value, preferred order first).

Quirks reproduced on purpose: every row goes to the judge (no rule prefetch); the choice list comes from
``options``/``candidates``, else columns A-F (an existing empty column is an empty option), else options parsed
out of the question *after the first "option(s)" word* (which may sit in an instruction sentence); a reply's first
line must start with a capital A/B/C followed by a word boundary; three unusable replies -> grade C (wrong).
Deviation: upstream's LLM-judge health probe silently falls back to the rule matcher; here a judge whose whole
first round fails at the transport level raises :class:`~trace_lib.errors.JudgeError`.
"""

from __future__ import annotations

import ast
import math
import re
import string
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from trace_lib.benchmarks.protocol import Row, RowScore, ScoringContext, SliceScore
from trace_lib.errors import JudgeError
from trace_lib.extraction.choices import API_FAIL_MARKER
from trace_lib.extraction.workbook import isna, official_workbook
from trace_lib.scoring.judge import Judge
from trace_lib.scoring.mcq_judge import chat_rounds
from trace_lib.scoring.percent import flatten_summary_metrics

#: ``cal_scores._build_score_fn``: ``max_retry = judge_kwargs.get('retry', 3)``.
JUDGE_ROUNDS = 3

GENERIC_EXTRACT_JUDGE_PROMPT = (
    "You are an expert grading assistant.\n"
    "Your job has TWO tasks:\n"
    "1) From the candidate's full response, EXTRACT the final answer in a concise, normalized form.\n"
    "2) Compare this extracted answer with the STANDARD ANSWER and grade it as:\n"
    "   - A: CORRECT\n"
    "   - B: INCORRECT\n"
    "   - C: INVALID\n"
    "\n"
    "Here are the detailed evaluation criteria:\n"
    "1. ALWAYS refer to the given STANDARD ANSWER. You do NOT need to re-solve the question; the standard answer has "
    "already been provided and is always correct. Your only job is to judge whether the candidate's final answer is "
    "consistent with the standard answer according to the form of the question. THE STANDARD ANSWER IS ALWAYS CORRECT "
    "AND THE QUESTION IS PERFECTLY VALID. NEVER QUESTION THEM.\n"
    "2. ONLY compare the FINAL ANSWER — COMPLETELY IGNORE any potential errors or issues in the REASONING PROCESS. "
    "Even if the reasoning is wrong, as long as the final answer matches the standard answer, grade it as CORRECT.\n"
    "3. Answers may be expressed in different ways (e.g., mathematical expressions, textual descriptions). As long as "
    "the meaning is the same as the standard answer, treat them as equivalent. If the standard answer does not specify "
    "a unit but the candidate's answer includes a correct unit for the given value, consider it CORRECT.\n"
    "4. Some answers may consist of multiple items, such as multiple-choice questions with multiple correct options, "
    "multi-select questions, or multi-blank fill-in-the-blank questions. Regardless of the question type, the final "
    "answer is considered CORRECT only if it matches the standard answer exactly at the level of all required items. "
    "For multi-select or multi-blank questions, ALL parts must be answered correctly and match the standard answer "
    "exactly to be deemed CORRECT.\n"
    "5. If the candidate's answer is wrapped in LaTeX-style markers like \\boxed{{...}}, IGNORE the \\boxed and only "
    "use the inner content as the candidate's final answer when comparing with the standard answer.\n"
    "6. If the candidate's answer is INVALID — for example, incomplete (cut off mid-response), containing a large "
    "amount of abnormal repetitive content, clearly irrelevant to the question, or explicitly refusing to answer due "
    "to ethical concerns, lack of information, or other external factors — then you MUST grade it as C: INVALID.\n"
    "7. This instruction applies to all problem types, including single-choice MCQ, multi-select MCQ, numeric "
    "problems, short-answer questions, and general VQA-style questions. In all cases, only the FINAL ANSWER and its "
    "consistency with the standard answer matter.\n"
    "8. The question or options may contain image placeholders such as '<image>', '<image id=1>', or similar tokens. "
    "You CANNOT see these images. Treat these placeholders as unknown content and DO NOT hallucinate or infer any "
    "specific visual details from them. If the standard answer or candidate's answer refers to an option associated "
    "with an image (e.g., 'choose A'), judge correctness only based on the stated answer, not by imagining the image.\n"
    "\n"
    "IMPORTANT – OUTPUT FORMAT:\n"
    "• You MUST return EXACTLY ONE line in the following format:\n"
    "  <GRADE>\\t<EXTRACTED_ANSWER>\n"
    "  where <GRADE> is one of A, B, or C.\n"
    "• <EXTRACTED_ANSWER> should be the final answer you extracted from the candidate's response, in a normalized, "
    "concise form (e.g., a number, a letter option, or a short phrase).\n"
    "• If you cannot extract any meaningful answer, or the response is INVALID, output:\n"
    "  C\\tN/A\n"
    "• Do NOT add any extra text, explanation, or additional lines.\n"
    "\n"
    "Now, judge the following question.\n"
    "<Original Question Begin>\n"
    "{question}\n"
    "{options_block}"
    "<Original Question End>\n"
    "<Standard Answer Begin>\n"
    "{gold_answer}\n"
    "<Standard Answer End>\n"
    "<Candidate's Answer Begin>\n"
    "{llm_response}\n"
    "<Candidate's Answer End>\n"
    "Your output:"
)


# -- tools/utils.build_choices -------------------------------------------------------------------------------------
def _clean_text(value: Any) -> str:
    return re.sub(r"\s+", " ", str(value)).strip()


def _nonempty(value: Any) -> bool:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    if isinstance(value, (list, tuple, set, dict)):
        return len(value) > 0
    return str(value).strip() != ""


_ONLY_PUNCT_WS = re.compile(r"^[\s\.\,\;\:\!\?\-\_/\\\|\(\)\[\]\{\}【】（）·・、—]+$")


def _normalize_choice_body(raw: Any) -> str:
    if raw is None or (isinstance(raw, float) and math.isnan(raw)):
        return ""
    text = _clean_text(raw)
    if not text or _ONLY_PUNCT_WS.fullmatch(text):
        return ""
    return text


def _letters_upto(max_letter: str = "F", n: int | None = None) -> list[str]:
    letters = list(string.ascii_uppercase)
    if n is not None and isinstance(n, int) and n > 0:
        return letters[: min(n, 26)]
    return letters[: letters.index(max_letter.upper()) + 1]


def _contiguous_prefix_len(keys: Sequence[str]) -> int:
    present = {k.upper() for k in keys}
    count = 0
    for ch in string.ascii_uppercase:
        if ch not in present:
            break
        count += 1
    return count


def _slice_by_markers(text: str, markers: list[tuple[str, int, int]]) -> dict[str, str]:
    out: dict[str, str] = {}
    markers = sorted(markers, key=lambda m: m[2])
    for i, (ch, end_label, _start) in enumerate(markers):
        next_start = markers[i + 1][2] if i + 1 < len(markers) else len(text)
        out[ch] = _normalize_choice_body(text[end_label:next_start])
    return out


def extract_choices_from_question(question: Any, max_letter: str = "F") -> dict[str, str]:
    """Options parsed from question text, after the first ``option(s)``/``选项`` word (line or inline labels)."""
    if not isinstance(question, str) or not question.strip():
        return {}
    text = question
    cut = re.search(r"(?i)(options?|选项)\s*[:：]?", text)
    if cut:
        text = text[cut.end():]  # quirk: also cuts at "option" inside an instruction sentence
    letters = "".join(_letters_upto(max_letter))
    line_label = re.compile(
        rf"(?mi)^[ \t]*(?:[*_`>•·\-]+\s*)?(?:[\(\[\{{（【]\s*)?([{letters}])(?:\s*[\)\]\}}）】])?\s*[\.．:：\)\]】、-]\s*"
    )
    from_lines: dict[str, str] = {}
    for m in line_label.finditer(text):
        line_end = text.find("\n", m.end())
        from_lines[m.group(1).upper()] = _normalize_choice_body(text[m.end(): len(text) if line_end == -1
                                                                     else line_end])
    inline_label = re.compile(rf"(?<![A-Za-z0-9])([{letters}])\s*[\.．:：\)\]】、-]\s*(?![A-Za-z0-9])")
    markers = [(m.group(1).upper(), m.end(), m.start()) for m in inline_label.finditer(text)]
    from_inline = _slice_by_markers(text, markers) if markers else {}
    lines_k, inline_k = _contiguous_prefix_len(list(from_lines)), _contiguous_prefix_len(list(from_inline))
    if lines_k > inline_k:
        return from_lines
    if inline_k > lines_k:
        return from_inline
    if len(from_lines) > len(from_inline):
        return from_lines
    if len(from_inline) > len(from_lines):
        return from_inline
    return from_lines or from_inline


def _parse_candidates(value: Any, max_letter: str = "F") -> list[str] | None:
    if isinstance(value, list):
        return [_clean_text(x) for x in value]
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            parsed = ast.literal_eval(text)
            if isinstance(parsed, list):
                return [_clean_text(x) for x in parsed]
        except Exception:  # noqa: BLE001 - upstream falls back to the inline parse on any literal_eval failure
            pass
        mapping = extract_choices_from_question(text, max_letter=max_letter)
        if mapping:
            out = []
            for ch in string.ascii_uppercase:
                if ch in mapping:
                    out.append(_clean_text(mapping[ch]))
                elif ch != "A":
                    break
            return out or None
    return None


def build_choices(item: Mapping[str, Any], max_letter: str = "F") -> dict[str, str]:
    """``tools/utils.build_choices``: ``options``/``candidates``, else columns A-F, else the question text."""
    for key in ("options", "candidates"):
        if key in item:
            parsed = _parse_candidates(item[key])
            if parsed:
                return {ch: (parsed[i] if i < len(parsed) else "")
                        for i, ch in enumerate(_letters_upto(n=len(parsed)))}
    from_columns = {
        ch: (_normalize_choice_body(item[ch]) if _nonempty(item[ch]) else "")
        for ch in _letters_upto(max_letter=max_letter) if ch in item
    }
    if from_columns:
        return from_columns
    question = item.get("question")
    if isinstance(question, str):
        return extract_choices_from_question(question, max_letter=max_letter)
    return {}


# -- llm_extract ---------------------------------------------------------------------------------------------------
def build_grader_prompt(item: Mapping[str, Any]) -> str:
    """The grader prompt of ``extract_ans_by_llm`` (mode ``mcq``) for one evaluation-table row."""
    question = str(item.get("question", ""))
    prediction = str(item.get("prediction", ""))
    gold_raw = item.get("answer", "")
    choices = build_choices(item)
    option_str = "".join(f"{c}. {content}\n" for c, content in choices.items() if not isna(content)) \
        if choices else ""
    options_block = "Options:\n" + option_str + "\n" if option_str else ""
    letter = str(gold_raw).strip().upper()
    gold_answer = f"{letter}. {choices[letter]}" if choices and letter in choices else str(gold_raw)
    return GENERIC_EXTRACT_JUDGE_PROMPT.format(question=question, gold_answer=gold_answer, llm_response=prediction,
                                               options_block=options_block)


def parse_grader_reply(reply: str) -> tuple[str, str] | None:
    """``call_llm_extract``'s parse of one stripped reply: ``(grade, extracted)`` or None (round wasted)."""
    lines = reply.splitlines()
    if not lines:
        return None  # upstream indexes [0] of an empty reply and crashes; the real transport never returns one
    line = lines[0].strip()
    head = re.match(r"^\s*([ABC])\b(.*)$", line)
    if head:
        rest = re.sub(r"^[\s\|,:]+", "", head.group(2))
        rest = re.sub(r"^(?:\\[tnr])+", "", rest)
        return head.group(1), rest.strip() or "N/A"
    whole = re.match(r"^\s*([ABC])\s*$", reply)
    if whole:
        return whole.group(1), "N/A"
    return None


@dataclass(frozen=True)
class Grade:
    """One row's grader outcome: grade A/B/C, extracted answer, judge calls and replies."""

    grade: str
    extracted: str
    judge_calls: int
    replies: tuple[str, ...]
    exhausted: bool  # no parsable reply in three rounds -> grade C


def grade_rows(items: Sequence[Mapping[str, Any]], judge: Judge | None, *, benchmark: str) -> list[Grade]:
    """Every row graded by the judge: up to three rounds each (``call_llm_extract``), unusable -> ``C``.

    Raises:
        JudgeError: no judge is configured, or every request of the first round failed.
    """
    if not items:
        return []
    if judge is None:
        raise JudgeError(f"{benchmark}: every row is graded by the Qwen3-32B judge and none is configured",
                         field="--judge-url", hint="start the judge and pass --judge-url")
    prompts = [build_grader_prompt(item) for item in items]

    def accept(pos: int, text: str) -> tuple[str, str] | None:
        text = text.strip()
        return None if API_FAIL_MARKER in text else parse_grader_reply(text)

    done, raw = chat_rounds(judge, prompts, range(len(items)), accept, benchmark=benchmark, rounds=JUDGE_ROUNDS)
    replies = {pos: [text.strip() for text in texts] for pos, texts in raw.items()}
    return [
        Grade(*done[pos], len(replies[pos]), tuple(replies[pos]), False) if pos in done
        else Grade("C", "N/A", len(replies[pos]), tuple(replies[pos]), True)
        for pos in range(len(items))
    ]


def graded_slice(
    rows: Sequence[Row],
    responses: Sequence[str | None],
    ctx: ScoringContext,
    *,
    benchmark: str,
    columns: Sequence[str],
    summarize: Callable[[list[int], dict[str, list[Any]]], dict[str, Any]],
    aggregate: Callable[[list[int]], float],
) -> SliceScore:
    """Every row of the official workbook (``columns``; ``str()`` of each prediction) graded, hit = grade A;
    metrics from ``summarize(hits, table)``, the reported number from ``aggregate(hits)``."""
    table = official_workbook(rows, responses, columns)
    table["prediction"] = [str(v) for v in table["prediction"]]
    items = [{name: values[pos] for name, values in table.items()} for pos in range(len(rows))]
    grades = grade_rows(items, ctx.judge, benchmark=benchmark)
    hits = [1 if g.grade == "A" else 0 for g in grades]
    records = tuple(
        RowScore(index=str(table["index"][pos]), extracted=None if g.extracted == "N/A" else g.extracted,
                 score=float(hit), judge_calls=g.judge_calls,
                 detail={"grade": g.grade, "judge_replies": list(g.replies), "exhausted": g.exhausted})
        for pos, (g, hit) in enumerate(zip(grades, hits))
    )
    metrics = {k: float(v) for k, v in flatten_summary_metrics(summarize(hits, table)).items()}
    counts = {"rows": len(hits), "correct": sum(hits), "judge_rows": len(hits),
              "grade_b": sum(g.grade == "B" for g in grades), "grade_c": sum(g.grade == "C" for g in grades),
              "unparsable_after_retries": sum(g.exhausted for g in grades)}
    return SliceScore(benchmark=benchmark, score=aggregate(hits), rows=len(hits), records=records, metrics=metrics,
                      counts=counts)


# -- cal_scores.eval_mcq_score -------------------------------------------------------------------------------------
def mcq_summary(
    hits: Sequence[float],
    groups: Mapping[str, Sequence[Any]],
    order: Mapping[str, Sequence[str]],
) -> dict[str, Any]:
    """``eval_mcq_score``'s summary: ``overall`` (percent), per-group ``_accuracy``, then the tabulated strings.

    ``groups`` maps each group column present in the table to its values (one column: no ``<col>.`` prefix).
    """
    summary: dict[str, Any] = {"overall": (math.fsum(hits) / len(hits) if hits else 0.0) * 100.0}
    multi = len(order) > 1
    for column in order:
        if column not in groups:
            continue
        values = groups[column]
        preferred = list(order[column])
        present = list(dict.fromkeys(v for v in values if not isna(v)))
        prefix = f"{column}." if multi else ""
        for cat in preferred + [c for c in present if c not in preferred]:
            sub = [h for h, v in zip(hits, values) if v == cat]
            if sub:
                summary[f"{prefix}{cat}_accuracy"] = (math.fsum(sub) / len(sub)) * 100.0
    summary["tabulated_keys"] = ", ".join(summary.keys())
    summary["tabulated_results"] = ", ".join(f"{v:.3f}" for k, v in summary.items() if k != "tabulated_keys")
    return summary
