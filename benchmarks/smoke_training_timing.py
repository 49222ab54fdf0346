"""Wall time of a GPU training smoke, split into import, Ray start, engine start, step, save+validation, merge.

Builds the tiny Qwen2.5-VL and tiny TRACE-schema dataset, runs ``trace-repro train smoke --scale tiny`` on the
GPUs given (default: 1), then ``train merge``, and prints the phases (from the stamped ``trainer.log``) next
to the total. Baseline: the same smoke's total; phases are shares of it.

    python benchmarks/smoke_training_timing.py --trace-root DIR [--gpus 1] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace-root", required=True)
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--config", default="trace-qwen2.5-vl-3b")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)

    from trace_lib.release.locate import locate_release
    from trace_lib.testing.tiny_qwen import build_tiny_qwen25vl
    from trace_lib.training.prepare import dataset_expectations
    from trace_lib.training.profiles import load_profile
    from trace_lib.training.timeline import phase_times
    from trace_lib.training.tiny_dataset import build_tiny_trace_dataset

    work = args.workdir or Path(tempfile.mkdtemp(prefix="trace-smoke-timing-"))
    release = locate_release(args.trace_root)
    profile = load_profile(release, args.config)
    model = build_tiny_qwen25vl(work / "model")
    data = build_tiny_trace_dataset(work / "data", dataset_expectations(release, profile).columns,
                                    profile.dataset.train_files[0], profile.dataset.validation_file)
    base = [sys.executable, "-m", "trace_lib", "train"]
    common = ["--config", args.config, "--trace-root", args.trace_root]
    start = time.monotonic()
    smoke = subprocess.run([*base, "smoke", *common, "--output-dir", str(work / "run"), "--gpus", str(args.gpus),
                            "--scale", "tiny", "--base-model-dir", str(model), "--dataset-dir", str(data)])
    smoke_s = time.monotonic() - start
    if smoke.returncode != 0:
        print(f"smoke failed (exit {smoke.returncode}); see {work / 'run' / 'trainer.log'}", file=sys.stderr)
        return smoke.returncode
    start = time.monotonic()
    merge = subprocess.run([*base, "merge", *common, "--checkpoint-dir", str(work / "run" / "checkpoint"),
                            "--output-dir", str(work / "merged")])
    merge_s = time.monotonic() - start
    phases = phase_times(work / "run" / "trainer.log")
    phases["merge"] = round(merge_s, 3)
    total = smoke_s + merge_s
    print(json.dumps({"gpus": args.gpus, "smoke_total_s": round(smoke_s, 3), "phases_s": phases}, indent=2))
    for name, seconds in phases.items():
        print(f"{name:>18}: {seconds:8.1f} s  ({seconds / total:6.1%} of smoke+merge {total:.1f} s)")
    return merge.returncode


if __name__ == "__main__":
    raise SystemExit(main())
