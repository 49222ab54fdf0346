"""benchmarks/campaign_throughput.py's command line (its paths need vLLM and a GPU: tests_gpu and the device)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "campaign_throughput.py"
sys.path.insert(0, str(SCRIPT.parent))

import campaign_throughput  # noqa: E402


def test_replicas_takes_one_or_several_engine_counts_in_order() -> None:
    assert campaign_throughput._counts("3") == [3]
    assert campaign_throughput._counts("2,3") == [2, 3]


def test_a_bad_replica_count_is_one_usage_line_and_exit_2() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--replicas", "2,x"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == ("campaign_throughput.py: error: argument --replicas: not a "
                                                   "comma-separated list of counts: '2,x'")
