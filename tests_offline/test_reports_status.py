"""trace_lib.reports.status: the snapshot arithmetic, its text and JSON, nvidia-smi parsing and build_status's counts
(a fake reader and suite; no campaign on disk)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from trace_lib.reports import status
from trace_lib.reports.collect import SliceKey
from trace_lib.reports.status import ModelSeedProgress, StatusReport, _duration, build_status, query_gpus

pytestmark = pytest.mark.offline


def _record(model="m", seed=1, durable=5, expected=10, gen=1, bench=2, scored=1, observed=2):
    return ModelSeedProgress(model, seed, durable, expected, gen, bench, scored, observed)


def _report(records, rate=None, gpus=(), warnings=()):
    return StatusReport("suite_v1", "abc", "/root/c", ("m",), (1,), ("a", "b"), 10, tuple(records), 50.0, rate,
                        tuple(gpus), tuple(warnings))


@pytest.mark.parametrize("seconds, text", [
    (0, "0m00s"), (59.4, "0m59s"), (59.6, "1m00s"), (61, "1m01s"), (3599, "59m59s"), (3600, "1h00m"),
    (3660, "1h01m"), (7199, "1h59m"), (90061, "25h01m"),
], ids=["zero", "down", "up", "min", "59m", "1h", "1h1m", "1h59m", "25h"])
def test_duration_text(seconds, text):
    assert _duration(seconds) == text


def test_report_sums_the_records():
    report = _report([_record(durable=3, expected=10, bench=2, scored=1, observed=2),
                      _record(seed=2, durable=4, expected=20, bench=3, scored=2, observed=1)])
    assert (report.durable_rows, report.expected_rows, report.score_slices, report.observed_score_files,
            report.expected_score_slices) == (7, 30, 3, 3, 5)


@pytest.mark.parametrize("durable, rate, eta", [
    (10, None, 0.0), (10, 0.0, 0.0), (4, None, None), (4, 0.0, None), (4, 2.0, 3.0), (9, 0.5, 2.0),
], ids=["done", "done-0", "no-rate", "zero-rate", "rate", "slow"])
def test_generation_eta(durable, rate, eta):
    assert _report([_record(durable=durable, expected=10)], rate=rate).generation_eta_seconds == eta


@pytest.mark.parametrize("durable, scored, complete", [
    (10, 2, True), (9, 2, False), (10, 1, False), (9, 1, False),
], ids=["all", "rows", "scores", "neither"])
def test_complete_needs_every_row_and_every_slice(durable, scored, complete):
    report = _report([_record(durable=durable, expected=10, bench=2, scored=scored)])
    assert report.complete is complete and report.to_json()["complete"] is complete


def test_to_json_and_to_dict_fields():
    record = _record(model="m", seed=7, durable=4, expected=10, gen=1, bench=2, scored=1, observed=2)
    report = _report([record], rate=2.0, gpus=[{"index": 0}], warnings=["w"])
    assert record.to_dict() == {"seed": 7, "model_slug": "m", "durable_rows": 4, "expected_rows": 10,
                                "generation_benchmarks": 1, "expected_benchmarks": 2, "score_slices": 1,
                                "observed_score_files": 2, "expected_score_slices": 2}
    assert report.to_json() == {
        "suite": "suite_v1", "suite_manifest_sha256": "abc", "campaign_root": "/root/c", "models": ["m"],
        "seeds": [1], "benchmarks": 2, "rows_per_model_seed": 10, "durable_rows": 4, "expected_rows": 10,
        "recent_rows_per_second": 2.0, "generation_eta_seconds": 3.0, "score_slices": 1, "observed_score_files": 2,
        "expected_score_slices": 2, "records": [record.to_dict()], "gpus": [{"index": 0}], "warnings": ["w"],
        "complete": False,
    }


def test_lines_name_rows_rate_eta_slices_gpus_and_warnings():
    gpu = {"index": 1, "utilization": 7, "memory_used_mib": 100, "memory_total_mib": 800}
    report = _report([_record(model="m", seed=7, durable=4, expected=10, gen=1, bench=2, scored=1, observed=2)],
                     rate=0.02, gpus=[gpu], warnings=["odd file"])
    assert report.lines() == [
        "[trace-repro status] generation 4/10 rows (40.0%), 0.02 rows/s, ETA 5m00s; scores 1/2 slices verified "
        "(2 scores.json present); complete=false",
        "[trace-repro status:slice] m seed 7: rows 4/10, benchmarks generated 1/2, scores verified 1/2 "
        "(2 scores.json present)",
        "[trace-repro status:gpus] GPU 1: 7% util, 100/800 MiB",
        "[trace-repro status:warning] odd file",
    ]


@pytest.mark.parametrize("durable, expected, rate, head", [
    (4, 10, None, "generation 4/10 rows (40.0%), rate needs --watch, ETA -;"),
    (4, 10, 0.0, "generation 4/10 rows (40.0%), 0.00 rows/s, ETA -;"),
    (0, 0, None, "generation 0/0 rows (100.0%), rate needs --watch, ETA 0m00s;"),
    (2, 3, 1.0, "generation 2/3 rows (66.7%), 1.00 rows/s, ETA 0m01s;"),
], ids=["no-rate", "zero-rate", "empty", "rate"])
def test_first_line_rate_and_eta(durable, expected, rate, head):
    report = _report([_record(durable=durable, expected=expected, bench=0, scored=0, observed=0)], rate=rate)
    first = report.lines()[0]
    assert first.startswith(f"[trace-repro status] {head}"), first
    assert first.endswith("complete=" + ("true" if durable == expected else "false"))


def _smi(monkeypatch, stdout="", exc=None, found=True):
    calls = []

    def run(argv, **kwargs):
        calls.append((argv, kwargs))
        if exc is not None:
            raise exc
        return SimpleNamespace(stdout=stdout)

    monkeypatch.setattr(status.shutil, "which", lambda name: f"/usr/bin/{name}" if found else None)
    monkeypatch.setattr(status.subprocess, "run", run)
    return calls


def test_query_gpus_parses_well_formed_lines_only(monkeypatch):
    calls = _smi(monkeypatch, "0, 35, 1000, 81559\n1, x, 2, 3\n2, 1, 2\n 3 , 0 , 0 , 10 \n4, -1, 2, 3\n")
    assert query_gpus() == (
        {"index": 0, "utilization": 35, "memory_used_mib": 1000, "memory_total_mib": 81559},
        {"index": 3, "utilization": 0, "memory_used_mib": 0, "memory_total_mib": 10},
    )
    (argv, kwargs), = calls
    assert argv == ["nvidia-smi", "--query-gpu=index,utilization.gpu,memory.used,memory.total",
                    "--format=csv,noheader,nounits"]
    assert kwargs == {"capture_output": True, "text": True, "timeout": 10, "check": True}


@pytest.mark.parametrize("exc, found", [
    (None, False), (OSError("gone"), True), (subprocess.CalledProcessError(9, "nvidia-smi"), True),
    (subprocess.TimeoutExpired("nvidia-smi", 10), True),
], ids=["absent", "oserror", "failed", "timeout"])
def test_query_gpus_is_empty_when_nvidia_smi_is_absent_or_fails(monkeypatch, exc, found):
    calls = _smi(monkeypatch, "0, 1, 2, 3\n", exc=exc, found=found)
    assert query_gpus() == ()
    assert len(calls) == (1 if found else 0)


@dataclass
class _State:
    complete: bool
    score: float | None


class _Reader:
    """What build_status reads of a CampaignReader: rows per benchmark, durable rows, scores, odd files."""

    def __init__(self, rows, durable, states, odd=None):
        self.rows, self._durable, self._states, self._odd = rows, durable, states, odd or {}
        self.versions = []

    def odd_files(self, key):
        return list(self._odd.get(key, ()))

    def durable_rows(self, key):
        return self._durable.get(key, 0)

    def score(self, key, *, protocol_versions):
        self.versions.append(protocol_versions)
        return self._states.get(key, _State(False, None))


SUITE = SimpleNamespace(suite_id="suite_v1", sha256="f" * 64, keys=("a", "b", "c"), benchmarks=())


@pytest.fixture
def versions(monkeypatch):
    seen = []
    monkeypatch.setattr(status, "current_protocol_versions", lambda keys: seen.append(tuple(keys)) or {"a": "v1"})
    return seen


def _reader(odd=None):
    rows = {"a": 10, "b": 5, "c": 100}
    durable = {SliceKey("m", 1, "a"): 10, SliceKey("m", 1, "b"): 3, SliceKey("m", 2, "a"): 10,
               SliceKey("m", 2, "b"): 5, SliceKey("n", 1, "a"): 7}
    states = {SliceKey("m", 1, "a"): _State(True, 0.5), SliceKey("m", 1, "b"): _State(False, 0.0),
              SliceKey("m", 2, "a"): _State(True, 0.0), SliceKey("n", 1, "b"): _State(False, None)}
    return _Reader(rows, durable, states, odd)


def test_build_status_counts_per_model_and_seed(versions):
    reader = _reader()
    report = build_status("/c", SUITE, models=["m", "n"], seeds=[1, 2], benchmarks=["a", "b"], reader=reader,
                          now=5.0)
    assert versions == [("a", "b")] and reader.versions == [{"a": "v1"}] * 8
    assert [(r.model, r.seed) for r in report.records] == [("m", 1), ("m", 2), ("n", 1), ("n", 2)]
    assert [r.durable_rows for r in report.records] == [13, 15, 7, 0]
    assert [r.expected_rows for r in report.records] == [15] * 4
    assert [r.generation_benchmarks for r in report.records] == [1, 2, 0, 0]
    assert [r.expected_benchmarks for r in report.records] == [2] * 4
    assert [r.score_slices for r in report.records] == [1, 1, 0, 0]
    assert [r.observed_score_files for r in report.records] == [2, 1, 0, 0]
    assert (report.suite, report.suite_sha256, report.campaign_root) == ("suite_v1", "f" * 64, "/c")
    assert (report.models, report.seeds, report.benchmarks, report.rows_per_model_seed) == (("m", "n"), (1, 2),
                                                                                              ("a", "b"), 15)
    assert (report.observed_at, report.rows_per_second, report.gpus, report.warnings) == (5.0, None, (), ())


def test_build_status_defaults_to_every_suite_benchmark_and_the_clock(versions, monkeypatch):
    monkeypatch.setattr(status.time, "time", lambda: 1234.5)
    report = build_status("/c", SUITE, models=["m"], seeds=[1], benchmarks=[], reader=_reader())
    assert report.benchmarks == ("a", "b", "c") and report.rows_per_model_seed == 115
    assert report.observed_at == 1234.5 and report.records[0].expected_benchmarks == 3


@pytest.mark.parametrize("before, then, rate", [
    (23, 90.0, 0.5), (38, 90.0, 0.0), (28, 100.0, None), (28, 101.0, None),
], ids=["rate", "fewer-rows", "same-time", "later"])
def test_build_status_rate_from_the_previous_snapshot(versions, before, then, rate):
    previous = _report([_record(durable=before)])
    previous = StatusReport(**{**previous.__dict__, "observed_at": then})
    report = build_status("/c", SUITE, models=["m"], seeds=[1, 2], benchmarks=["a", "b"], reader=_reader(),
                          previous=previous, now=100.0)
    assert report.durable_rows == 28 and report.rows_per_second == rate


def test_build_status_warns_of_odd_files(versions):
    reader = _reader(odd={SliceKey("m", 2, "b"): ["/c/x: is a FIFO, not a regular file"]})
    report = build_status("/c", SUITE, models=["m"], seeds=[1, 2], benchmarks=["a", "b"], reader=reader, now=1.0)
    assert report.warnings == ("/c/x: is a FIFO, not a regular file (counted as absent; move it away to regenerate "
                               "or rescore the slice)",)


@pytest.mark.parametrize("utilisations, seeds, warned", [
    ((9, 0), [1, 2], True), ((10, 0), [1, 2], False), ((9, 50), [1, 2], False), ((0,), [2], False), ((), [1], False),
], ids=["low", "at-threshold", "one-busy", "complete", "no-gpus"])
def test_build_status_warns_of_idle_gpus_while_generation_is_incomplete(versions, utilisations, seeds, warned):
    gpus = tuple({"index": i, "utilization": u} for i, u in enumerate(utilisations))
    report = build_status("/c", SUITE, models=["m"], seeds=seeds, benchmarks=["a", "b"], reader=_reader(), gpus=gpus,
                          now=1.0)
    assert report.gpus == gpus
    expected = ("generation is incomplete while every GPU is below 10% utilisation",) if warned else ()
    assert report.warnings == expected


def test_build_status_low_gpu_threshold_is_configurable(versions):
    gpus = ({"index": 0, "utilization": 30},)
    report = build_status("/c", SUITE, models=["m"], seeds=[1], benchmarks=["a", "b"], reader=_reader(), gpus=gpus,
                          low_gpu_threshold=31, now=1.0)
    assert report.warnings == ("generation is incomplete while every GPU is below 31% utilisation",)
