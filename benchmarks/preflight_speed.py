"""Wall time of ``trace-repro check`` against upstream's own offline preflight, side by side in one run.

Upstream's rlvr tree is materialized at run time into a temporary directory from a git mirror
(``git -C DIR archive REF rlvr``); nothing of it is stored in this project. Upstream's preflight is the set of
commands that together cover what ``trace-repro check`` covers (validation-and-preflight.md B0):

    python rlvr/evaluation/scripts/validate_release_inputs.py          (suite ... source map, verify release)
    python rlvr/train.py check --config trace-qwen2.5-vl-3b            (profiles, vendor, inventory, prompt, receipt)
    python rlvr/train.py check --config trace-qwen2.5-vl-7b
    python -m rlvr.evaluation.trace_validation.verify release          (TRACE-validation release phase)

each run from the tree's root, as its README does. ``trace-repro check --trace-root TREE`` runs on the same full
tree (pinned, source files present), and also on a data-only copy (``--trace-root``/``TRACE_ROOT``/discovery).
Every command must exit 0; each is timed ``--repeat`` times as a fresh process (interpreter start included) and
the median is reported. Ratio = trace-repro / upstream (below 1: trace-repro is faster).

    python benchmarks/preflight_speed.py [--upstream-git /work/.mirror/maveryn+trace/repo] [--ref rlvr]
                                         [--trace-root DIR] [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trace_lib.preflight.report import check_release  # noqa: E402
from trace_lib.release.locate import locate_release  # noqa: E402

UPSTREAM_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("rlvr/evaluation/scripts/validate_release_inputs.py",),
    ("rlvr/train.py", "check", "--config", "trace-qwen2.5-vl-3b"),
    ("rlvr/train.py", "check", "--config", "trace-qwen2.5-vl-7b"),
    ("-m", "rlvr.evaluation.trace_validation.verify", "release"),
)


def materialize(git_dir: Path, ref: str, dest: Path) -> Path:
    """Extract ``rlvr/`` of ``ref`` from the git mirror into ``dest`` and return ``dest``."""
    with tempfile.TemporaryFile() as errors:
        archive = subprocess.Popen(["git", "-C", str(git_dir), "archive", ref, "rlvr"], stdout=subprocess.PIPE,
                                   stderr=errors)
        assert archive.stdout is not None
        with tarfile.open(fileobj=archive.stdout, mode="r|") as tar:
            tar.extractall(dest, filter="data")
        if archive.wait() != 0 or not (dest / "rlvr").is_dir():
            errors.seek(0)
            raise SystemExit(f"git archive {ref} rlvr failed in {git_dir}: {errors.read().decode(errors='replace')}")
    return dest


def timed(argv: list[str], cwd: Path, repeat: int) -> tuple[float, subprocess.CompletedProcess]:
    """Median wall seconds of ``repeat`` fresh runs of ``argv`` (which must exit 0) and the last result."""
    env = {k: v for k, v in os.environ.items() if k not in ("TRACE_ROOT", "PYTHONPATH")}
    times, done = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise SystemExit(f"{' '.join(argv)} exited {done.returncode} in {cwd}: {' | '.join(tail)}")
    assert done is not None
    return statistics.median(times), done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream-git", type=Path, default=Path("/work/.mirror/maveryn+trace/repo"))
    parser.add_argument("--ref", default="rlvr")
    parser.add_argument("--trace-root", default=None, help="a data-only release for the second trace-repro timing")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="trace-upstream-") as tmp:
        tree = materialize(args.upstream_git, args.ref, Path(tmp))
        print(f"upstream tree: {args.upstream_git} @ {args.ref} -> {tree} "
              f"({sum(1 for p in (tree / 'rlvr').rglob('*') if p.is_file())} files); repeat={args.repeat}, median")
        upstream_total = 0.0
        for command in UPSTREAM_COMMANDS:
            seconds, _ = timed([python, *command], tree, args.repeat)
            upstream_total += seconds
            print(f"  upstream   {seconds * 1000:8.1f} ms  python {' '.join(command)}")
        print(f"  upstream   {upstream_total * 1000:8.1f} ms  total (4 processes)")
        ours, done = timed([python, "-m", "trace_lib", "check", "--trace-root", str(tree)], tree, args.repeat)
        print(f"  trace-repro{ours * 1000:8.1f} ms  trace-repro check --trace-root <same tree>   "
              f"[{done.stdout.strip().splitlines()[-1]}]")
        data_only = locate_release(args.trace_root)
        ours_data, done = timed([python, "-m", "trace_lib", "check", "--trace-root", str(data_only.path)], tree,
                                args.repeat)
        print(f"  trace-repro{ours_data * 1000:8.1f} ms  trace-repro check --trace-root {data_only.path}   "
              f"[{done.stdout.strip().splitlines()[-1]}]")
        starts = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            report = check_release(locate_release(str(tree)))
            starts.append(time.perf_counter() - start)
        print(f"  trace-repro{statistics.median(starts) * 1000:8.1f} ms  check_release() in process "
              f"(no interpreter start; ok={report.ok})")
        print(f"ratio trace-repro / upstream (same full tree, wall time): {ours / upstream_total:.2f} "
              f"({ours * 1000:.0f} ms vs {upstream_total * 1000:.0f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
