"""Throughput of TRACE-validation scoring's pure part: deterministic extraction (+ historical fields + MATCH).

Synthesizes ``--rows`` responses (default 16,000 = the full 8-model campaign) from a fixed grammar of answer
forms, then times ``extract`` alone and the whole per-row scoring computation. With ``--upstream FILE`` (upstream's
``answer_extraction.py``, e.g. extracted from the trace mirror to a temp dir) it also times upstream's extractor on
the same inputs and prints the ratio (ours / upstream, lower is faster).

    python benchmarks/validation_extraction.py [--rows 16000] [--upstream /tmp/answer_extraction.py]
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
import time

from trace_lib.validation.extraction import ANSWER_TYPES, extract
from trace_lib.validation.historical import historical_fields
from trace_lib.validation.match import semantic_correct

FORMS = [
    'Let me look at the image carefully.\n{"answer": %s}', "Reasoning...\nFinal answer: %s", "Answer: %s",
    "```json\n{\"answer\": %s}\n```", "<answer>%s</answer>", "So it is \\boxed{%s}.", "I think %s, maybe.",
    'First {"answer": %s} then\nAnswer: 7', "The count is %s",
]
VALUES = {"integer": ["4", "12", '"7"'], "number": ["2.5", "0.125", '"3.0"'], "option_letter": ['"B"', "C", '"(d)"'],
          "string": ['"blue"', '"Paris"', "red"]}


def responses(rows: int, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(rows):
        kind = rng.choice(ANSWER_TYPES)
        text = rng.choice(FORMS) % rng.choice(VALUES[kind])
        out.append(("Step %d. " % rng.randint(1, 9) * rng.randint(5, 40) + text, kind))
    return out


def clock(fn, items) -> float:
    start = time.perf_counter()
    for response, kind in items:
        fn(response, kind)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=16000)
    parser.add_argument("--upstream", default=None, help="path to upstream's answer_extraction.py")
    args = parser.parse_args()
    items = responses(args.rows)
    gt = {"integer": 4, "number": 2.5, "option_letter": "B", "string": "blue"}

    def full(response: str, kind: str) -> None:
        result = extract(response, kind)
        historical_fields(response, {"type": kind, "value": gt[kind]})
        if result.resolved:
            semantic_correct(result.typed, gt[kind])

    ours = clock(extract, items)
    whole = clock(full, items)
    print(f"extract: {args.rows / ours:,.0f} rows/s ({ours:.2f} s for {args.rows:,} rows)")
    print(f"per-row scoring (extract + historical + MATCH): {args.rows / whole:,.0f} rows/s ({whole:.2f} s)")
    if args.upstream:
        spec = importlib.util.spec_from_file_location("upstream_extraction", args.upstream)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        theirs = clock(module.extract_answer, items)
        print(f"upstream extract_answer: {args.rows / theirs:,.0f} rows/s; ratio ours/upstream = {ours / theirs:.2f}")


if __name__ == "__main__":
    main()
