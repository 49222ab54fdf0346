"""Reading one archived model-seed (32,805 rows, suite sizes) joined across responses, extractions and scores.

Untimed: a synthetic archive run in the public schema (``trace_lib.testing.archive_writer``), one slice per suite
benchmark at its suite row count, responses of realistic length (~1.5 kB of text each). Timed, each in a fresh
process pinned to one core (``pyarrow.set_cpu_count(1)``, one I/O thread):

- ``trace-repro``: ``open_archive`` + ``iter_slice`` over the 24 slices (every part's SHA-256 verified first, every
  row built as an ``ArchiveRow``);
- ``pandas``: the baseline a user would write: ``pandas.read_parquet`` of the same three parts per slice (all
  columns) and two ``merge`` on ``sample_id``, no hash check.

Memory: peak RSS of each process, and for trace-repro also with ``--passes 2 4`` (the same model-seed read K times
one slice after another): flat if reading is bounded by one slice. Budget (issue #12): < 5 s on one core.

    python benchmarks/archive_reader_speed.py [--trace-root DIR] [--passes 1 2 4] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

BUDGET_S = 5.0
MODEL, SEED = "trace-qwen2.5-vl-3b", 42
WORDS = ("the", "answer", "is", "therefore", "we", "compute", "angle", "area", "triangle", "option", "because",
         "so", "value", "equals", "first", "then", "count", "objects", "image", "shows", "left", "right", "chart")


def build(root: Path, trace_root: str | None) -> int:
    from trace_lib.archive.hashes import text_sha256
    from trace_lib.release.locate import locate_release
    from trace_lib.release.suite import load_suite
    from trace_lib.testing.archive_writer import SampleSpec, SliceSpec, write_archive_run

    suite = load_suite(locate_release(trace_root))
    rng = random.Random(0)
    slices = []
    for bench in suite.benchmarks:
        samples = []
        for i in range(bench.rows):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(150, 350))) + f" \\boxed{{{i % 5}}}"
            samples.append(SampleSpec(str(i), i, text_sha256(f"{bench.key}{i}"), f"prompt {i}", text,
                                      (text_sha256(f"img{bench.key}{i}"),), extraction_value=str(i % 5),
                                      judge_output="B" if i % 7 == 0 else None, score=float(i % 2)))
        slices.append(SliceSpec(MODEL, SEED, bench.key, tuple(samples), 50.0))
    write_archive_run(root / "runs" / "bench-run", "bench-run", slices)
    return sum(len(s.samples) for s in slices)


def child(mode: str, root: str, passes: int) -> None:
    import pyarrow as pa

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    if mode == "trace-repro":
        from trace_lib.archive.reader import open_archive
    else:
        import pandas as pd
    start = time.perf_counter()  # imports excluded on both sides
    rows = 0
    if mode == "trace-repro":

        for _ in range(passes):
            archive = open_archive(root)  # fresh: parts are hashed again on every pass
            for key in archive.slices():
                for row in archive.iter_slice(key):
                    rows += 1
    else:
        manifest = json.loads((Path(root) / "runs/bench-run/metadata/manifest.json").read_text())
        parts: dict[str, dict[str, str]] = {}
        for art in manifest["artifacts"]:
            parts.setdefault(art["benchmark_id"], {})[art["config_name"]] = art["parquet_path"]
        base = Path(root) / "runs/bench-run"
        for _ in range(passes):
            for bench, p in parts.items():
                r = pd.read_parquet(base / p["responses"])
                e = pd.read_parquet(base / p["extractions"])
                s = pd.read_parquet(base / p["scores"])
                s = s[s["score_scope"] == "row"]
                joined = r.merge(e, on="sample_id", suffixes=("", "_e")).merge(s, on="sample_id", how="left",
                                                                              suffixes=("", "_s"))
                rows += len(joined)
    elapsed = time.perf_counter() - start
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss across fork+exec (the parent's peak would show here)
    status = Path("/proc/self/status").read_text()
    peak = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) / 1024
    print(json.dumps({"mode": mode, "passes": passes, "rows": rows, "seconds": elapsed, "peak_rss_mib": peak}))


def run_child(mode: str, root: Path, passes: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", mode, "--root", str(root), "--passes", str(passes)],
                         capture_output=True, text=True, check=True, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace-root", default=None)
    parser.add_argument("--passes", nargs="+", type=int, default=[1, 2, 4])
    parser.add_argument("--keep", default=None, help="build (or reuse) the synthetic archive here")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--root", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.root, args.passes[0])
        return 0
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="archive-bench-"))
    if not (root / "runs/bench-run/metadata/manifest.json").is_file():
        t = time.perf_counter()
        total = build(root, args.trace_root)
        print(f"built a {total:,}-row model-seed archive in {time.perf_counter() - t:.1f} s (untimed) at {root}")
    size = sum(p.stat().st_size for p in root.rglob("*.parquet")) / 2**20
    print(f"parquet parts: {size:.1f} MiB")
    ours = run_child("trace-repro", root, 1)
    base = run_child("pandas", root, 1)
    print(f"trace-repro reader (hash-verified, joined rows): {ours['rows']:,} rows in {ours['seconds']:.2f} s, "
          f"peak RSS {ours['peak_rss_mib']:.0f} MiB")
    print(f"pandas.read_parquet + merge (baseline, no hash check): {base['rows']:,} rows in {base['seconds']:.2f} s, "
          f"peak RSS {base['peak_rss_mib']:.0f} MiB")
    print(f"ratio trace-repro/pandas: time {ours['seconds'] / base['seconds']:.2f}, "
          f"peak RSS {ours['peak_rss_mib'] / base['peak_rss_mib']:.2f}")
    for k in args.passes:
        if k == 1:
            continue
        r = run_child("trace-repro", root, k)
        print(f"trace-repro x{k} model-seeds: {r['rows']:,} rows in {r['seconds']:.2f} s, peak RSS "
              f"{r['peak_rss_mib']:.0f} MiB")
    ok = ours["seconds"] < BUDGET_S
    print(f"budget < {BUDGET_S:.0f} s on one core: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
