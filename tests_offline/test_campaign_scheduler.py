"""The campaign scheduler on a deterministic fake backend: interleaving across slices, stores identical to the
per-slice path, per-slice errors, a fresh slice queued while it is prepared, reuse on re-run, and SIGKILL
mid-campaign then resume (nothing lost or duplicated)."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from trace_lib.slices import ModelDescriptor
from trace_lib.slices import Slice
from trace_lib.campaign.scheduler import CampaignScheduler, SliceJob
from trace_lib.generation.run import open_slice_store, run_generation
from trace_lib.generation.store import load_responses, response_path
from trace_lib.release.suite import load_suite
from trace_lib.testing.crash import sigkill_once
from trace_lib.testing.fake_backend import FakeStreamBackend, fake_answer
from trace_lib.testing.tiny_bench import build_tiny_tsv, tiny_tsv_protocol

pytestmark = pytest.mark.offline

MODEL = ModelDescriptor("fake-model", "/nonexistent", "c" * 40, f"org/repo@{'c' * 40}", "Fake")
SLICES = [Slice("fake-model", seed, bench) for seed in (42, 43) for bench in ("tinya", "tinyb")]
ROWS = {"tinya": 10, "tinyb": 7}


@pytest.fixture(scope="module")
def generation(release):
    return dict(load_suite(release).generation)


@pytest.fixture
def data(tmp_path):
    for bench, rows in ROWS.items():
        build_tiny_tsv(tmp_path / "data" / f"{bench}.tsv", style="mcq", rows=rows, seed=len(bench) + rows)
    return tmp_path / "data"


def jobs(campaign: Path, data: Path, generation: dict, slices=SLICES) -> list[SliceJob]:
    out = []
    for slice_ in slices:
        protocol = tiny_tsv_protocol(slice_.benchmark)
        table = data / f"{slice_.benchmark}.tsv"
        out.append(SliceJob(
            slice=slice_, protocol=protocol, load_rows=lambda table=table, p=protocol: p.load(table),
            image_dir=data / "images", generation=generation,
            open_store=lambda s=slice_: open_slice_store(campaign, s, MODEL, generation),
        ))
    return out


def _rows_bytes(path: Path) -> tuple[dict, bytes]:
    header, _, rows = path.read_bytes().partition(b"\n")
    record = json.loads(header)
    record.pop("created_at")
    return record, rows


def test_slices_share_engine_windows_and_results_reach_their_stores(data, tmp_path, generation):
    backend = FakeStreamBackend(window=16)
    done = []
    results = CampaignScheduler(backend, on_complete=done.append).run(jobs(tmp_path / "c", data, generation))
    assert [r.ok for r in results] == [True] * 4 and sorted(r.slice.id for r in done) == sorted(s.id for s in SLICES)
    mixed = [w for w in backend.windows if len({rid.split("|")[0] for rid in w}) > 1]
    assert mixed, backend.windows  # a window held rows of two slices
    for slice_ in SLICES:
        stored = load_responses(response_path(tmp_path / "c", model=slice_.model, seed=slice_.seed,
                                              benchmark=slice_.benchmark))
        assert len(stored) == ROWS[slice_.benchmark]
        assert all(r.response.startswith(f"seed {slice_.seed}: ") for r in stored)


def test_stores_equal_the_per_slice_path_byte_for_byte(data, tmp_path, generation):
    CampaignScheduler(FakeStreamBackend(window=5), batch_size=3).run(jobs(tmp_path / "stream", data, generation))
    for job in jobs(tmp_path / "per-slice", data, generation):
        with job.open_store() as store:
            run_generation(job.slice, job.load_rows(), job.protocol, FakeStreamBackend(), store, job.image_dir,
                           generation=generation, progress=False)
    for slice_ in SLICES:
        paths = [response_path(tmp_path / root, model=slice_.model, seed=slice_.seed, benchmark=slice_.benchmark)
                 for root in ("stream", "per-slice")]
        assert _rows_bytes(paths[0]) == _rows_bytes(paths[1])
        rows = load_responses(paths[0])
        assert len({r.request_hash for r in rows}) == ROWS[slice_.benchmark]


def test_rerun_reuses_everything_and_sends_nothing(data, tmp_path, generation):
    CampaignScheduler(FakeStreamBackend()).run(jobs(tmp_path, data, generation))
    backend = FakeStreamBackend()
    results = CampaignScheduler(backend).run(jobs(tmp_path, data, generation))
    assert [(r.run.generated, r.run.reused) for r in results] == [(0, ROWS[s.benchmark]) for s in SLICES]
    assert backend.answered == 0


def test_unanswered_row_fails_only_its_slice(data, tmp_path, generation):
    skip = "|00000003:"  # row 3 of the first slice only (ids are "<slot>|<row key>")
    results = CampaignScheduler(_SkipFirst(FakeStreamBackend(), "0" + skip)).run(jobs(tmp_path, data, generation))
    assert [r.ok for r in results] == [False, True, True, True]
    assert "backend left requests unanswered" in results[0].error.render()
    path = response_path(tmp_path, model=MODEL.slug, seed=42, benchmark="tinya")
    assert len(load_responses(path)) == ROWS["tinya"] - 1  # every answer received is kept


def test_answer_to_an_unsent_request_fails_the_unfinished_slices(data, tmp_path, generation):
    results = CampaignScheduler(FakeStreamBackend(window=4, unknown_after=5)).run(jobs(tmp_path, data, generation))
    assert not any(r.ok for r in results)
    assert "backend answered a request it was not sent" in results[0].error.render()


class _SkipFirst:
    name = "fake"

    def __init__(self, inner: FakeStreamBackend, prefix: str) -> None:
        self.inner, self.prefix = inner, prefix

    def generate_stream(self, feed):  # noqa: ANN001, ANN201
        for result in self.inner.generate_stream(feed):
            if not result.request_id.startswith(self.prefix):
                yield result


CHILD = r"""
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[4])
from test_campaign_scheduler import jobs
from trace_lib.campaign.scheduler import CampaignScheduler
from trace_lib.testing.fake_backend import FakeStreamBackend
results = CampaignScheduler(FakeStreamBackend(window=8, delay_s=0.003), batch_size=4, flush_interval_s=0.02).run(
    jobs(Path(sys.argv[2]), Path(sys.argv[1]), json.loads(sys.argv[3])))
print(json.dumps([[r.run.reused, r.run.generated] for r in results]))
"""


def _stored(campaign: Path) -> int:
    return sum(max(0, p.read_bytes().count(b"\n") - 1) for p in campaign.rglob("*.jsonl"))


def _child(data: Path, campaign: Path, generation: dict) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                        os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, "-c", CHILD, str(data), str(campaign), json.dumps(generation),
                             str(Path(__file__).parent)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def test_sigkill_mid_campaign_then_resume_loses_and_duplicates_nothing(data, tmp_path, generation):
    campaign = tmp_path / "campaign"
    total = sum(ROWS[s.benchmark] for s in SLICES)
    sigkill_once(_child(data, campaign, generation), lambda: _stored(campaign), 12)
    first = _stored(campaign)
    assert 12 <= first < total
    torn = response_path(campaign, model=MODEL.slug, seed=42, benchmark="tinyb")
    if torn.exists():
        with open(torn, "ab") as handle:  # what a kill during a write leaves behind
            handle.write(b'{"kind":"row","row_key":"000000')
    proc = _child(data, campaign, generation)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    summary = json.loads(out.splitlines()[-1])
    assert sum(reused for reused, _ in summary) == first and sum(map(sum, summary)) == total
    for slice_ in SLICES:
        path = response_path(campaign, model=slice_.model, seed=slice_.seed, benchmark=slice_.benchmark)
        rows = load_responses(path)
        assert [r.ordinal for r in rows] == list(range(ROWS[slice_.benchmark]))  # none lost, none twice
        assert path.read_bytes().count(b"\n") == ROWS[slice_.benchmark] + 1  # no torn or superseded line left
        protocol = tiny_tsv_protocol(slice_.benchmark)
        from trace_lib.generation.run import prepare_rows

        prepared = prepare_rows(protocol.load(data / f"{slice_.benchmark}.tsv"), protocol, data / "images",
                                served_name=MODEL.slug, generation=generation, seed=slice_.seed)
        assert [r.response for r in rows] == [fake_answer(p.request) for p in prepared]


def test_progress_line_counts_rows_tokens_and_slices(data, tmp_path, generation):
    import io

    from trace_lib.campaign.scheduler import CampaignProgress

    stream = io.StringIO()
    total = sum(ROWS[s.benchmark] for s in SLICES)
    progress = CampaignProgress("fake-model", expected_rows=total, slices=len(SLICES), interval_s=3600,
                                stream=stream)
    CampaignScheduler(FakeStreamBackend(), progress=progress).run(jobs(tmp_path, data, generation))
    last = stream.getvalue().splitlines()[-1]
    assert last.startswith(f"[generate] fake-model: 4/4 slices, {total}/{total} rows (0 reused), ")
    assert "rows/s" in last and "output tokens/s" in last and last.endswith("ETA 0:00:00")
    assert progress.tokens == 7 * total  # the fake engine's completion_tokens per row


def _with_build_prompt(job: SliceJob, build_prompt) -> SliceJob:  # noqa: ANN001
    from dataclasses import replace

    return replace(job, protocol=replace(job.protocol, build_prompt=build_prompt))


def test_a_fresh_slice_reaches_the_engine_before_its_last_row_is_prepared(data, tmp_path, generation):
    import threading

    answered_one = threading.Event()
    waited: list[bool] = []
    [job] = jobs(tmp_path, data, generation, slices=SLICES[:1])
    build = job.protocol.build_prompt

    def build_prompt(row, image_dir):  # noqa: ANN001, ANN202 - row 4 on waits for an answer to an earlier row
        if int(row["index"]) >= 4 and not waited:
            waited.append(answered_one.wait(timeout=20))
        return build(row, image_dir)

    class _Signalling(FakeStreamBackend):
        def _answer(self, request):  # noqa: ANN001, ANN202
            answered_one.set()
            return super()._answer(request)

    [result] = CampaignScheduler(_Signalling(window=4), chunk_rows=4).run([_with_build_prompt(job, build_prompt)])
    assert waited == [True]  # the first chunk was answered while the slice was still being prepared
    assert result.ok and (result.run.rows, result.run.generated) == (ROWS["tinya"], ROWS["tinya"])


def test_a_row_failing_after_earlier_chunks_ends_only_its_slice_and_keeps_the_rows_queued(data, tmp_path, generation):
    from trace_lib.errors import InputError

    first, *others = jobs(tmp_path, data, generation)
    build = first.protocol.build_prompt

    def build_prompt(row, image_dir):  # noqa: ANN001, ANN202
        if int(row["index"]) == 6:
            raise InputError("prompt image does not exist", field="tinya[6]")
        return build(row, image_dir)

    results = CampaignScheduler(FakeStreamBackend(window=2), chunk_rows=3).run(
        [_with_build_prompt(first, build_prompt), *others])
    assert [r.ok for r in results] == [False, True, True, True]
    assert results[0].error.render() == "tinya[6]: prompt image does not exist"
    path = response_path(tmp_path, model=MODEL.slug, seed=42, benchmark="tinya")
    assert [r.ordinal for r in load_responses(path)] == [0, 1, 2, 3, 4, 5]  # the two chunks queued before row 6
    rerun = CampaignScheduler(FakeStreamBackend()).run(jobs(tmp_path, data, generation, slices=SLICES[:1]))
    assert (rerun[0].run.reused, rerun[0].run.generated) == (6, ROWS["tinya"] - 6)


def test_the_seeds_of_a_benchmark_are_queued_in_lockstep_chunks(data, tmp_path, generation):
    backend = FakeStreamBackend(window=1)
    results = CampaignScheduler(backend, chunk_rows=3).run(jobs(tmp_path, data, generation))
    assert all(r.ok for r in results)
    order = [(rid.split("|")[0], int(rid.split("|")[1].split(":")[0])) for [rid] in backend.windows]
    # slots 0 and 2 are tinya at seeds 42 and 43; 1 and 3 are tinyb: rows 0-2 of both seeds, then 3-5, ...
    assert order[:12] == [("0", 0), ("0", 1), ("0", 2), ("2", 0), ("2", 1), ("2", 2),
                          ("0", 3), ("0", 4), ("0", 5), ("2", 3), ("2", 4), ("2", 5)]
    assert [slot for slot, _ in order[2 * ROWS["tinya"]:]] == ["1"] * 3 + ["3"] * 3 + ["1"] * 3 + ["3"] * 3 + ["1", "3"]


def test_a_crash_while_preparing_propagates_and_releases_every_store(data, tmp_path, generation):
    first, second, *rest = jobs(tmp_path, data, generation)

    def broken(row, image_dir):  # noqa: ANN001, ANN202 - a bug, not a user error
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        CampaignScheduler(FakeStreamBackend(), chunk_rows=3).run([first, _with_build_prompt(second, broken), *rest])
    for job in jobs(tmp_path, data, generation):  # every store lock was released: each opens again
        job.open_store().close()


# -- faults stay in their slice; results once final are never replaced (issue 25) -----------------------------

def test_a_request_the_endpoint_always_refuses_fails_only_its_slice(data, tmp_path, generation):
    from trace_lib.generation.backends.openai import OpenAIBackend
    from trace_lib.generation.run import prepare_rows
    from trace_lib.testing.openai_server import OpenAIStubServer, StubHTTPError

    protocol = tiny_tsv_protocol("tinya")
    poison = prepare_rows(protocol.load(data / "tinya.tsv"), protocol, data / "images", served_name=MODEL.slug,
                          generation=generation, seed=42)[3].request.payload(MODEL.slug)

    def responder(route, body):  # noqa: ANN001, ANN202 - row 3 of tinya at seed 42 is always refused
        if body == poison:
            raise StubHTTPError(400, "poison row")
        return "So the answer is A."

    with OpenAIStubServer(responder, model=MODEL.slug) as server:
        backend = OpenAIBackend(model_path="unused", served_name=MODEL.slug, base_url=server.url, concurrency=4,
                                retry_sleep_cap_s=0.0)
        results = CampaignScheduler(backend, chunk=3, chunk_rows=2).run(jobs(tmp_path, data, generation))
    assert [r.ok for r in results] == [False, True, True, True]
    message = results[0].error.render()
    assert message.startswith("openai: 1 request(s) failed; first '00000003:") and "HTTP 400" in message
    assert "poison row" in message and "\n" not in message
    for slice_, result in zip(SLICES, results):
        stored = load_responses(response_path(tmp_path, model=MODEL.slug, seed=slice_.seed,
                                              benchmark=slice_.benchmark))
        expected = [o for o in range(ROWS[slice_.benchmark]) if result.ok or o != 3]
        assert [r.ordinal for r in stored] == expected  # every good row of every slice was stored


class _Twice(FakeStreamBackend):
    """Answers one request twice, the second time right after the first (same slice, nothing flushed between)."""

    def generate_stream(self, feed):  # noqa: ANN001, ANN201
        for number, result in enumerate(super().generate_stream(feed)):
            yield result
            if number == 2:
                yield result


def test_a_request_answered_twice_is_detected(data, tmp_path, generation):
    results = CampaignScheduler(_Twice(), batch_size=64).run(jobs(tmp_path, data, generation))
    assert not any(r.ok for r in results)
    assert results[0].error.render().startswith("fake: backend answered a request twice (found '0|00000002:")


class _CrashAfterFirstSlice(FakeStreamBackend):
    """Answers every request of slot 0, then fails (the engine died)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(window=1)
        self.error = error

    def generate_stream(self, feed):  # noqa: ANN001, ANN201
        for result in super().generate_stream(feed):
            if not result.request_id.startswith("0|"):
                raise self.error
            yield result


@pytest.mark.parametrize("error", [RuntimeError("engine died"), None], ids=["crash", "backend-error"])
def test_a_late_failure_never_replaces_a_completed_slice(data, tmp_path, generation, error):
    from trace_lib.errors import BackendError

    error = error or BackendError("engine died", field="fake")
    done = []
    scheduler = CampaignScheduler(_CrashAfterFirstSlice(error), on_complete=done.append)
    if isinstance(error, RuntimeError):
        with pytest.raises(RuntimeError):
            scheduler.run(jobs(tmp_path, data, generation))
        results = [scheduler._results[slot] for slot in sorted(scheduler._results)]
    else:
        results = scheduler.run(jobs(tmp_path, data, generation))
    assert results[0].ok and results[0].run.generated == ROWS["tinya"]
    assert not any(r.ok for r in results[1:])
    assert sorted(r.slice.id for r in done) == sorted({r.slice.id for r in done})  # each slice handed over once
    assert [r for r in done if r.slice == SLICES[0]] == [results[0]]


def test_a_request_the_vllm_engine_refuses_when_added_fails_only_its_slices(data, tmp_path, generation, monkeypatch):
    """vLLM raises at add time for a prompt longer than max_model_len: only the slices of that row fail, with one
    line, and every other row of every slice is stored (the model's stream goes on)."""
    from trace_lib.generation.run import prepare_rows
    from trace_lib.testing.stub_vllm import StubLLM, stub_vllm_module

    monkeypatch.setitem(sys.modules, "vllm", stub_vllm_module())
    from trace_lib.generation.backends.vllm import VLLMBackend

    protocol = tiny_tsv_protocol("tinya")
    messages = prepare_rows(protocol.load(data / "tinya.tsv"), protocol, data / "images", served_name=MODEL.slug,
                            generation=generation, seed=42)[3].request.messages_json()
    text = next(item["text"] for m in messages for item in m["content"] if item.get("type") == "text")
    llm = StubLLM(per_step=2, refuse=text)  # row 3 of tinya (at both seeds: they share the prompt)
    backend = VLLMBackend(model_path="stub", served_name=MODEL.slug, llm=llm, max_num_seqs=4)
    results = CampaignScheduler(backend, chunk=3, chunk_rows=2).run(jobs(tmp_path, data, generation))
    assert [r.ok for r in results] == [False, True, False, True]
    message = results[0].error.render()
    assert message.startswith("vllm: 1 request(s) failed; first '00000003:") and "maximum model length" in message
    assert "\n" not in message
    for slice_, result in zip(SLICES, results):
        stored = load_responses(response_path(tmp_path, model=MODEL.slug, seed=slice_.seed,
                                              benchmark=slice_.benchmark))
        expected = [o for o in range(ROWS[slice_.benchmark]) if result.ok or o != 3]
        assert [r.ordinal for r in stored] == expected


class _DiesAtStart(FakeStreamBackend):
    """The engine fails before it answers anything (a streaming start that fails)."""

    def generate_stream(self, feed):  # noqa: ANN001, ANN201
        from trace_lib.errors import BackendError

        feed.take(1, wait=True)
        raise BackendError("engine died at start", field="fake")
        yield  # a generator, as a backend's stream is


class _DiesWhenToldTo(_DiesAtStart):
    """Fails on its first request once ``go`` is set (the test decides when the writer stops)."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()

    def generate_stream(self, feed):  # noqa: ANN001, ANN201
        from trace_lib.errors import BackendError

        feed.take(1, wait=True)
        assert self.go.wait(10), "the test never let the engine die"
        raise BackendError("engine died at start", field="fake")
        yield


def test_a_store_opened_as_the_run_stops_is_closed_with_its_lock(data, tmp_path, generation):
    """The producer is opening tinyb/42 when the engine dies (on tinya's first request) and sees the stop before
    it hands that store over: it closes the store itself, so no lock and no empty response file stay behind."""
    backend = _DiesWhenToldTo()
    scheduler = CampaignScheduler(backend, chunk=3, chunk_rows=2)
    todo = jobs(tmp_path, data, generation)  # slots: tinya/42, tinyb/42, tinya/43, tinyb/43; groups by benchmark
    opened = todo[1].open_store

    def open_as_the_run_stops():
        backend.go.set()
        assert scheduler._stop.wait(10), "the writer never stopped"  # noqa: SLF001 - the race under test
        return opened()

    todo[1] = dataclasses.replace(todo[1], open_store=open_as_the_run_stops)
    results = scheduler.run(todo)
    assert not any(r.ok for r in results)
    assert [p.name for p in (tmp_path / "generation").rglob("*") if p.is_file()] == []


def test_a_stream_that_fails_before_any_row_leaves_no_file_it_created(data, tmp_path, generation):
    """No header-only response file and no lock from a failed start; a header-only file an earlier run created
    (tinyb at seed 43) is kept for the resume, and the re-run then completes every slice."""
    earlier = jobs(tmp_path, data, generation)[3].open_store()
    earlier.close()
    results = CampaignScheduler(_DiesAtStart(), chunk=3, chunk_rows=2).run(jobs(tmp_path, data, generation))
    assert not any(r.ok for r in results) and "engine died at start" in results[0].error.render()
    files = sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "generation").rglob("*") if p.is_file())
    assert files == ["generation/seed_43/fake-model/tinyb.jsonl"]
    results = CampaignScheduler(FakeStreamBackend(), chunk=3).run(jobs(tmp_path, data, generation))
    assert all(r.ok for r in results)


def test_a_store_that_fails_to_open_fails_only_its_slice(data, tmp_path, generation):
    from trace_lib.errors import InputError

    def refuse():
        raise InputError("store is locked by another run", field="tinyb/42")

    todo = jobs(tmp_path, data, generation)
    todo[1] = dataclasses.replace(todo[1], open_store=refuse)
    results = CampaignScheduler(FakeStreamBackend()).run(todo)
    assert [r.ok for r in results] == [True, False, True, True]
    assert results[1].error.render() == "tinyb/42: store is locked by another run"


def test_a_rerun_with_nothing_to_generate_releases_every_store_and_counts_it(data, tmp_path, generation):
    import io

    from trace_lib.campaign.scheduler import CampaignProgress

    CampaignScheduler(FakeStreamBackend()).run(jobs(tmp_path, data, generation))
    stream, total = io.StringIO(), sum(ROWS[s.benchmark] for s in SLICES)
    progress = CampaignProgress("fake-model", expected_rows=total, slices=len(SLICES), interval_s=3600,
                                stream=stream)
    results = CampaignScheduler(FakeStreamBackend(), progress=progress).run(jobs(tmp_path, data, generation))
    assert all(r.ok for r in results)
    last = stream.getvalue().splitlines()[-1]
    assert last.startswith(f"[generate] fake-model: 4/4 slices, {total}/{total} rows ({total} reused), ")
    for job in jobs(tmp_path, data, generation):  # every store lock was released: each opens again
        job.open_store().close()


def test_a_slice_whose_rows_fail_to_load_releases_its_store_and_leaves_no_file(data, tmp_path, generation):
    from trace_lib.errors import InputError

    def broken():
        raise InputError("table is truncated", field="tinyb.tsv")

    todo = jobs(tmp_path, data, generation)
    todo[1] = dataclasses.replace(todo[1], load_rows=broken)
    results = CampaignScheduler(FakeStreamBackend()).run(todo)
    assert [r.ok for r in results] == [True, False, True, True]
    assert not response_path(tmp_path, model=MODEL.slug, seed=42, benchmark="tinyb").exists()
    jobs(tmp_path, data, generation)[1].open_store().close()  # its lock was released


def test_a_slice_with_no_rows_completes_empty(data, tmp_path, generation):
    todo = jobs(tmp_path, data, generation)
    todo[1] = dataclasses.replace(todo[1], load_rows=lambda: [])
    results = CampaignScheduler(FakeStreamBackend()).run(todo)
    assert all(r.ok for r in results) and (results[1].run.rows, results[1].run.generated) == (0, 0)


def test_a_row_count_that_differs_from_the_manifest_fails_the_slice_before_anything_is_sent(data, tmp_path,
                                                                                           generation):
    from types import SimpleNamespace

    [job] = jobs(tmp_path, data, generation, slices=SLICES[:1])
    manifest = SimpleNamespace(key="tinya", row_media=[])  # what ManifestCheck.row_count reads of an entry
    backend = FakeStreamBackend()
    [result] = CampaignScheduler(backend).run([dataclasses.replace(job, dataset=manifest, data_root=data)])
    assert result.error.render() == "tinya: row count differs from the dataset manifest (expected 0, found 10)"
    assert backend.answered == 0


def test_a_stop_while_preparing_prepares_no_further_row(data, tmp_path, generation):
    [job] = jobs(tmp_path, data, generation, slices=SLICES[:1])
    build, built = job.protocol.build_prompt, []
    scheduler = CampaignScheduler(FakeStreamBackend(), chunk_rows=1)

    def build_prompt(row, image_dir):  # noqa: ANN001, ANN202 - the run is stopped while row 3 is prepared
        built.append(int(row["index"]))
        if built[-1] == 3:
            scheduler.stop()
        return build(row, image_dir)

    [result] = scheduler.run([_with_build_prompt(job, build_prompt)])
    assert built == [0, 1, 2, 3]
    assert not result.ok and "generation stopped" in result.error.render()


def test_a_stop_from_on_complete_ends_the_other_slices_as_stopped(data, tmp_path, generation):
    scheduler = CampaignScheduler(FakeStreamBackend(window=1), on_complete=lambda result: scheduler.stop())
    results = scheduler.run(jobs(tmp_path, data, generation))
    assert results[0].ok and results[0].run.generated == ROWS["tinya"]
    assert [r.error.render() for r in results[1:]] == [
        "fake: generation stopped; re-run to generate the missing rows"] * 3


class _AnswersStored(FakeStreamBackend):
    """Answers, before the request it was sent, one request for a row already stored (``stored``, a row key)."""

    def __init__(self, stored: str) -> None:
        super().__init__()
        self.stored = stored

    def generate_stream(self, feed):  # noqa: ANN001, ANN201
        for result in super().generate_stream(feed):
            yield dataclasses.replace(result, request_id=f"0|{self.stored}")
            yield result


def test_an_answer_to_a_row_already_stored_is_refused(data, tmp_path, generation):
    first = jobs(tmp_path, data, generation, slices=SLICES[:1])
    CampaignScheduler(_SkipFirst(FakeStreamBackend(), "0|00000003:")).run(first)
    path = response_path(tmp_path, model=MODEL.slug, seed=42, benchmark="tinya")
    stored = load_responses(path)
    [result] = CampaignScheduler(_AnswersStored(stored[0].row_key)).run(jobs(tmp_path, data, generation,
                                                                            slices=SLICES[:1]))
    assert result.error.render().startswith("fake: backend answered a request it was not sent (found '0|00000000:")
    assert load_responses(path) == stored


class _RefusedThenAnswered(FakeStreamBackend):
    """Reports the third request as refused, then answers it anyway."""

    def generate_stream(self, feed):  # noqa: ANN001, ANN201
        from trace_lib.generation.request import RequestFailure

        for number, result in enumerate(super().generate_stream(feed)):
            if number == 2:
                yield RequestFailure(result.request_id, "refused")
            yield result


def test_an_answer_after_a_failure_of_the_same_request_is_detected(data, tmp_path, generation):
    results = CampaignScheduler(_RefusedThenAnswered(), batch_size=64).run(jobs(tmp_path, data, generation))
    assert not any(r.ok for r in results)
    assert results[0].error.render().startswith("fake: backend answered a request twice (found '0|00000002:")


class _CountsStoredRows(FakeStreamBackend):
    """One request at a time; before each answer, records how many rows the first slice's file holds."""

    def __init__(self, path: Path) -> None:
        super().__init__(window=1)
        self.path, self.seen = path, []

    def generate_stream(self, feed):  # noqa: ANN001, ANN201
        for result in super().generate_stream(feed):
            if result.request_id.startswith("0|"):
                self.seen.append(len(load_responses(self.path)) if self.path.exists() else 0)
            yield result


def test_answers_are_made_durable_every_flush_interval_not_only_per_batch(data, tmp_path, generation):
    path = response_path(tmp_path, model=MODEL.slug, seed=42, benchmark="tinya")
    backend = _CountsStoredRows(path)
    [result] = CampaignScheduler(backend, batch_size=1000, flush_interval_s=0.0).run(
        jobs(tmp_path, data, generation, slices=SLICES[:1]))
    assert result.ok and backend.seen == list(range(ROWS["tinya"]))  # each answer stored before the next came


def _row_6_fails_once_row_5_is_answered(job: SliceJob) -> tuple[SliceJob, type[FakeStreamBackend]]:
    """``job`` with a prompt builder whose row 6 fails (a missing image) only after the backend's answer to row 5
    of slot 0 was taken by the writer, and the backend class that signals that answer."""
    from trace_lib.errors import InputError

    fifth_taken = threading.Event()
    build = job.protocol.build_prompt

    def build_prompt(row, image_dir):  # noqa: ANN001, ANN202
        if int(row["index"]) == 6:
            assert fifth_taken.wait(10), "row 5 was never answered"
            raise InputError("prompt image does not exist", field="tinya[6]")
        return build(row, image_dir)

    class _Signalling(FakeStreamBackend):
        def generate_stream(self, feed):  # noqa: ANN001, ANN201
            for result in super().generate_stream(feed):
                yield result  # resumed once the writer has taken this answer
                if result.request_id.startswith("0|00000005:"):
                    fifth_taken.set()

    return _with_build_prompt(job, build_prompt), _Signalling


def test_a_slice_answered_before_its_row_failed_to_prepare_is_handed_over_at_the_next_flush(data, tmp_path,
                                                                                           generation):
    """Row 6 of tinya/42 fails to prepare only after rows 0-5 are answered and stored: the slice is complete
    with its error at the next flush check, before the slices still generating end (not only when the run ends)."""
    first, *others = jobs(tmp_path, data, generation)
    failing, backend = _row_6_fails_once_row_5_is_answered(first)
    done = []
    CampaignScheduler(backend(window=1), chunk_rows=3, flush_interval_s=0.0, on_complete=done.append).run(
        [failing, *others])
    assert done[0].slice == SLICES[0] and done[0].error.render() == "tinya[6]: prompt image does not exist"


def test_a_slice_whose_rows_the_last_flush_lost_ends_with_the_disk_error(data, tmp_path, generation):
    """Rows 0-5 of tinya/42 are answered and still buffered when row 6 fails to prepare; the final flush then
    hits a full disk. The slice is handed over with the disk's error (its answers are gone), not completed as if
    only row 6 had failed, and the run re-raises that error."""
    from trace_lib.testing.faulty_file import enospc, inject

    [first] = jobs(tmp_path, data, generation, slices=SLICES[:1])
    failing, backend = _row_6_fails_once_row_5_is_answered(first)

    def open_store():  # noqa: ANN202
        store = first.open_store()
        inject(store, 0, enospc())  # the first append from now on fails
        return store

    done = []
    with pytest.raises(OSError) as raised:
        CampaignScheduler(backend(window=1), chunk_rows=3, batch_size=1000, flush_interval_s=1e9,
                          on_complete=done.append).run([dataclasses.replace(failing, open_store=open_store)])
    assert raised.value.errno == errno.ENOSPC
    assert [r.slice for r in done] == SLICES[:1] and done[0].error is raised.value
    assert not response_path(tmp_path, model=MODEL.slug, seed=42, benchmark="tinya").exists()  # no row stored


class _RecordsClose(FakeStreamBackend):
    def __init__(self, **kwargs) -> None:  # noqa: ANN003
        super().__init__(**kwargs)
        self.closed = False

    def generate_stream(self, feed):  # noqa: ANN001, ANN201
        try:
            yield from super().generate_stream(feed)
        finally:
            self.closed = True


def test_the_engine_stream_is_closed_before_the_failed_slices_are_handed_over(data, tmp_path, generation):
    backend = _RecordsClose(window=4, unknown_after=5)
    closed_when_handed = []
    CampaignScheduler(backend, on_complete=lambda r: closed_when_handed.append(backend.closed)).run(
        jobs(tmp_path, data, generation))
    assert closed_when_handed == [True] * len(SLICES)


def test_an_interrupt_propagates_and_hands_over_no_unfinished_slice(data, tmp_path, generation):
    done = []
    with pytest.raises(KeyboardInterrupt):
        CampaignScheduler(_CrashAfterFirstSlice(KeyboardInterrupt()), on_complete=done.append).run(
            jobs(tmp_path, data, generation))
    assert [r.slice for r in done] == [SLICES[0]] and done[0].ok


class _RefusesSlot(FakeStreamBackend):
    def __init__(self, slot: str) -> None:
        super().__init__()
        self.slot = slot

    def generate_stream(self, feed):  # noqa: ANN001, ANN201
        from trace_lib.generation.request import RequestFailure

        for result in super().generate_stream(feed):
            yield RequestFailure(result.request_id, "refused") if result.request_id.startswith(self.slot) else result


def test_a_slice_whose_every_request_was_refused_leaves_no_response_file(data, tmp_path, generation):
    results = CampaignScheduler(_RefusesSlot("1|")).run(jobs(tmp_path, data, generation))
    assert [r.ok for r in results] == [True, False, True, True]
    assert results[1].error.render().startswith("fake: 7 request(s) failed; first '00000000:")
    assert not response_path(tmp_path, model=MODEL.slug, seed=42, benchmark="tinyb").exists()


def test_chunk_rows_below_one_queues_one_row_at_a_time(data, tmp_path, generation):
    [result] = CampaignScheduler(FakeStreamBackend(), chunk_rows=0).run(jobs(tmp_path, data, generation,
                                                                             slices=SLICES[:1]))
    assert result.ok and result.run.generated == ROWS["tinya"]


def test_progress_eta_counts_reused_rows_as_done(monkeypatch):
    import io
    from types import SimpleNamespace

    import trace_lib.campaign.scheduler as scheduler_module
    from trace_lib.campaign.scheduler import CampaignProgress

    now = [100.0]
    monkeypatch.setattr(scheduler_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    progress = CampaignProgress("m", expected_rows=10 + 5 + 3723, slices=2, stream=io.StringIO())
    assert progress.line().endswith("0.0 rows/s, 0 output tokens/s, ETA unknown")
    now[0] += 10.0
    progress.update(generated=10, reused=5, tokens=70)
    assert progress.line() == ("[generate] m: 0/2 slices, 15/3738 rows (5 reused), 1.0 rows/s, "
                               "7 output tokens/s, ETA 1:02:03")
