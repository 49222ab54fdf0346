"""TableVQABench: TRACE's single-``<answer>`` unwrap and ``Answer: `` cleanup, then the four pinned split scorers.

Mirrors ``VLMEvalKit@a8b12bf1:vlmeval/dataset/image_vqa.py:TableVQABench.build_prompt`` and
``vlmeval/dataset/utils/tablevqabench.py`` (prompts, ``evaluate_tabfact``, ``evaluate_wtq`` with the
WikiTableQuestions denotation values, ``evaluate_fintabnet``/``fintabnet_normalize``) as run by
``maveryn/trace@rlvr:rlvr/evaluation/scripts/run_external_benchmark_score_queue.py:_run_tablevqabench_local_score``
with ``trace_eval_answer_parsing.unwrap_single_answer_block``. No judge.

Quirks reproduced on purpose:
- only a leading, case-sensitive ``Answer: `` is removed, and only one non-empty ``<answer>`` block unwraps;
- vtabfact reads the truth value by substring (``untrue`` is true; both words -> wrong);
- vwtq: ``||`` -> ``|`` split, each piece a Number when ``int()``/``float()`` parses it raw (``2,004`` does not),
  a Date for ``yyyy-mm-dd``, else a normalized String; same-size sets with every gold value matched;
- fintabnet strips ``$ ( ) ,`` and unit words, maps thousand/million/billion/% to exponents; two accuracies;
- per split ``round((correct + 1e-9) / (n + 1e-9), 8) * 100``; the reported number is the unweighted mean of
  the *five* values ``[fin relieved, fin exact, vtabfact, vwtq, vwtq_syn]`` (FinTabNetQA counts twice);
- a ``vwtq`` piece reading as ``inf``/``nan`` makes upstream raise (AssertionError) and abort the slice.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from trace_lib.benchmarks._math_workbook import prediction_workbook, records
from trace_lib.linear_aggregate import Linear, RowAggregate, RowField, first_seed, numeric, one_of
from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, RowScore, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.errors import InputError

KEY = "tablevqabench"
#: Split evaluation order of ``_run_tablevqabench_local_score`` (fintabnetqa reports two values).
SPLITS = ("fintabnetqa", "vtabfact", "vwtq", "vwtq_syn")

VWTQ_PROMPT = (
    "You are asked to answer questions asked on an image.\n"
    "You should answer the question with a single word.\n"
    "Example: \n"
    "Question: what was the only year mr. wu competed in the olympic games?\n"
    "Answer: 2004\n"
    "Question: which township in pope county, arkansas has the least amount of water area?\n"
    "Answer: Freeman\n"
    "If you have multiple answers, please separate them with || marks. Example: Apple||Banana||Tomato\n\n"
    "Question: {question}\n"
    "Answer:"
)
VTABFACT_PROMPT = (
    "You are asked to answer whether the statement is True or False based on given image\n"
    "You should only answer True or False.\n"
    "Example: \n"
    "Statement: the milwaukee buck win 6 game in the 2010 - 11 season\n"
    "Answer: True\n"
    "Statement: only the top team score above the average of 8.8\n"
    "Answer: False\n\n"
    "Statement: {question}\n"
    "Answer:"
)
FINTABNETQA_PROMPT = (
    "You are asked to answer questions asked on a image.\n"
    "You should answer the question within a single word or few words.\n"
    "If units can be known, the answer should include units such as $, %, million and etc.\n"
    "Example: \n"
    "Question: What were the total financing originations for the fiscal year ended October 31, 2004?\n"
    "Answer: $3,852 million\n"
    "Question: What is the time period represented in the table?\n"
    "Answer: October 31\n"
    "Question: What was the percentage of net sales for selling, general and administrative expenses in 2006?\n"
    "Answer: 34.2%\n"
    "Question: {question}\n"
    "Answer:"
)
PROMPTS = {"fintabnetqa": FINTABNETQA_PROMPT, "vtabfact": VTABFACT_PROMPT, "vwtq": VWTQ_PROMPT, "vwtq_syn": VWTQ_PROMPT}


class ScorerCrash(InputError):
    """Upstream's split scorer raises on this row and the whole slice aborts."""


# -- data and prompt -----------------------------------------------------------------------------------------


def load(path: Path) -> list[Row]:
    """The ``tablevqa-bench.tsv`` rows (VLMEvalKit typing); columns used: question, answer, split."""
    return load_vlmeval_tsv(path)


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """``TableVQABench.build_prompt``: the image(s), then the split's template around the question."""
    images = [PromptItem("image", p) for p in materialize_images(row, image_dir)]
    template = PROMPTS.get(row["split"])
    text = row["question"] if template is None else template.format_map({"question": row["question"]})
    return [*images, PromptItem("text", str(text))]


# -- answer extraction --------------------------------------------------------------------------------------------
_ANSWER_BLOCK = re.compile(r"<answer>\s*(.*?)\s*</answer>", flags=re.I | re.S)


def unwrap_single_answer_block(value: Any) -> str:
    """The inner text of exactly one non-empty ``<answer>`` block; otherwise the text unchanged (NaN -> "")."""
    text = "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
    blocks = list(_ANSWER_BLOCK.finditer(text))
    if len(blocks) != 1:
        return text
    inner = blocks[0].group(1).strip()
    return inner if inner else text


def extract(value: Any) -> str:
    """The scored prediction: single-block unwrap, then removal of a leading ``Answer: ``."""
    text = unwrap_single_answer_block(value)
    return text[len("Answer: "):] if text.startswith("Answer: ") else text


# -- string normalization and denotation values (allennlp-semparse WTQ evaluator) ----------------------------------


def normalize(x: Any) -> str:
    """WTQ ``normalize``: strip diacritics, unify quotes/dashes, drop trailing citations/parentheses/outer quotes
    and a final period, collapse whitespace, lower-case.

    Raises:
        ScorerCrash: ``x`` is not text (upstream calls ``.decode`` on it).
    """
    if not isinstance(x, str):
        if isinstance(x, bytes):
            x = x.decode("utf8", errors="ignore")
        else:
            raise ScorerCrash(f"upstream's normalize() gets a {type(x).__name__} and raises AttributeError",
                              found=repr(x))
    x = "".join(c for c in unicodedata.normalize("NFKD", x) if unicodedata.category(c) != "Mn")
    x = re.sub(r"[‘’´`]", "'", x)
    x = re.sub(r"[“”]", '"', x)
    x = re.sub(r"[‐‑‒–—−]", "-", x)
    while True:
        old = x
        x = re.sub(r"((?<!^)\[[^\]]*\]|\[\d+\]|[•♦†‡*#+])*$", "", x.strip())
        x = re.sub(r"(?<!^)( \([^)]*\))*$", "", x.strip())
        x = re.sub(r'^"([^"]*)"$', r"\1", x.strip())
        if x == old:
            break
    if x and x[-1] == ".":
        x = x[:-1]
    return re.sub(r"\s+", " ", x, flags=re.U).lower().strip()


@dataclass(frozen=True, eq=False)
class Value:
    """A denotation value: ``kind`` 'S'tring, 'N'umber or 'D'ate, its normalized text and its key."""

    kind: str
    normalized: str
    key: Any  # number amount, (y, m, d), or the normalized string

    def __eq__(self, other: object) -> bool:  # set semantics of the upstream classes
        return isinstance(other, Value) and self.kind == other.kind and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def match(self, other: Value) -> bool:
        """Normalized texts equal, or two numbers within 1e-6, or two dates with the same (y, m, d)."""
        if self.normalized == other.normalized:
            return True
        if self.kind == "N" and other.kind == "N":
            return abs(self.key - other.key) < 1e-6
        if self.kind == "D" and other.kind == "D":
            return self.key == other.key
        return False


def _parse_number(text: str) -> int | float | None:
    try:
        return int(text)
    except ValueError:
        try:
            amount = float(text)
        except ValueError:
            return None
        if math.isnan(amount) or math.isinf(amount):
            raise ScorerCrash("a prediction piece reads as inf/nan; upstream's NumberValue.parse raises "
                              "AssertionError and the slice aborts", found=text)
        return amount


def _parse_date(text: str) -> tuple[int, int, int] | None:
    try:
        ymd = text.lower().split("-")
        if len(ymd) != 3:
            return None
        year = -1 if ymd[0] in ("xx", "xxxx") else int(ymd[0])
        month = -1 if ymd[1] == "xx" else int(ymd[1])
        day = -1 if ymd[2] == "xx" else int(ymd[2])
    except Exception:  # noqa: BLE001 - upstream: any failure means "not a date"
        return None
    if year == month == day == -1:
        return None
    if not (month == -1 or 1 <= month <= 12) or not (day == -1 or 1 <= day <= 31):
        return None
    return year, month, day


def _number(amount: int | float, original: str) -> Value:
    amount = int(amount) if abs(amount - round(amount)) < 1e-6 else float(amount)
    return Value("N", normalize(original) if original else str(amount), amount)


def to_value(original: str) -> Value:
    """``to_value``: a Number if ``int``/``float`` parse the raw text, a Date for ``yyyy-mm-dd`` (year-only ->
    Number), else a String."""
    amount = _parse_number(original)
    if amount is not None:
        return _number(amount, original)
    ymd = _parse_date(original)
    if ymd is not None:
        if ymd[1] == ymd[2] == -1:
            return _number(ymd[0], original)
        return Value("D", normalize(original) if original else f"{ymd[0]}-{ymd[1]}-{ymd[2]}", ymd)
    normalized = normalize(original)
    return Value("S", normalized, normalized)


def to_value_list(strings: list[str]) -> list[Value]:
    """The de-duplicated set of values of ``strings``."""
    return list({to_value(s) for s in strings})


def check_denotation(targets: list[Value], predicted: list[Value]) -> bool:
    """Same number of values, and every target matched by some prediction."""
    if len(targets) != len(predicted):
        return False
    return all(any(t.match(p) for p in predicted) for t in targets)


def tsv_unescape_list(x: str) -> list[str]:
    """Split on ``|`` and unescape ``\\n``, ``\\p`` and ``\\\\``."""
    return [y.replace(r"\n", "\n").replace(r"\p", "|").replace("\\\\", "\\") for y in x.split("|")]


# -- split scorers ------------------------------------------------------------------------------------------------


def tabfact_correct(prediction: Any, gold: Any) -> bool | None:
    """``evaluate_tabfact`` per row: True/False, or None when both words occur (counted wrong)."""
    pred = "none" if prediction is None else prediction
    pred = pred.lower()
    if "true" in pred and "false" in pred:
        return None
    if "true" in pred and gold == "1":
        return True
    if "false" in pred and gold == "0":
        return True
    return False


def wtq_correct(prediction: str, gold: Any) -> bool:
    """``evaluate_wtq`` per row: denotation match of the ``|``-separated values."""
    if not isinstance(gold, str):
        raise ScorerCrash(f"gold answer is {type(gold).__name__}; upstream's evaluate_wtq calls .split on it",
                          found=repr(gold))
    targets = to_value_list(tsv_unescape_list(gold))
    predicted = to_value_list(tsv_unescape_list(prediction.replace("||", "|")))
    return check_denotation(targets, predicted)


_UNIT_WORDS = re.compile(
    r"\b(dollar|gallons|square feet|shares|mbtu|mbpd|mbbls|mmbtu|unit|gwh|year|mmcf|mile|mboe)s?\b", re.IGNORECASE
)
_SCALES = (
    (r" \bthousand\b", "e3"), (r" \bmillion\b", "e6"), (r" \bbillion\b", "e9"),
    (r"\bthousand\b", "e3"), (r"\bmillion\b", "e6"), (r"\bbillion\b", "e9"), (r" ?%", "e-2"),
)


def fintabnet_normalize(value: Any) -> tuple[Any, list[Any]]:
    """``fintabnet_normalize``: the primary form and [primary, unit-free] forms (floats when they parse)."""
    s = normalize(value)
    s = re.sub(r"[\$\(\),]", "", s)
    s = _UNIT_WORDS.sub("", s)
    unit_free = s
    for pattern, replacement in _SCALES:
        s = re.sub(pattern, replacement, s)
        unit_free = re.sub(pattern, "", unit_free)
    try:
        return float(s), [float(s), float(unit_free)]
    except ValueError:
        return s, [s, unit_free]


def fintabnet_correct(prediction: str, gold: Any) -> tuple[bool, bool]:
    """``evaluate_fintabnet`` per row: (relieved, exact) correctness."""
    pred, preds = fintabnet_normalize(prediction)
    gt, gts = fintabnet_normalize(gold)
    return any(p == g for p in preds for g in gts), gt == pred


def split_accuracy(correct: int, total: int) -> float:
    """``round((correct + 1e-9) / (total + 1e-9), 8) * 100``."""
    return round((correct + 1e-9) / (total + 1e-9), 8) * 100


def aggregate(values: Sequence[float]) -> float:
    """The reported number: the plain mean of the five split values, summed in order."""
    return float(sum(values) / len(values))


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """``_run_tablevqabench_local_score``: the five-value macro mean, in percent.

    Raises:
        InputError: no rows or a missing split (upstream ``KeyError``); ScorerCrash where upstream's scorer raises.
    """
    if not rows:
        raise InputError("no rows to score", field=KEY)
    data = records(prediction_workbook(rows, responses))
    predictions = [extract(row["prediction"]) for row in data]
    by_split: dict[str, list[int]] = {}
    for pos, row in enumerate(data):
        by_split.setdefault(row.get("split"), []).append(pos)  # type: ignore[arg-type]
    missing = [s for s in SPLITS if s not in by_split]
    if missing:
        raise InputError("a split is missing; upstream's scorer raises KeyError", field="split",
                         expected=list(SPLITS), found=sorted(map(str, by_split)))
    extra = [s for s in by_split if s not in SPLITS]
    if extra:
        raise InputError("rows outside the four splits; upstream's scorer raises ('did not account for every row')",
                         field="split", expected=list(SPLITS), found=sorted(map(str, extra)))
    row_scores: dict[int, dict[str, Any]] = {}
    values: list[float] = []
    metrics: dict[str, float] = {}
    counts: dict[str, int] = {}
    for split in SPLITS:
        positions = by_split[split]
        relieved = exact = correct = 0
        for pos in positions:
            gold = data[pos]["answer"]
            try:
                if split == "fintabnetqa":
                    ok_relieved, ok_exact = fintabnet_correct(predictions[pos], gold)
                    relieved += ok_relieved
                    exact += ok_exact
                    row_scores[pos] = {"score": float(ok_relieved), "exact_score": int(ok_exact)}
                elif split == "vtabfact":
                    verdict = tabfact_correct(predictions[pos], gold)
                    correct += bool(verdict)
                    row_scores[pos] = {"score": float(bool(verdict)), "unparsed": verdict is None}
                else:
                    ok = wtq_correct(predictions[pos], gold)
                    correct += ok
                    row_scores[pos] = {"score": float(ok)}
            except ScorerCrash as exc:
                raise ScorerCrash(exc.message, field=f"rows[{data[pos]['index']}]", found=exc.found) from None
        if split == "fintabnetqa":
            split_values = [split_accuracy(relieved, len(positions)), split_accuracy(exact, len(positions))]
            metrics.update({"fintabnetqa_relieved": split_values[0], "fintabnetqa_exact": split_values[1]})
            counts.update({"fintabnetqa_relieved": relieved, "fintabnetqa_exact": exact})
        else:
            split_values = [split_accuracy(correct, len(positions))]
            metrics[split] = split_values[0]
            counts[split] = correct
        counts[f"{split}_rows"] = len(positions)
        values.extend(split_values)
    out = [
        RowScore(index=str(row["index"]), extracted=predictions[pos], score=row_scores[pos]["score"],
                 detail={"split": row.get("split"), **{k: v for k, v in row_scores[pos].items() if k != "score"}})
        for pos, row in enumerate(data)
    ]
    overall = aggregate(values)
    metrics["Overall"] = overall
    return SliceScore(benchmark=KEY, score=overall, rows=len(data), records=tuple(out), metrics=metrics,
                      counts=counts)


def linearize(credits: np.ndarray, extra: dict[str, np.ndarray]) -> Linear:
    """The five-value macro mean as a row-linear sum: ``w = 100 / (5 n_split)``, FinTabNetQA rows counting
    ``credit + exact_score`` (relieved and exact are two of the five values); rows need ``split`` and, on
    fintabnetqa, ``exact_score``."""
    split = first_seed(extra["split"]).astype(str)
    fintab = split == "fintabnetqa"
    values = credits + np.where(fintab[:, None], numeric(extra["exact_score"]), 0.0)
    present = [s for s in SPLITS if np.any(split == s)]
    weights = np.zeros(len(split))
    group = np.zeros(len(split), dtype=int)
    for number, name in enumerate(present):
        rows = split == name
        weights[rows] = 100.0 / (len(SPLITS) + 1) / rows.sum()  # five values: fintabnetqa counts twice
        group[rows] = number
    return Linear(0.0, weights, values, np.where(fintab, 2.0, 1.0), group)


ROW_AGGREGATE = RowAggregate(
    "split-macro-mean", (
        RowField("split", list(SPLITS), one_of(*SPLITS), per_row=True),  # score() refuses rows of other splits
        RowField("exact_score", [0, 1], one_of(0, 1), required=("split", "fintabnetqa")),  # int(ok_exact)
    ),
    "mean of five split accuracies (fintabnetqa relieved and exact, vtabfact, vwtq, vwtq_syn)", linearize)


PROTOCOL = Protocol(
    key=KEY,
    upstream="VLMEvalKit@a8b12bf1:vlmeval/dataset/utils/tablevqabench.py + maveryn/trace@rlvr:"
    "rlvr/evaluation/scripts/run_external_benchmark_score_queue.py:_run_tablevqabench_local_score",
    version="tablevqabench-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="none",
    quirks=(
        "only one non-empty <answer> block unwraps; only a leading case-sensitive 'Answer: ' is removed",
        "vtabfact by substring: 'untrue' is true; both words count wrong",
        "vwtq numbers parse only raw int()/float() text ('2,004' is a string); same-size value sets required",
        "fintabnet strips $ ( ) , and unit words and maps thousand/million/billion/% to exponents",
        "per split round((c+1e-9)/(n+1e-9), 8)*100; reported = mean of five values (FinTabNetQA twice)",
        "a vwtq piece reading as inf/nan aborts the slice (upstream AssertionError)",
    ),
    row_aggregate=ROW_AGGREGATE,
)
