"""Pool the paired runs of several ``harness_overhead.py`` outputs and judge the target on all of them.

Each output's ``ratio <path>/raw: ... run by run r1, r2, ...; median ...`` line holds one ratio per pair (a run
against the raw run just before it), read back at the three decimals printed. The sign test's interval needs only
that every pair's ratio is independent and has the same median, not the same spread, so pairs from machines of
different noise pool. Pool only outputs of the same code: a path whose overhead changed between them has two
medians.

    python benchmarks/pool_paired_ratios.py OUTPUT [OUTPUT ...]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _paired_ratio import median_interval  # noqa: E402  (this directory)
from harness_overhead import CONFIDENCE, TARGET  # noqa: E402

RATIO_LINE = re.compile(r"^ratio\s+(?P<path>\S+)/raw: .*?; run by run (?P<ratios>[0-9., ]+); median ")


def read_pairs(path: Path) -> dict[str, list[float]]:
    """The run-by-run ratios of one output, by path (``vllm``, ``stream``); ValueError names what is missing."""
    pairs: dict[str, list[float]] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        match = RATIO_LINE.match(line)
        if match:
            pairs.setdefault(match["path"], []).extend(float(r) for r in match["ratios"].split(","))
    if not pairs:
        raise ValueError("no 'ratio <path>/raw: ... run by run ...' line (is it harness_overhead.py's output?)")
    return pairs


def main(argv: list[str] | None = None) -> int:
    files = [Path(a) for a in (sys.argv[1:] if argv is None else argv)]
    if not files or any(f.name.startswith("-") for f in files):
        print(__doc__.rstrip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    pooled: dict[str, list[float]] = {}
    for file in files:
        try:
            pairs = read_pairs(file)
        except (OSError, ValueError) as exc:
            print(f"pool_paired_ratios: {file}: {getattr(exc, 'strerror', None) or exc}", file=sys.stderr)
            return 2
        for name, ratios in pairs.items():
            pooled.setdefault(name, []).extend(ratios)
    print(f"pooled {len(files)} outputs: {', '.join(str(f) for f in files)}")
    for name, ratios in pooled.items():
        interval = median_interval(ratios, CONFIDENCE)
        print(f"ratio {name:>6}/raw: {interval.n} pairs, {interval.summary(TARGET, CONFIDENCE)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
