"""Scoring throughput per benchmark on one core: full-size synthetic slices through each protocol's ``score``.

``SPEED_CASES`` maps a suite key to a function ``build(rows: int) -> SpeedCase`` that makes a synthetic slice of
that many rows (row count from ``suite.v1.json``) with plausible responses; judge routes are answered by a local
in-process stub (``CallableJudge``), so the figure is trace-repro's own cost, not the judge's. The baseline is
the cheapest possible scorer on the same responses (last capital letter == answer), so the ratio shows what
upstream's exact rules (workbook round trip, matchers, aggregation) cost.

    python benchmarks/score_speed.py [--benchmark KEY ...] [--trace-root DIR]

Shared by the benchmark helpers: add one builder per benchmark to ``SPEED_CASES``.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trace_lib.benchmarks.protocol import ScoringContext  # noqa: E402
from trace_lib.benchmarks.registry import get_protocol  # noqa: E402
from trace_lib.scoring.judge import CallableJudge, Judge  # noqa: E402


@dataclass
class SpeedCase:
    """A synthetic slice: dataset rows as ``protocol.load`` returns them, responses, and the judge to use."""

    rows: list[dict[str, Any]]
    responses: list[str]
    judge: Judge | None = None


_REASONING = [
    "Let me look at the image carefully. ", "The object on the left is closer to the camera. ",
    "Comparing the options, ", "<think>The lamp is nearer than the chair.</think>", "Step 1: identify the objects. ",
    "Considering the perspective and the relative sizes, ",
]
_ENDINGS = ["The answer is {L}.", "Answer: {L}", "<answer>{L}</answer>", "{L}", "({L})", "\\boxed{{{L}}}",
            "Final answer: {L}) {T}", "I think it is {T}.", "**{L}**", "{L}. {T}"]


def _responses(rng: random.Random, rows: list[dict[str, Any]], letters: str = "ABCD") -> list[str]:
    out = []
    for _ in rows:
        letter = rng.choice(letters)
        body = "".join(rng.choice(_REASONING) for _ in range(rng.randint(0, 6)))
        out.append(body + rng.choice(_ENDINGS).format(L=letter, T=f"option {letter.lower()}"))
    return out


def _mcq_judge() -> Judge:
    return CallableJudge(lambda prompt, transport, settings: "B")


def _grader_judge() -> Judge:
    return CallableJudge(lambda prompt, transport, settings: "A\tB" if len(prompt) % 2 else "B\tC")


def _base_rows(n: int, rng: random.Random, **extra: Any) -> list[dict[str, Any]]:
    return [{"index": i, "image": "iVBORw0KGgo" + "A" * 80, "question": f"Question {i}: which object is closer?",
             "answer": rng.choice("ABCD"), **extra} for i in range(n)]


def _phyx(n: int) -> SpeedCase:
    rng = random.Random(0)
    rows = _base_rows(n, rng, category="Mechanics")
    return SpeedCase(rows, _responses(rng, rows))


def _imagemcq(n: int, judge: bool) -> SpeedCase:
    rng = random.Random(1)
    rows = _base_rows(n, rng, A="lamp", B="chair", C="table", D="door", category="cp", **{"l2-category": "x"})
    return SpeedCase(rows, _responses(rng, rows), _mcq_judge() if judge else None)


def _mmmu(n: int) -> SpeedCase:
    rng = random.Random(2)
    rows = _base_rows(n, rng, **{letter: f"option text {letter}" for letter in "ABCDEFGHIJ"})
    for row in rows:
        row["question"] = "placeholder"
    responses = [r + f"\nAnswer: {rng.choice('ABCDEFGHIJ')}" if rng.random() < 0.8 else r + " x"
                 for r in _responses(rng, rows)]
    return SpeedCase(rows, responses, _mcq_judge())


def _cvbench(n: int) -> SpeedCase:
    rng = random.Random(3)
    rows = _base_rows(n, rng, A="lamp", B="chair", split="3D", prompt="Which is closer? (A) lamp (B) chair")
    for row in rows:
        row["answer"] = rng.choice("AB")
    return SpeedCase(rows, _responses(rng, rows, "AB"), _mcq_judge())


def _embspatial(n: int) -> SpeedCase:
    rng = random.Random(4)
    rows = _base_rows(n, rng, options='["lamp", "chair", "table", "door"]', data_source="mp3d")
    return SpeedCase(rows, _responses(rng, rows))


def _spatialviz(n: int) -> SpeedCase:
    rng = random.Random(5)
    rows = _base_rows(n, rng, A="red", B="blue", C="green", D="yellow", category="MentalRotation", task="2DRotation")
    return SpeedCase(rows, _responses(rng, rows), _grader_judge())


def _erqa(n: int) -> SpeedCase:
    rng = random.Random(6)
    rows = _base_rows(n, rng, visual_indices="[0]", question_type="Pointing")
    for row in rows:
        row["question"] += " Choices: A. chair B. table C. lamp D. door. Please answer with the letter."
    return SpeedCase(rows, _responses(rng, rows), _grader_judge())



# -- Charts & Tables, Visual Math (helper C) -------------------------------------------------------------------
_COT = ["Let me read the chart. ", "The bar for 2019 is the tallest. ", "Step 1: compute the difference. ",
        "So the total is 12 + 30 = 42. ", "Looking at the axis labels, "]


def _cot(rng: random.Random, answer: str, endings: list[str]) -> str:
    body = "".join(rng.choice(_COT) for _ in range(rng.randint(1, 8)))
    return body + rng.choice(endings).format(A=answer)


def _chartqapro(n: int) -> SpeedCase:
    rng = random.Random(11)
    types = ["Factoid", "Multi Choice", "Conversational", "Fact Checking", "Hypothetical"]
    golds = ["42", "b", "2019", "United States", "true", "45%", "['A', 'B']"]
    rows = _base_rows(n, rng, paragraph=float("nan"))
    for row in rows:
        gold = rng.choice(golds)
        row.update(question="['What is the value?']", answer=repr([gold]), question_type=rng.choice(types),
                   year=rng.choice(["['NO']", "['YES']"]))
    ends = ["The answer is {A}.", "The answer is **{A}**", "<answer>{A}</answer>", "The final answer is {A}",
            "The answer is: {A}\nDone.", "{A}"]
    responses = [_cot(rng, rng.choice(golds), ends) for _ in rows]
    return SpeedCase(rows, responses)


def _charxiv(n: int) -> SpeedCase:
    rng = random.Random(12)
    rows = _base_rows(n, rng, inst_category=1)
    for row in rows:
        row.update(inst_category=rng.randint(1, 4), grading_query="Grade this.\n* Response: {PREDICTION}\n")
    judge = CallableJudge(lambda p, t, s: '{"extracted_answer": "5", "score": %d}' % (len(p) % 2))
    return SpeedCase(rows, [_cot(rng, "5", ["The answer is {A}."]) for _ in rows], judge)


def _tablevqa(n: int) -> SpeedCase:
    rng = random.Random(13)
    splits = ["vwtq"] * 3 + ["vwtq_syn", "vtabfact", "fintabnetqa"]
    golds = {"vwtq": ["2004", "Freeman", "Apple|Banana"], "vwtq_syn": ["12", "Tokyo"], "vtabfact": ["1", "0"],
             "fintabnetqa": ["$3,852 million", "34.2%", "1,024"]}
    rows = _base_rows(n, rng)
    for i, row in enumerate(rows):
        split = ["fintabnetqa", "vtabfact", "vwtq", "vwtq_syn"][i] if i < 4 else rng.choice(splits)
        row.update(split=split, answer=rng.choice(golds[split]))
    ends = ["Answer: {A}", "<answer>{A}</answer>", "{A}", "The answer is {A}."]
    return SpeedCase(rows, [rng.choice([_cot(rng, str(r["answer"]), ends), str(r["answer"])]) for r in rows])


def _evochart(n: int) -> SpeedCase:
    rng = random.Random(14)
    rows = [{"index": i, "question": f"What is the value of bar {i}?", "answer": rng.choice(["42", "1,234", "Yes", "12.5"]),
             "image_path": f"/nonexistent/{i}.png", "attribute": "value", "is_clear": rng.random() < 0.5,
             "chart_type": "bar"} for i in range(n)]
    ends = ["\\boxed{{{A}}}", "The answer is {A}", "<answer>{A}</answer>", "So the final answer is {A}."]
    return SpeedCase(rows, [_cot(rng, rng.choice(["42", "1,234", "Yes", "12.6"]), ends) for _ in rows])


def _math_rows(n: int, rng: random.Random, mathvista: bool) -> list[dict[str, Any]]:
    rows = _base_rows(n, rng)
    for row in rows:
        if rng.random() < 0.5:
            row.update(choices="['3/11', '8/11', '6/11', '3/5']", answer="8/11", answer_option="B",
                       question_type="multi_choice", answer_type="text")
            if not mathvista:
                row.update(choices="['3', '4', '5', '6', '7']", answer=rng.choice("ABCDE"))
        else:
            row.update(choices="[]", answer=rng.choice(["14", "0.6", "\\frac{1}{2}", "2\\sqrt{3}"]),
                       answer_option=float("nan"), question_type="free_form",
                       answer_type=rng.choice(["integer", "float", "text"]))
        row.update(task="figure question answering", skills="['arithmetic reasoning']", category="algebra")
    return rows


def _mathvista(n: int) -> SpeedCase:
    rng = random.Random(15)
    rows = _math_rows(n, rng, True)
    judge = CallableJudge(lambda p, t, s: ["14", "B", "0.6", "8/11"][len(p) % 4])
    ends = ["The answer is {A}.", "{A}", "Therefore (B) 8/11.", "Final answer: {A}"]
    return SpeedCase(rows, [_cot(rng, rng.choice(["14", "B", "0.6"]), ends) for _ in rows], judge)


def _mathvision(n: int) -> SpeedCase:
    rng = random.Random(16)
    rows = _math_rows(n, rng, False)
    judge = CallableJudge(lambda p, t, s: ["14", "D", "\\frac{1}{2}", "2 \\sqrt{3}", "0.5"][len(p) % 5])
    ends = ["The answer is {A}.", "{A}", "So the answer is D", "Final answer: {A}"]
    return SpeedCase(rows, [_cot(rng, rng.choice(["14", "D", "1/2"]), ends) for _ in rows], judge)


def _mathverse(n: int) -> SpeedCase:
    rng = random.Random(17)
    rows = _base_rows(n, rng)
    for row in rows:
        row.update(query_cot=row["question"], question_for_eval=row["question"], answer=rng.choice(["C", "22.3", "5"]),
                   metadata="{'subject': 'plane geometry', 'subfield': 'length'}", problem_version="Vision Only")
    judge = CallableJudge(lambda p, t, s: (["Judgement: 1", "0", "**Judgement**: **1**"][len(p) % 3]
                                           if p.endswith("Judgement:") else ["C", "22.3", "null"][len(p) % 3]))
    return SpeedCase(rows, [_cot(rng, rng.choice(["C", "22.3"]), ["The answer is {A}."]) for _ in rows], judge)


def _wemath(n: int) -> SpeedCase:
    rng = random.Random(18)
    rows, index, group = [], 0, 0
    while index < n:
        steps = 2 if group % 2 else 3
        for key in [f"{steps}steps_{i}" for i in range(1, steps + 1)] + [f"{steps}steps_multi"]:
            if index < n:
                rows.append({"index": index, "image": "iVBORw0KGgo" + "A" * 80, "question": "What is the angle?",
                             "A": "90°", "B": "60°", "C": "45°", "D": "30°", "E": "No correct answer",
                             "answer": rng.choice("ABCDE"), "ID": f"g{group}", "key": key,
                             "knowledge concept": "Angles", "requirement": "Answer with <Answer>: <<option>>",
                             "hint": float("nan")})
                index += 1
        group += 1
    ends = ["<Thought process>: half of 120. <Answer>: {A}", "<Answer>: <{A}>", "The answer is {A}.", "60°"]
    return SpeedCase(rows, [_cot(rng, rng.choice("ABCDE"), ends) for _ in rows],
                     CallableJudge(lambda p, t, s: "B"))



# -- Perception & Counting, Puzzles & Logic (helper E) -----------------------------------------------------------
def _blink(n: int) -> SpeedCase:
    rng = random.Random(21)
    rows = _base_rows(n, rng, A="Point A", B="Point B", category="Relative_Depth")
    for row in rows:
        row["answer"] = rng.choice("AB")
        if rng.random() < 0.3:
            row.update(C="Point C", D="Point D")
    return SpeedCase(rows, _responses(rng, rows, "AB"), _mcq_judge())


def _counts(rng: random.Random, gold: int) -> str:
    guess = gold + rng.choice([0, 0, 1, -1, 10])
    return rng.choice([str(guess), f"There are {guess} objects.", f"I count {guess}.\n\\boxed{{{guess}}}",
                       f"Answer: {guess}", "three", f"<answer>{guess}</answer>", f"{gold}, {guess} or more"])


def _countbenchqa(n: int) -> SpeedCase:
    rng = random.Random(22)
    rows = _base_rows(n, rng)
    for row in rows:
        row["answer"] = rng.randint(1, 10)
    return SpeedCase(rows, [_counts(rng, r["answer"]) for r in rows])


def _countqa(n: int) -> SpeedCase:
    rng = random.Random(23)
    rows = [{"index": f"{i // 2}_{i % 2}", "question": "How many cups are there?", "answer": str(rng.randint(0, 40)),
             "image_path": f"/nonexistent/{i // 2}.jpg"} for i in range(n)]
    return SpeedCase(rows, [_counts(rng, int(r["answer"])) for r in rows])


def _treebench(n: int) -> SpeedCase:
    rng = random.Random(24)
    categories = [f"Perception/{s}" for s in ("Attributes", "Material", "Physical State", "Object Retrieval", "OCR")]
    categories += [f"Reasoning/{s}" for s in ("Perspective Transform", "Ordering", "Contact and Occlusion",
                                             "Spatial Containment", "Comparison")]
    rows = _base_rows(n, rng, A="red", B="blue", C="green", D="white", target_instances="[[10,10,50,50]]")
    for row in rows:
        row["category"] = rng.choice(categories)
    responses = [rng.choice(["<think><box>[12,10,48,52]</box></think><answer>\\boxed{{{L}}}</answer>",
                             "<answer>{L}</answer>", "The answer is {L}.", "{L}"]).format(L=rng.choice("ABCD"))
                 for _ in rows]
    return SpeedCase(rows, responses)


def _puzzle_responses(rng: random.Random, rows: list[dict[str, Any]]) -> list[str]:
    ends = ["Answer: {L}", "<answer>\\boxed{{{L}}}</answer>", "Answer: ({L})", "The answer is {L}.", "\\boxed{{{L}}}"]
    return ["".join(rng.choice(_REASONING) for _ in range(rng.randint(1, 6))) + rng.choice(ends).format(
        L=rng.choice("ABCD")) for _ in rows]


def _puzzlevqa(n: int) -> SpeedCase:
    rng = random.Random(25)
    rows = _base_rows(n, rng, options="['3', '4', '5', '6']")
    for row in rows:
        row.update(answer=rng.choice("3456"), category=rng.choice(["venn", "triangle", "size_cycle"]))
    return SpeedCase(rows, _puzzle_responses(rng, rows))


def _visualpuzzles(n: int) -> SpeedCase:
    rng = random.Random(26)
    rows = _base_rows(n, rng, category="spatial", difficulty="easy")
    for row in rows:
        row["options"] = rng.choice([float("nan"), "['a cube', 'a cone', 'a ball', 'a ring']"])
    return SpeedCase(rows, _puzzle_responses(rng, rows))


def _logicvista(n: int) -> SpeedCase:
    rng = random.Random(27)
    rows = _base_rows(n, rng, skill="inductive, spatial")
    for row in rows:
        row["answer"] = rng.choice(["A", "B", "A, C", "2"])
    return SpeedCase(rows, _responses(rng, rows), CallableJudge(lambda p, t, s: "ABCD"[len(p) % 4]))


def _mme_judge(prompt: str, transport: str, settings: dict[str, Any]) -> str:
    if "[Judgement]:" in prompt:
        return "01"[len(prompt) % 2]
    if "json" in prompt:
        return '{"A": 1, "B": 4, "C": 6, "D": 5, "E": 2, "F": 3}'
    return "[A, C]" if len(prompt) % 3 == 0 else "B"


def _mme_reasoning(n: int) -> SpeedCase:
    rng = random.Random(28)
    rows = _base_rows(n, rng, capability="calculation", reasoning_type="deductive")
    for row in rows:
        kind = rng.random()
        if kind < 0.6:
            row.update(question_type="choice", answer=rng.choice(["B", "['A', 'C']"]), function_id=float("nan"),
                       prompt_id=float("nan"), special_info=float("nan"))
        elif kind < 0.9:
            row.update(question_type="open", answer="3.5", function_id=float("nan"), prompt_id=float("nan"),
                       special_info=float("nan"))
        else:
            row.update(question_type="open", answer=float("nan"), function_id="calculate_answer_function_10",
                       prompt_id="id_answer_pair_prompt", special_info=float("nan"))
    return SpeedCase(rows, _responses(rng, rows), CallableJudge(_mme_judge))


SPEED_CASES: dict[str, Callable[[int], SpeedCase]] = {
    # Science & General, Spatial Reasoning
    "phyx_mini_mc": _phyx,
    "mmmu_pro_vision": _mmmu,
    "realworldqa": lambda n: _imagemcq(n, judge=False),
    "mmstar": lambda n: _imagemcq(n, judge=True),
    "embspatial": _embspatial,
    "spatialvizbench_cot": _spatialviz,
    "cvbench_3d": _cvbench,
    "erqa": _erqa,
    # Charts & Tables, Visual Math
    "chartqapro": _chartqapro,
    "charxivreason": _charxiv,
    "tablevqabench": _tablevqa,
    "evochart": _evochart,
    "mathvision": _mathvision,
    "mathvista": _mathvista,
    "mathverse": _mathverse,
    "wemath": _wemath,
    # Perception & Counting, Puzzles & Logic
    "blink": _blink,
    "countbenchqa": _countbenchqa,
    "countqa": _countqa,
    "treebench": _treebench,
    "puzzlevqa": _puzzlevqa,
    "visualpuzzles": _visualpuzzles,
    "logicvista": _logicvista,
    "mme_reasoning": _mme_reasoning,
}


def _baseline(case: SpeedCase) -> None:
    for row, text in zip(case.rows, case.responses):
        letters = re.findall(r"[A-Z]", text)
        _ = bool(letters) and letters[-1] == row["answer"]


def _rate(fn: Callable[[], object], rows: int) -> float:
    start = time.perf_counter()
    fn()
    return rows / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", nargs="*", default=None, help="suite keys (default: every SPEED_CASES key)")
    parser.add_argument("--trace-root", default=None, help="the TRACE release (default: TRACE_ROOT / discovery)")
    args = parser.parse_args(argv)
    from trace_lib.release.locate import locate_release
    from trace_lib.release.suite import load_suite

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    suite = load_suite(locate_release(args.trace_root))
    print(f"{'benchmark':<22}{'rows':>7}{'rows/s':>12}{'baseline rows/s':>18}{'ratio':>9}")
    for key in args.benchmark or list(SPEED_CASES):
        rows = suite.benchmark(key).rows
        case = SPEED_CASES[key](rows)
        protocol = get_protocol(key)
        rate = _rate(lambda: protocol.score(case.rows, case.responses, ScoringContext(seed=42, judge=case.judge)),
                     rows)
        base = _rate(lambda: _baseline(case), rows)
        print(f"{key:<22}{rows:>7}{rate:>12,.0f}{base:>18,.0f}{base / rate:>8.0f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
