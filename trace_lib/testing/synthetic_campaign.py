"""Synthetic campaigns for tests and measurements: a toy deterministic MCQ protocol, its data files, and response
files in the real store format (``trace_lib.generation.store``), written without any model.

- :func:`toy_mcq_protocol` is *not* a benchmark protocol: it answers "the last standalone letter A-D of the
  response equals the row's ``answer``", percent of rows, for a suite key of your choice (register it with
  ``monkeypatch.setitem(registry.PROTOCOLS, key, ...)`` or pass it directly);
- :func:`write_toy_dataset` writes ``rows`` MCQ rows as JSONL (``index, question, A-D, answer``);
- :func:`toy_responses` makes responses hitting a given fraction of rows, deterministically;
- :func:`write_response_file` writes a slice's response file (header + one line per row) through the store.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any, Sequence

from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, RowScore, ScoringContext, SliceScore

_LETTER = re.compile(r"\b([A-D])\b")
TOY_REVISION = "0" * 40


def _load(path: Path) -> list[Row]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    options = "".join(f"{k}. {row[k]}\n" for k in "ABCD")
    return [PromptItem("text", f"Question: {row['question']}\nOptions:\n{options}Answer with the letter.")]


def extract_letter(response: str | None) -> str | None:
    """The last standalone capital A-D of a response (None when there is none)."""
    found = _LETTER.findall(response or "")
    return found[-1] if found else None


def _score_for(key: str):  # noqa: ANN202
    def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
        records = []
        hits = 0
        for row, response in zip(rows, responses):
            letter = extract_letter(response)
            hit = letter == row["answer"]
            hits += hit
            records.append(RowScore(index=str(row["index"]), extracted=letter, score=float(hit)))
        return SliceScore(benchmark=key, score=100.0 * hits / len(rows), rows=len(rows), records=tuple(records),
                          counts={"correct": hits})

    return score


def toy_mcq_protocol(key: str, *, judge: str = "none") -> Protocol:
    """A deterministic MCQ protocol for suite key ``key`` (see the module docstring)."""
    return Protocol(key=key, upstream="trace_lib.testing.synthetic_campaign", version="toy-mcq-1", load=_load,
                    build_prompt=_build_prompt, score=_score_for(key), judge=judge)  # type: ignore[arg-type]


def toy_judged_protocol(key: str, *, rounds: int = 2) -> Protocol:
    """:func:`toy_mcq_protocol` whose every row asks the judge: a chat round (the official route's shape), then
    the rows whose reply holds no letter again through the completions ladder (the direct route's), ``rounds``
    calls at most; the extracted letter is the judge's. Answer it with :func:`toy_judge_answer`."""
    from trace_lib.scoring.judge import complete_with_ladder

    def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
        prompts = [f"Which letter does this answer give? {response}" for response in responses]
        letters = [extract_letter(r.text) for r in ctx.judge.chat(prompts, max_tokens=16)]  # type: ignore[union-attr]
        again = [i for i, letter in enumerate(letters) if letter is None]
        if again and rounds > 1:
            replies = complete_with_ladder(ctx.judge, [prompts[i] for i in again], max_tokens=16,  # type: ignore[arg-type]
                                           allow_unresolved=True)
            for i, reply in zip(again, replies):
                letters[i] = extract_letter(reply.text)
        records, hits = [], 0
        for row, letter in zip(rows, letters):
            hit = letter == row["answer"]
            hits += hit
            records.append(RowScore(index=str(row["index"]), extracted=letter, score=float(hit), judge_calls=1))
        return SliceScore(benchmark=key, score=100.0 * hits / len(rows), rows=len(rows), records=tuple(records),
                          counts={"correct": hits})

    return Protocol(key=key, upstream="trace_lib.testing.synthetic_campaign", version="toy-judged-1", load=_load,
                    build_prompt=_build_prompt, score=score, judge="always")


def toy_judge_answer(route: str, prompt: str) -> str:
    """A deterministic judge for :func:`toy_judged_protocol` (one prompt's text, rendered or not): the
    response's letter, except that the chat route answers "unclear" for a D (those rows go on to the completions
    route)."""
    letter = extract_letter(prompt.split("give?")[-1].split("<|im_end|>")[0]) or "A"
    return "unclear" if route == "chat/completions" and letter == "D" else letter


def toy_rows(count: int, *, seed: int = 0) -> list[dict[str, Any]]:
    """``count`` MCQ rows with indices ``0..count-1`` and a seeded answer letter."""
    rng = random.Random(seed)
    return [{"index": i, "question": f"Which option is right in item {i}?", "A": "one", "B": "two", "C": "three",
             "D": "four", "answer": rng.choice("ABCD")} for i in range(count)]


def write_toy_dataset(path: Path, count: int, *, seed: int = 0) -> Path:
    """Write :func:`toy_rows` as JSONL to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in toy_rows(count, seed=seed)), encoding="utf-8")
    return path


def toy_responses(rows: Sequence[Row], accuracy: float, *, seed: int = 0) -> list[str]:
    """One response per row; the first ``round(accuracy * len(rows))`` rows of a seeded shuffle are right."""
    rng = random.Random(seed)
    order = list(range(len(rows)))
    rng.shuffle(order)
    right = set(order[: round(accuracy * len(rows))])
    out = []
    for i, row in enumerate(rows):
        letter = row["answer"] if i in right else "ABCD"[("ABCD".index(row["answer"]) + 1) % 4]
        out.append(f"Counting carefully, the answer is {letter}.")
    return out


def write_response_file(
    path: Path,
    *,
    model: str,
    seed: int,
    benchmark: str,
    rows: Sequence[Row],
    texts: Sequence[str],
    model_revision: str = TOY_REVISION,
    contract: dict[str, Any] | None = None,
) -> Path:
    """Write a complete response file for one slice in the store format (header, then one line per row)."""
    from trace_lib.data.rowhash import row_key, source_row_hash
    from trace_lib.generation.store import SliceIdentity, SliceStore, StoredResponse

    identity = SliceIdentity(slice=f"{model}-seed{seed}-{benchmark}", model=model, model_revision=model_revision,
                             seed=seed, benchmark=benchmark, contract=contract or {"synthetic": True, "seed": seed})
    stored = []
    for ordinal, (row, text) in enumerate(zip(rows, texts)):
        row_hash = source_row_hash(row)
        stored.append(StoredResponse(
            row_key=row_key(ordinal, row["index"], row_hash), index=str(row["index"]), ordinal=ordinal,
            source_row_hash=row_hash, request_hash="0" * 64, response=text, finish_reason="stop",
            prompt_tokens=None, completion_tokens=None, model_revision=model_revision, backend="synthetic",
        ))
    with SliceStore.open(Path(path), identity) as store:
        store.append(stored)
    return Path(path)


def build_toy_campaign(
    root: Path,
    data_dir: Path,
    *,
    model: str,
    accuracy: dict[tuple[int, str], float],
    rows: dict[str, int],
    scored: set[tuple[int, str]] | frozenset[tuple[int, str]] = frozenset(),
) -> dict[str, Path]:
    """A campaign directory with toy MCQ data, a complete response file per (seed, benchmark) of ``accuracy``
    (hitting that fraction of rows), and ``scores.json`` receipts for the (seed, benchmark) pairs in ``scored``.

    Returns benchmark -> dataset path. Scoring goes through :func:`trace_lib.scoring.score.run_scoring`.
    """
    from trace_lib.generation.store import response_path
    from trace_lib.scoring.score import run_scoring, scores_dir

    datasets = {key: write_toy_dataset(Path(data_dir) / f"{key}.jsonl", count, seed=len(key))
                for key, count in rows.items()}
    for (seed, key), fraction in accuracy.items():
        data = _load(datasets[key])
        path = response_path(root, model=model, seed=seed, benchmark=key)
        write_response_file(path, model=model, seed=seed, benchmark=key, rows=data,
                            texts=toy_responses(data, fraction, seed=seed))
        if (seed, key) in scored:
            run_scoring(toy_mcq_protocol(key), data, path, scores_dir(root, model=model, seed=seed, benchmark=key))
    return datasets


# -- tiny-model slice lanes (tests_offline/test_slices_cpu_model.py, tests_gpu/test_slices_vllm.py) ---------------

TINY_SLUG = "tiny-qwen25vl"
TINY_BENCHMARK = "mmstar"  # the MCQ exemplar; its tiny TSV has MMStar's columns


def tiny_canonical(release: Any, mean: float, *, rows: int, spread: float = 0.0, model: str = TINY_SLUG,
                   benchmark: str = TINY_BENCHMARK) -> Any:
    """Canonical values a tiny-model lane constructs: ``model`` scored ``mean - spread``, ``mean``, ``mean + spread``
    on ``benchmark`` (seeds 42-44) with ``rows`` rows (:class:`~trace_lib.aggregation.canonical.Canonical`)."""
    from trace_lib.aggregation.canonical import Canonical
    from trace_lib.release.suite import load_suite

    seeds = {42: mean - spread, 43: mean, 44: mean + spread}
    return Canonical(suite=load_suite(release), benchmarks={(model, benchmark): seeds}, categories={},
                     overall={model: seeds}, comparisons=(), row_counts={benchmark: rows})


def tiny_slice_runner(
    release: Any, work: Path, model_dir: Path, *, backend: str, judge_url: str, canonical: Any, rows: int = 8,
    seeds: Sequence[int] = (42, 43), max_tokens: int = 16, backend_overrides: dict[str, Any] | None = None,
) -> Any:
    """A :class:`~trace_lib.campaign.run_slice.SliceRunner` for the tiny model on a tiny MMStar TSV (written at
    the path the release's provenance gives it under ``work/data``), the real mmstar protocol, the judge at
    ``judge_url``, decoding as the suite's except ``max_tokens``."""
    from trace_lib.slices import ModelDescriptor
    from trace_lib.campaign.plan import build_plan
    from trace_lib.campaign.run_slice import SliceRunner
    from trace_lib.data.prepare import load_artifact_sources
    from trace_lib.testing.tiny_bench import build_tiny_tsv

    data_root = Path(work) / "data"
    build_tiny_tsv(load_artifact_sources(release)[TINY_BENCHMARK].local_path(data_root), style="mcq", rows=rows)
    model = ModelDescriptor(TINY_SLUG, str(model_dir), "sha256set:" + "0" * 64, f"org/tiny@{'0' * 40}", "Tiny")
    plan = build_plan(release, models=[model], seeds=list(seeds), benchmarks=[TINY_BENCHMARK], data_root=data_root,
                      campaign_root=Path(work) / "campaign", with_judge=False)
    return SliceRunner.from_plan(release, plan, backend=backend, campaign_root=plan.campaign_root,
                                 judge_url=judge_url, canonical=canonical, backend_overrides=backend_overrides,
                                 model_verify="none", allow_unprepared=True,
                                 generation_overrides={"max_tokens": max_tokens})


def slice_requests(runner: Any, slice_: Any) -> list[Any]:
    """The :class:`~trace_lib.generation.request.ChatRequest` of every row of ``slice_`` as ``runner`` sends them."""
    from trace_lib.generation.run import prepare_rows

    protocol = runner.protocol(slice_)
    generation = {**runner.plan.suite.generation, **runner.generation_overrides}
    image_dir = runner.sources[slice_.benchmark].image_dir(runner.data_root)
    path = runner.dataset_path(slice_)
    prepared = prepare_rows(protocol.load(path), protocol, image_dir, served_name=slice_.model,
                            generation=generation, seed=slice_.seed, source=path)
    return [p.request for p in prepared]
