"""Deliberate deviations of trace-repro's protocols from the pinned upstream scorers, one line each: the one source.

``DEVIATIONS[key]`` lists every place a benchmark's protocol knowingly differs from what upstream would do (and why);
everything not listed is meant to match upstream exactly. :data:`JUDGE_DEVIATIONS` and
:data:`GENERATION_DEVIATIONS` hold the ones every judge route or every slice shares. From here, and nowhere else:

- each slice's JUnit receipt records the lines that apply to it (:func:`for_benchmark`, :func:`for_validation`) as
  ``deviation`` properties (:func:`receipt_properties`);
- ``docs/deviations.md`` is generated (``python3 -m trace_lib.benchmarks.deviations > docs/deviations.md``; a
  test fails when it is out of date).
"""

from __future__ import annotations

DEVIATIONS: dict[str, list[str]] = {
    # -- Science & General, Spatial Reasoning (benchmarks-science-spatial.md) --------------------------------------
    "phyx_mini_mc": [
    ],
    "realworldqa": [
    ],
    "mmstar": [
        "unseeded random.choice after three unusable judge replies -> deterministic_choice seeded by "
        "(benchmark, row index, decoding seed); the row is marked fallback",
        "judge health probe failing -> upstream silently switches to exact matching; here a first judge round in "
        "which every request answers 5xx or times out raises JudgeError",
    ],
    "mmmu_pro_vision": [
        "unseeded random.choice after three unusable judge replies -> deterministic_choice seeded by "
        "(benchmark, row index, decoding seed); the row is marked fallback",
        "judge health probe failing -> upstream silently switches to exact matching; here a first judge round in "
        "which every request answers 5xx or times out raises JudgeError",
        "an empty or numeric response crashes upstream's cot_postproc (AttributeError); here it is an InputError",
    ],
    "cvbench_3d": [
        "unseeded random.choice after three unusable judge replies -> deterministic_choice seeded by "
        "(benchmark, row index, decoding seed); the row is marked fallback",
        "judge health probe failing -> upstream silently switches to exact matching; here a first judge round in "
        "which every request answers 5xx or times out raises JudgeError",
        "upstream returns a cached <stem>_acc.csv when one exists; trace-repro always scores afresh",
    ],
    "embspatial": [
    ],
    "spatialvizbench_cot": [
        "judge health probe failing -> upstream silently falls back to the rule matcher; here a first judge round "
        "in which every request answers 5xx or times out raises JudgeError",
        "an empty judge reply makes upstream raise IndexError; here it counts as an unusable round",
    ],
    "erqa": [
        "judge health probe failing -> upstream silently falls back to the rule matcher; here a first judge round "
        "in which every request answers 5xx or times out raises JudgeError",
        "an empty judge reply makes upstream raise IndexError; here it counts as an unusable round",
    ],
    # -- Charts & Tables, Visual Math (benchmarks-charts-math.md) ---------------------------------------------------
    "chartqapro": [
        "the empty paragraph text part is left out of build_prompt (upstream's generation client drops it)",
        "the adapter's IndexError (response ending with 'the answer is') is raised as AdapterCrash naming the row",
    ],
    "charxivreason": [
        "upstream's released scorer calls the missing runner._parse_charxiv_judge (AttributeError); "
        "_parse_json_object stands in for that audit-only value (spec section 9.4)",
    ],
    "tablevqabench": [
        "upstream's AssertionError (a vwtq piece parsing as inf/nan) and AttributeError (non-text gold) are raised "
        "as ScorerCrash naming the row",
    ],
    "evochart": [
        "load() reads the cached <LMUData>/EvoChart.tsv that upstream's load_data writes, not the HF dataset itself",
    ],
    "mathvision": [
        "is_equal's eval() of model text runs on the AST (literals, arithmetic, comparisons, containers, subscripts, "
        "pure built-ins, is_equal's locals a/b/asw/gt_asw, opaque module globals); other constructs count as unequal",
        "upstream's 30 s is_equal timeout (a fresh subprocess per call) runs the comparison in one long-lived "
        "child process, killed and restarted on a timeout (scored 'not equal' as upstream); an integer past "
        "65,536 bits or a sequence past 2**20 items (a power, repetition or shift) is refused up front and that "
        "step counts as unequal: upstream computes such values (2**40000) or times out (9**9**9), and no ground "
        "truth equals one",
        "eval(choices) is ast.literal_eval (the TSV holds list literals)",
        "a row upstream's MATH_V_acc raises on (unparsable choices) is an InputError naming the row",
    ],
    "mathvista": [
        "eval(choices)/eval(skills) are ast.literal_eval (the TSV holds list literals)",
        "a row upstream's MathVista_acc raises on (unparsable choices/skills) is an InputError naming the row",
    ],
    "mathverse": [
        "more than one problem_version is refused (upstream reports the first row of a set-ordered table)",
        "metadata upstream's MathVerse_acc cannot parse is an InputError naming the row",
    ],
    "wemath": [
        "unseeded random.choice after three unusable judge replies -> deterministic_choice seeded by "
        "(benchmark, row index, decoding seed); the row is marked fallback",
        "judge health probe failing -> upstream silently switches to exact matching; here a first judge round in "
        "which every request answers 5xx or times out raises JudgeError",
        "a slice without a correct multi-step answer (upstream ZeroDivisionError) is an InputError",
    ],
    # -- Perception & Counting, Puzzles & Logic (benchmarks-perception-puzzles.md; helper E) ------------------------
    "blink": [
        "unseeded random.choice after three unusable judge replies -> deterministic_choice seeded by "
        "(benchmark, row index, decoding seed); the row is marked fallback",
        "judge health probe failing -> upstream silently switches to exact matching (every unread row -> Z); here a "
        "first judge round in which every request answers 5xx or times out raises JudgeError, and no judge at all raises JudgeError",
        "an empty slice is an InputError (upstream's mean of no rows is NaN and its wrapper raises)",
    ],
    "countbenchqa": [
        "an empty slice is an InputError (upstream reports 0)",
    ],
    "countqa": [
        "load() reads the TRACE-built CountQA.tsv (cached-TSV path incl. the answer re-normalisation); building it "
        "from the HF dataset is not reimplemented here",
        "an empty slice is an InputError (upstream reports 0)",
    ],
    "treebench": [
        "a non-text prediction cell (empty/NA/'=' response) makes upstream raise TypeError; scored 0 here and "
        "counted as counts['upstream_crash_rows']",
        "an unknown category (upstream KeyError/IndexError) or unreadable target_instances is an InputError",
        "an empty slice is an InputError (upstream ZeroDivisionError)",
    ],
    "puzzlevqa": [
        "eval(options) is ast.literal_eval; a non-literal options cell is an InputError",
        "a listed category with no rows (upstream ZeroDivisionError) is left out of the metrics, not an error",
        "an answer missing from its options (upstream ValueError) is an InputError naming the row",
        "the judge is never called (upstream only builds and pings it; it cannot change a score)",
    ],
    "visualpuzzles": [
        "a listed category/difficulty with no rows (upstream ZeroDivisionError) is left out of the metrics",
        "a non-text options cell or non-text gold answer (upstream TypeError/AttributeError) is an InputError",
        "the judge is never called (upstream only builds and pings it; it cannot change a score)",
    ],
    "logicvista": [
        "a gold answer that is not an option label (upstream RuntimeError) is an InputError; an extraction still "
        "malformed after T=2.0 is a JudgeError (upstream RuntimeError)",
        "rows with a NaN skill are left out of the skill breakdowns (upstream's str.contains mask raises)",
        "judge sampling fields the request leaves out (top_k ...) come from the serving vLLM, as upstream's do",
    ],
    "mme_reasoning": [
        "Python eval of gold answers/special_info is limited to literals and + - * / arithmetic (choice_function: "
        "literals only); anything else fails the row as upstream's NameError would",
        "24-point formulas are evaluated with numbers, arithmetic/bitwise operators, lists and abs/round/min/max/"
        "pow/int/float/sum only; other builtins make the check False (upstream eval sees every builtin)",
        "a 24-point power with an exponent above 1,000 is refused (False) instead of being computed",
        "a checker exception, non-bool verdict or unresolved judge output raises InputError/JudgeError (upstream "
        "MMEEvaluationFailure); no failure JSON file is written",
    ],
}

#: Deviations of the judge clients and launcher shared by every judge route (evaluation and TRACE validation).
JUDGE_DEVIATIONS: list[str] = [
    "an endpoint that does not serve the model name (HTTP 404) or refuses the credentials is a one-line JudgeError "
    "at once; upstream's clients retry it like any failed call and then fall back or fail",
    "TRACE validation: a first rung in which every batch answers 5xx, times out or is refused raises JudgeError "
    "before any receipt is written; upstream writes 'failed' receipts for every row",
    "the judge pool is started with 'vllm serve' (same flags) instead of 'python -m "
    "vllm.entrypoints.openai.api_server'; the official route spreads requests over the pool per request instead "
    "of leasing one endpoint per benchmark job",
    "'judge stop' signals only process groups that 'judge serve' started and that are still the same processes "
    "(pid, kernel start time and boot id recorded in pool.json beside upstream's pids.txt); upstream's stop script "
    "signals whatever pids.txt names, pid 0 or 1 included",
    "judge prompts go out sorted by their text (trace_lib.scoring.request_order: prompts sharing the instruction "
    "and question together, for vLLM's prefix cache), so a completions batch of 64 holds other prompts than "
    "upstream's; each prompt's request content and reply are unchanged (TRACE_JUDGE_PREFIX_ORDER=0: upstream's order)",
    "each judge endpoint has up to TRACE_JUDGE_CONCURRENCY (192) sequences in flight, shared by every slice scored "
    "at once (upstream: 16 chat requests per VLMEvalKit job, one completions batch per endpoint), and 'score "
    "--campaign-root' scores at least --jobs slices at once and more while the judge has room, the judge-heaviest "
    "benchmarks first (upstream: one job per endpoint); a request the server closed without answering a byte is "
    "re-sent at once; only the throughput differs",
]

#: Deviations of generation (requests identical to upstream's; what differs is how they reach the engine).
GENERATION_DEVIATIONS: list[str] = [
    "the streaming scheduler sends the rows of many slices (every seed and benchmark of a model) through one engine, "
    "a benchmark's seeds in lockstep chunks; upstream's design sends one slice at a time with 32 requests in flight. "
    "Each request keeps its slice's seed; only the batch it shares with other requests (bf16 numerics) differs "
    "(--schedule per-slice restores one slice after another)",
    "the generation contract hashed into a response file binds the model revision, not the model's local path "
    "(upstream hashes the path string), so moving a model directory does not invalidate its responses",
    "a decoding seed must be a non-negative integer (a negative, bool or non-integer seed is one InputError line); "
    "upstream's generation queue passes any integer --seed on. Every seed the paper uses (42, 43, 44) is sent as it is",
]


def for_benchmark(key: str) -> list[str]:
    """The deviations of one evaluation slice: generation's, then its benchmark's own."""
    return [*GENERATION_DEVIATIONS, *DEVIATIONS[key]]


def for_validation() -> list[str]:
    """The deviations of a TRACE-validation slice (its own generation and judge stack): the judge clients'."""
    return list(JUDGE_DEVIATIONS)


def receipt_properties(lines: list[str]) -> list[tuple[str, str]]:
    """JUnit receipt properties: one ``deviation`` per line."""
    return [("deviation", line) for line in lines]


def markdown() -> str:
    """``docs/deviations.md``: every list above as a Markdown table, in this module's order."""
    lines = [
        "# Deliberate deviations from upstream",
        "",
        "Generated from `trace_lib/benchmarks/deviations.py` (the one source; each slice's JUnit receipt records",
        "the lines that apply to it as `deviation` properties). Regenerate with",
        "`python3 -m trace_lib.benchmarks.deviations > docs/deviations.md`.",
        "",
        "| where | deviation |",
        "| --- | --- |",
    ]
    rows = [("generation (every slice)", line) for line in GENERATION_DEVIATIONS]
    rows += [("judge clients (every judged slice, TRACE validation)", line) for line in JUDGE_DEVIATIONS]
    rows += [(f"`{key}`", line) for key, items in DEVIATIONS.items() for line in items]
    lines += ["| " + where + " | " + line.replace("|", "\\|") + " |" for where, line in rows]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
