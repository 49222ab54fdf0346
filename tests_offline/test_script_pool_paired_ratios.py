"""benchmarks/pool_paired_ratios.py: the pairs of several harness_overhead.py outputs judged together."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "pool_paired_ratios.py"
sys.path.insert(0, str(SCRIPT.parent))

import _paired_ratio  # noqa: E402
import harness_overhead  # noqa: E402
import pool_paired_ratios  # noqa: E402


def _output(path: Path, vllm: list[float], stream: list[float]) -> Path:
    """A harness_overhead.py output: engine log lines around the two ratio lines that the script prints."""
    path.write_text("\n".join(["INFO 12-03 11:18:11 [llm.py:300] engine ready", "rows=400 max_tokens=256 repeats=3",
                               harness_overhead.ratio_line("vllm", 0.99, 0.99, vllm),
                               harness_overhead.ratio_line("stream", 0.98, 0.97, stream),
                               "the raw baseline's own spread between runs: 12.0%", ""]), encoding="utf-8")
    return path


def test_the_pairs_of_every_output_are_judged_as_one_sample(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    first = _output(tmp_path / "a.txt", [0.99, 1.01, 0.98], [0.95, 1.02, 0.97])
    second = _output(tmp_path / "b.txt", [1.00, 0.97, 1.03, 0.99], [0.99, 1.04, 0.98, 1.00])
    assert pool_paired_ratios.read_pairs(first) == {"vllm": [0.99, 1.01, 0.98], "stream": [0.95, 1.02, 0.97]}

    assert pool_paired_ratios.main([str(first), str(second)]) == 0
    printed = capsys.readouterr().out.splitlines()
    stream = _paired_ratio.median_interval([0.95, 1.02, 0.97, 0.99, 1.04, 0.98, 1.00], 0.9)
    assert printed[0] == f"pooled 2 outputs: {first}, {second}"
    assert printed[2] == (f"ratio stream/raw: 7 pairs, median {stream.median:.3f}, {stream.coverage:.0%} interval "
                          f"[{stream.low:.3f}, {stream.high:.3f}]: unresolved (target >= 0.97)")
    assert printed[1].startswith("ratio   vllm/raw: 7 pairs, median 0.990")


def test_an_output_without_ratio_lines_or_a_missing_one_is_one_line_naming_it(tmp_path: Path) -> None:
    other = tmp_path / "ct7.txt"
    other.write_text("| path | rows | seconds |\nstreaming / upstream design = 2.48\n", encoding="utf-8")
    good = _output(tmp_path / "a.txt", [1.0], [1.0])
    for bad, reason in ((other, "no 'ratio <path>/raw: ... run by run ...' line"),
                        (tmp_path / "absent.txt", "No such file or directory")):
        done = subprocess.run([sys.executable, str(SCRIPT), str(good), str(bad)], capture_output=True, text=True,
                              timeout=60)
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr.splitlines() == [f"pool_paired_ratios: {bad}: {reason}"
                                            + (" (is it harness_overhead.py's output?)" if bad is other else "")]


def test_the_ratio_line_is_the_one_run_30_printed_on_the_gpu() -> None:
    paired = [0.960, 1.058, 0.895, 1.031, 0.919, 1.161, 0.776, 1.197, 0.934, 0.928, 0.975, 1.046, 1.126, 1.194, 1.189]
    line = harness_overhead.ratio_line("stream", 0.915, 0.915, paired)
    assert line == ("ratio stream/raw: fastest run rows/s 0.915, output tok/s 0.915; run by run "
                    + ", ".join(f"{r:.3f}" for r in paired)
                    + "; median 1.031, 96% interval [0.928, 1.161]: unresolved (target >= 0.97)")
    assert pool_paired_ratios.RATIO_LINE.match(line)["path"] == "stream"
