"""TableVQABench protocol: the three split templates, answer cleanup and the four split scorers (spec vectors),
the five-value macro mean, edge cases, CLI, and the aggregation against every canonical score."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
from pathlib import Path

import pytest

from trace_lib.benchmarks import tablevqabench as tvb
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.errors import InputError
from trace_lib.release import identity
from trace_lib.testing.cli_runner import run_cli

SPEC = json.loads((Path(__file__).parent / "data" / "tablevqabench" / "vectors.json").read_text("utf-8"))
VECTORS = SPEC["rows"]
TEMPLATE_SHA256 = {  # spec section 3.2, rendered with '<QUESTION>'
    "vwtq": "941e8af830ae0846d20fbf6859fb0dc13b86e3ff982e84f11cec284eeb2fc6dd",
    "vtabfact": "f1cbf6c5a5fac4672c59c8c43a19115ca6fa80a7a206f6d296557aebfe519303",
    "fintabnetqa": "f8fa4ddaaa13cdece9bc97fb228420aba0e92f38231e1383221247dac575f2bb",
}
#: one row per split so every split exists (their predictions are wrong on purpose)
FILLERS = [("fintabnetqa", "$1 million"), ("vtabfact", "1"), ("vwtq", "x"), ("vwtq_syn", "y")]


def _row(i: int, split: str, gold: str, image: str = "x") -> dict:
    return {"index": i, "image": image, "question": f"Question {i}", "answer": gold, "split": split}


@pytest.mark.parametrize("split", list(TEMPLATE_SHA256))
def test_templates_match_the_pinned_renderings(split, tmp_path):
    pytest.importorskip("PIL", reason="the row's image is a PNG")
    from trace_lib.testing.tiny_bench import tiny_png

    row = {**_row(1, split, "x", base64.b64encode(tiny_png(0)).decode("ascii")), "question": "<QUESTION>"}
    text = tvb.build_prompt(row, tmp_path)[-1].value
    assert hashlib.sha256(text.encode()).hexdigest() == TEMPLATE_SHA256[split]


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: f"v{v['id']}")
def test_spec_vector_cleanup(vector):
    assert tvb.extract(vector["raw"]) == vector["processed"]


@pytest.fixture(scope="module")
def vector_slice():
    rows = [_row(i, v["split"], v["gold"]) for i, v in enumerate(VECTORS)]
    rows += [_row(len(VECTORS) + j, split, gold) for j, (split, gold) in enumerate(FILLERS)]
    responses = [v["raw"] for v in VECTORS] + ["nothing"] * len(FILLERS)
    return tvb.score(rows, responses, ScoringContext(seed=42))


@pytest.mark.parametrize("position", range(len(VECTORS)), ids=[f"v{v['id']}" for v in VECTORS])
def test_spec_vector_score(vector_slice, position):
    vector, record = VECTORS[position], vector_slice.records[position]
    assert record.score == vector["score"]
    if "exact" in vector:
        assert record.detail["exact_score"] == vector["exact"]


def test_slice_counts_and_five_value_mean(vector_slice):
    assert vector_slice.counts["vwtq"] == 5 and vector_slice.counts["vtabfact"] == 1
    assert (vector_slice.counts["fintabnetqa_relieved"], vector_slice.counts["fintabnetqa_exact"]) == (2, 1)
    values = [vector_slice.metrics[k] for k in ("fintabnetqa_relieved", "fintabnetqa_exact", "vtabfact", "vwtq",
                                                  "vwtq_syn")]
    assert vector_slice.score == sum(values) / 5


def test_spec_aggregate_is_the_mean_of_five_values():
    agg = SPEC["aggregate"]
    assert tvb.aggregate(agg["values"]) == agg["reported"]


@pytest.mark.parametrize(
    ("split", "response", "gold", "score"),
    [("vwtq", "", "Freeman", 0.0), ("vwtq", "None", "Freeman", 0.0), ("vwtq", "2004-05-06", "2004-5-6", 1.0),
     ("vwtq", "Café", "cafe", 1.0), ("vwtq", "1000", "1,000", 0.0), ("vwtq_syn", "3||4||3", "4|3", 1.0),
     ("vtabfact", "TRUE", "1", 1.0), ("fintabnetqa", "3.852 billion", "$3,852 million", 1.0)],
    ids=["empty", "none-token", "date", "diacritics", "thousands-separator-in-gold", "duplicate-answers",
         "upper-case-true", "scale-words"],
)
def test_edge_responses(split, response, gold, score):
    rows = [_row(0, split, gold)] + [_row(1 + j, s, g) for j, (s, g) in enumerate(FILLERS)]
    result = tvb.score(rows, [response] + ["nothing"] * len(FILLERS), ScoringContext(seed=42))
    assert result.records[0].score == score


def test_upstream_crashes_are_reproduced_and_missing_split_is_an_error():
    rows = [_row(0, "vwtq", "1")] + [_row(1 + j, s, g) for j, (s, g) in enumerate(FILLERS)]
    with pytest.raises(tvb.ScorerCrash, match=r"rows\[0\].*inf/nan"):
        tvb.score(rows, ["inf"] + ["x"] * len(FILLERS), ScoringContext(seed=42))
    with pytest.raises(tvb.ScorerCrash, match=r"rows\[0\].*gold answer is float"):  # an 'NA' gold reads as NaN
        tvb.score([_row(0, "vwtq", "NA"), *rows[1:]], ["x"] * len(rows), ScoringContext(seed=42))
    with pytest.raises(InputError, match="split is missing"):
        tvb.score(rows[:2], ["x", "x"], ScoringContext(seed=42))


def _find_counts(score: float) -> dict[str, tuple[int, int]] | None:
    """Integer counts whose five split values average exactly to ``score`` (vwtq over 750, others over 250)."""
    quarter = [tvb.split_accuracy(c, 250) for c in range(251)]
    for vwtq in range(751):
        rest = 5 * score - tvb.split_accuracy(vwtq, 750)
        units = round(rest / 0.4)
        if abs(rest - units * 0.4) > 1e-6 or not 0 <= units <= 1000:
            continue
        for a, b in itertools.product(range(max(0, units - 750), min(250, units) + 1), repeat=2):
            left = units - a - b
            for c in range(max(0, left - 250), min(250, left) + 1):
                values = [quarter[a], quarter[b], quarter[c], tvb.split_accuracy(vwtq, 750), quarter[left - c]]
                if tvb.aggregate(values) == score:
                    return {"fintabnetqa_relieved": (a, 250), "fintabnetqa_exact": (b, 250), "vtabfact": (c, 250),
                            "vwtq": (vwtq, 750), "vwtq_syn": (left - c, 250)}
    return None


def test_aggregation_reproduces_every_canonical_score(release):
    scores = [s for s in release.read_json(identity.RESULTS)["scores"]["benchmark_scores"]
              if s["benchmark_id"] == tvb.KEY]
    assert scores, "results.json has no TableVQABench scores"
    unmatched = [(s["model_id"], s["seed"], s["score"]) for s in scores if _find_counts(s["score"]) is None]
    assert not unmatched


def test_cli_scores_a_real_format_file(release, tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("PIL", reason="the TSV's images are PNGs")
    from trace_lib.testing.synthetic_campaign import write_response_file
    from trace_lib.testing.tiny_bench import tiny_png

    image = base64.b64encode(tiny_png(7)).decode("ascii")
    table = [_row(i, v["split"], v["gold"], image) for i, v in enumerate(VECTORS)]
    table += [_row(len(VECTORS) + j, s, g, image) for j, (s, g) in enumerate(FILLERS)]
    dataset = tmp_path / "TableVQABench.tsv"
    pd.DataFrame(table).to_csv(dataset, sep="\t", index=False)
    rows = tvb.load(dataset)
    texts = [v["raw"] for v in VECTORS] + ["nothing"] * len(FILLERS)
    responses = write_response_file(tmp_path / "r.jsonl", model="tiny", seed=42, benchmark="tablevqabench", rows=rows,
                                    texts=texts)
    proc = run_cli(["score", "--trace-root", str(release.path), "--benchmark", "tablevqabench",
                    "--dataset", str(dataset), "--responses", str(responses), "--out", str(tmp_path / "out")])
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "out" / "scores.json").read_text())["score"] == tvb.score(
        rows, texts, ScoringContext(seed=42)).score
