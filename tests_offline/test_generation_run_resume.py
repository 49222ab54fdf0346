"""Resumable generation: SIGKILL mid-slice, resume, and end with every row exactly once.

The backend here is a slow deterministic stub defined in the child script: this tests the runner and the
store (durability, torn-line repair, resume), not an engine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trace_lib.slices import ModelDescriptor
from trace_lib.slices import Slice
from trace_lib.errors import BackendError
from trace_lib.generation.request import GenerationResult
from trace_lib.generation.run import open_slice_store, run_generation
from trace_lib.generation.store import load_responses, response_path
from trace_lib.release.suite import load_suite
from trace_lib.testing.crash import sigkill_once
from trace_lib.testing.tiny_bench import build_tiny_tsv, tiny_tsv_protocol

ROWS = 240
MODEL = ModelDescriptor("stub-model", "/nonexistent", "c" * 40, f"org/repo@{'c' * 40}", "Stub")
SLICE = Slice("stub-model", 42, "tiny")

CHILD = r"""
import json, sys, time
from pathlib import Path
from trace_lib.slices import ModelDescriptor
from trace_lib.slices import Slice
from trace_lib.generation.request import GenerationResult
from trace_lib.generation.run import open_slice_store, run_generation
from trace_lib.testing.tiny_bench import tiny_tsv_protocol

data, campaign, generation = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])

class SlowStub:
    name = "stub"
    def generate(self, requests):
        for r in requests:
            time.sleep(0.004)
            yield GenerationResult(r.request_id, f"resp:{r.request_id}:{r.seed}", "stop", 5, 3)
    def close(self):
        pass

model = ModelDescriptor("stub-model", "/nonexistent", "c" * 40, "org/repo@" + "c" * 40, "Stub")
slice_ = Slice("stub-model", 42, "tiny")
protocol = tiny_tsv_protocol("tiny")
with open_slice_store(campaign, slice_, model, generation) as store:
    run = run_generation(slice_, protocol.load(data / "tiny.tsv"), protocol, SlowStub(), store, data / "images",
                         generation=generation, progress=False, batch_size=5, flush_interval_s=0.02)
print(json.dumps({"reused": run.reused, "generated": run.generated, "repaired": run.repaired_bytes}))
"""


class Stub:
    name = "stub"

    def __init__(self, *, skip: int | None = None, extra: bool = False) -> None:
        self.skip, self.extra, self.sent = skip, extra, 0

    def generate(self, requests):
        for i, r in enumerate(requests):
            self.sent += 1
            if i == self.skip:
                continue
            yield GenerationResult(r.request_id, f"resp:{r.request_id}:{r.seed}", "stop", 5, 3)
        if self.extra:
            yield GenerationResult("not-sent", "x", "stop", 1, 1)

    def close(self):
        pass


@pytest.fixture(scope="module")
def generation(release):
    return dict(load_suite(release).generation)


@pytest.fixture
def data(tmp_path):
    build_tiny_tsv(tmp_path / "data" / "tiny.tsv", style="mcq", rows=ROWS)
    return tmp_path / "data"


def _stored_lines(path: Path) -> int:
    try:
        return max(0, path.read_bytes().count(b"\n") - 1)
    except FileNotFoundError:
        return 0


def _child(data: Path, campaign: Path, generation: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, str(data), str(campaign), json.dumps(generation)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigkill_mid_slice_then_resume_loses_and_duplicates_nothing(data, tmp_path, generation):
    campaign = tmp_path / "campaign"
    path = response_path(campaign, model=SLICE.model, seed=SLICE.seed, benchmark=SLICE.benchmark)
    sigkill_once(_child(data, campaign, generation), lambda: _stored_lines(path), 40)
    first = _stored_lines(path)
    assert 40 <= first < ROWS
    with open(path, "ab") as handle:  # what a kill during a write leaves behind
        handle.write(b'{"kind":"row","row_key":"000000')
    sigkill_once(_child(data, campaign, generation), lambda: _stored_lines(path), first + 60)
    proc = _child(data, campaign, generation)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    final = json.loads(out.splitlines()[-1])
    assert final["reused"] + final["generated"] == ROWS

    rows = load_responses(path)
    keys = [r.row_key for r in rows]
    assert len(rows) == ROWS and len(set(keys)) == ROWS  # zero lost, zero duplicated
    assert _stored_lines(path) == ROWS  # no superseded or torn line left in the file
    assert [r.ordinal for r in rows] == list(range(ROWS))
    assert all(r.response == f"resp:{r.row_key}:42" for r in rows)


def test_rerun_of_a_complete_slice_generates_nothing(data, tmp_path, generation):
    protocol = tiny_tsv_protocol("tiny")
    rows = protocol.load(data / "tiny.tsv")
    with open_slice_store(tmp_path, SLICE, MODEL, generation) as store:
        first = run_generation(SLICE, rows, protocol, Stub(), store, data / "images", generation=generation,
                               progress=False)
    stub = Stub()
    with open_slice_store(tmp_path, SLICE, MODEL, generation) as store:
        second = run_generation(SLICE, rows, protocol, stub, store, data / "images", generation=generation,
                                progress=False)
    assert (first.generated, second.generated, second.reused, stub.sent) == (ROWS, 0, ROWS, 0)
    assert second.complete


def test_changed_request_regenerates_only_that_row(data, tmp_path, generation):
    protocol = tiny_tsv_protocol("tiny")
    rows = protocol.load(data / "tiny.tsv")
    with open_slice_store(tmp_path, SLICE, MODEL, generation) as store:
        run_generation(SLICE, rows, protocol, Stub(), store, data / "images", generation=generation, progress=False)
    rows[5] = {**rows[5], "question": rows[5]["question"] + " (edited)"}
    with open_slice_store(tmp_path, SLICE, MODEL, generation) as store:
        result = run_generation(SLICE, rows, protocol, Stub(), store, data / "images", generation=generation,
                                progress=False)
    assert (result.dropped, result.generated, result.reused) == (1, 1, ROWS - 1)


def test_unanswered_request_is_an_error_but_answers_are_kept(data, tmp_path, generation):
    protocol = tiny_tsv_protocol("tiny")
    rows = protocol.load(data / "tiny.tsv")[:20]
    with open_slice_store(tmp_path, SLICE, MODEL, generation) as store:
        with pytest.raises(BackendError, match="left requests unanswered"):
            run_generation(SLICE, rows, protocol, Stub(skip=3), store, data / "images", generation=generation,
                           progress=False)
    path = response_path(tmp_path, model=SLICE.model, seed=SLICE.seed, benchmark=SLICE.benchmark)
    assert len(load_responses(path)) == 19


def test_answer_to_an_unsent_request_is_an_error(data, tmp_path, generation):
    protocol = tiny_tsv_protocol("tiny")
    rows = protocol.load(data / "tiny.tsv")[:4]
    with open_slice_store(tmp_path, SLICE, MODEL, generation) as store:
        with pytest.raises(BackendError, match="answered a request it was not sent"):
            run_generation(SLICE, rows, protocol, Stub(extra=True), store, data / "images", generation=generation,
                           progress=False)


def test_a_cell_that_does_not_decode_is_named_by_its_benchmark(tmp_path):
    from dataclasses import replace as dc_replace

    from trace_lib.errors import InputError
    from trace_lib.generation.run import prepare_rows
    from trace_lib.testing.tiny_bench import tiny_tsv_protocol

    def broken_prompt(row, image_dir):
        raise InputError("image cell is not a decodable base64 image (Error)", field=f"rows[{row['index']}].image")

    protocol = dc_replace(tiny_tsv_protocol("tinya"), build_prompt=broken_prompt)
    with pytest.raises(InputError) as refused:
        prepare_rows([{"index": 5, "question": "q"}], protocol, tmp_path, served_name="m", generation={}, seed=42)
    assert refused.value.render() == "tinya.rows[5].image: image cell is not a decodable base64 image (Error)"
