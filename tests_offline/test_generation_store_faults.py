"""A failed or interrupted store write leaves the file exactly as it was, and no flush writes a batch twice.

Faults are injected at every byte offset of a batch through a wrapper around the store's raw append handle
(:mod:`trace_lib.testing.faulty_file`; no ``LD_PRELOAD``): ENOSPC (a disk that fills, then frees space) and
``KeyboardInterrupt`` (Ctrl-C timed to the write). A real, tiny tmpfs is filled when this machine lets the test
mount one. After each fault the slice is resumed: no row lost, none twice, and the file is accepted.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from trace_lib.slices import ModelDescriptor
from trace_lib.slices import Slice
from trace_lib.campaign.scheduler import CampaignScheduler, SliceJob
from trace_lib.generation.run import open_slice_store, run_generation
from trace_lib.generation.store import SliceIdentity, SliceStore, StoredResponse, load_responses, response_path
from trace_lib.release.suite import load_suite
from trace_lib.testing.faulty_file import enospc, inject
from trace_lib.testing.fake_backend import FakeStreamBackend
from trace_lib.testing.tiny_bench import build_tiny_tsv, tiny_tsv_protocol

IDENTITY = SliceIdentity(slice="m-seed42-b", model="m", model_revision="a" * 40, seed=42, benchmark="b",
                         contract={"temperature": 0.6, "seed": 42})
MODEL = ModelDescriptor("fake-model", "/nonexistent", "c" * 40, f"org/repo@{'c' * 40}", "Fake")
SLICE = Slice("fake-model", 42, "tinya")
ROWS = 9


def row(ordinal: int) -> StoredResponse:
    return StoredResponse(row_key=f"{ordinal:08d}:{ordinal}:{'0' * 16}", index=str(ordinal), ordinal=ordinal,
                          source_row_hash="0" * 64, request_hash=f"h{ordinal}", response=f"answer {ordinal} ✓",
                          finish_reason="stop", prompt_tokens=10, completion_tokens=3, model_revision="a" * 40,
                          backend="stub", prompt="q")


BATCH = [row(2), row(3), row(4)]
BATCH_BYTES = len(b"".join(r.to_line() for r in BATCH))


def _stored_once(path: Path, count: int) -> None:
    rows = load_responses(path)  # refuses two lines for one row and a corrupt line before the end
    assert [r.ordinal for r in rows] == list(range(count))
    assert path.read_bytes().count(b"\n") == count + 1  # nothing torn or superseded left behind
    with SliceStore.open(path, IDENTITY) as store:  # resume accepts the file as it is
        assert store.repaired_bytes == 0 and len(store.done) == count


@pytest.mark.parametrize("error", [enospc, KeyboardInterrupt], ids=["enospc", "sigint"])
def test_a_fault_at_every_byte_of_a_batch_leaves_the_file_as_it_was(tmp_path, monkeypatch, error):
    # fsync changes nothing this process reads back, and 2 x 1,093 offsets of real fsyncs took most of the lane's
    # longest test; that the batch's fsync is made, and rolled back when it fails, is the next test's.
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    for offset in range(BATCH_BYTES + 1):
        path = tmp_path / f"{offset}.jsonl"
        with SliceStore.open(path, IDENTITY) as store:
            store.append([row(0), row(1)])
            before = path.read_bytes()
            inject(store, offset, error())
            with pytest.raises(type(error())) as caught:
                store.append(BATCH)
            assert path.read_bytes() == before, offset
            if isinstance(caught.value, OSError):
                assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(path)
            assert store.append(BATCH) == 3  # the space came back: the same batch, re-tried, is written once
            assert store.append(BATCH) == 0  # a second flush of the same buffer writes nothing
        _stored_once(path, 5)


def test_a_failed_fsync_also_rolls_the_batch_back(tmp_path, monkeypatch):
    path = tmp_path / "s.jsonl"
    with SliceStore.open(path, IDENTITY) as store:
        store.append([row(0)])
        before = path.read_bytes()
        real = os.fsync
        calls = []

        def failing_fsync(fd):  # noqa: ANN001, ANN202 - only the first fsync fails (the batch's, not the roll-back's)
            calls.append(fd)
            if len(calls) == 1:
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            return real(fd)

        monkeypatch.setattr("trace_lib.generation.store.os.fsync", failing_fsync)
        with pytest.raises(OSError, match="Input/output error"):
            store.append([row(1)])
        assert path.read_bytes() == before
        monkeypatch.setattr("trace_lib.generation.store.os.fsync", real)
        store.append([row(1)])
    assert [r.ordinal for r in load_responses(path)] == [0, 1]


def test_a_different_row_for_a_stored_key_is_still_refused(tmp_path):
    with SliceStore.open(tmp_path / "s.jsonl", IDENTITY) as store:
        store.append(BATCH)
        with pytest.raises(Exception, match="row already stored"):
            store.append([row(3)])  # an equal row, but a new answer: the caller generated it twice


def test_close_removes_the_lock_file_and_a_killed_holders_lock_file_is_reused(tmp_path):
    path = tmp_path / "s.jsonl"
    lock = tmp_path / "s.jsonl.lock"
    with SliceStore.open(path, IDENTITY):
        assert lock.exists()
    assert not lock.exists()
    lock.write_bytes(b"")  # what a killed writer leaves behind
    with SliceStore.open(path, IDENTITY):
        pass
    assert not lock.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


def test_a_failed_run_removes_the_file_it_created_but_keeps_an_earlier_runs_header_only_file(tmp_path):
    """close(failed=True): a store created by this run that holds no row is removed (no header-only file and no
    lock left by a failed start); one created by an earlier run stays to be resumed, as does one with rows."""
    path = tmp_path / "s.jsonl"
    SliceStore.open(path, IDENTITY).close(failed=True)
    assert sorted(tmp_path.iterdir()) == []
    SliceStore.open(path, IDENTITY).close()  # an earlier run stopped cleanly before its first row
    header = path.read_bytes()
    store = SliceStore.open(path, IDENTITY)
    assert not store.created
    store.close(failed=True)
    assert path.read_bytes() == header and sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]
    with pytest.raises(RuntimeError), SliceStore.open(path, IDENTITY):  # the `with` form: the same rule
        raise RuntimeError("start failed")
    assert path.read_bytes() == header
    path.unlink()
    with SliceStore.open(path, IDENTITY) as store:
        store.append(BATCH)
    store.close(failed=True)  # rows stored: never removed
    assert len(load_responses(path)) == len(BATCH)


# -- through the generation paths ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def generation(release):
    return dict(load_suite(release).generation)


@pytest.fixture
def data(tmp_path):
    build_tiny_tsv(tmp_path / "data" / "tinya.tsv", style="mcq", rows=ROWS, seed=3)
    return tmp_path / "data"


def _faulty_open(campaign: Path, generation: dict, offset: int, error: BaseException):  # noqa: ANN202
    """``open_store`` whose store's first write after ``offset`` bytes fails once."""
    def open_store() -> SliceStore:
        store = open_slice_store(campaign, SLICE, MODEL, generation)
        inject(store, offset, error)
        return store
    return open_store


def _job(campaign: Path, data: Path, generation: dict, open_store=None) -> SliceJob:  # noqa: ANN001
    protocol = tiny_tsv_protocol("tinya")
    return SliceJob(slice=SLICE, protocol=protocol, load_rows=lambda: protocol.load(data / "tinya.tsv"),
                    image_dir=data / "images", generation=generation,
                    open_store=open_store or (lambda: open_slice_store(campaign, SLICE, MODEL, generation)))


def _resumed_complete(campaign: Path, data: Path, generation: dict) -> None:
    [result] = CampaignScheduler(FakeStreamBackend()).run([_job(campaign, data, generation)])
    assert result.ok, result.error
    path = response_path(campaign, model=MODEL.slug, seed=42, benchmark="tinya")
    rows = load_responses(path)
    assert [r.ordinal for r in rows] == list(range(ROWS)) and path.read_bytes().count(b"\n") == ROWS + 1


#: byte offsets into the generated stream (batches of 4 rows of ~600 bytes): first byte, inside the first batch,
#: its last byte, inside the second batch
OFFSETS = (0, 1, 700, 2399, 3000)


@pytest.mark.parametrize("offset", OFFSETS)
@pytest.mark.parametrize("error", [enospc, KeyboardInterrupt], ids=["enospc", "sigint"])
def test_per_slice_path_fault_mid_batch_then_resume(tmp_path, data, generation, offset, error):
    campaign = tmp_path / "c"
    job = _job(campaign, data, generation, _faulty_open(campaign, generation, offset, error()))
    with pytest.raises(type(error())):
        with job.open_store() as store:
            run_generation(job.slice, job.load_rows(), job.protocol, FakeStreamBackend(), store, job.image_dir,
                           generation=generation, progress=False, batch_size=4, flush_interval_s=3600)
    _resumed_complete(campaign, data, generation)


@pytest.mark.parametrize("offset", OFFSETS)
@pytest.mark.parametrize("error", [enospc, KeyboardInterrupt], ids=["enospc", "sigint"])
def test_scheduler_fault_mid_batch_then_resume(tmp_path, data, generation, offset, error):
    campaign = tmp_path / "c"
    scheduler = CampaignScheduler(FakeStreamBackend(window=3), batch_size=4, flush_interval_s=3600)
    with pytest.raises(type(error())):
        scheduler.run([_job(campaign, data, generation, _faulty_open(campaign, generation, offset, error()))])
    assert not (response_path(campaign, model=MODEL.slug, seed=42, benchmark="tinya").with_suffix(
        ".jsonl.lock")).exists()
    _resumed_complete(campaign, data, generation)


# -- a real, tiny filesystem -----------------------------------------------------------------------------------

@pytest.fixture
def tiny_fs(tmp_path):
    """A 256 KiB tmpfs mounted for this test (skips, with the reason, where mounting is not permitted)."""
    mount = shutil.which("mount")
    if mount is None or os.geteuid() != 0:
        pytest.skip("a real full filesystem needs root and mount(8) to mount a tiny tmpfs; not available here")
    root = tmp_path / "tiny-fs"
    root.mkdir()
    done = subprocess.run([mount, "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(root)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"mounting a tiny tmpfs is not permitted here: {done.stderr.strip() or done.returncode}")
    try:
        yield root
    finally:
        subprocess.run(["umount", str(root)], check=True)


def test_a_real_filesystem_that_fills_then_frees_space(tiny_fs, data, generation):
    campaign = tiny_fs / "c"
    open_slice_store(campaign, SLICE, MODEL, generation).close()  # the header fits
    filler = tiny_fs / "filler"
    with open(filler, "wb", buffering=0) as handle:  # fill the disk up to the last byte
        with pytest.raises(OSError) as full:
            while True:
                handle.write(b"\0" * 4096)
        assert full.value.errno == errno.ENOSPC
    with pytest.raises(OSError) as caught:
        CampaignScheduler(FakeStreamBackend(window=3), batch_size=4).run([_job(campaign, data, generation)])
    assert caught.value.errno == errno.ENOSPC
    path = response_path(campaign, model=MODEL.slug, seed=42, benchmark="tinya")
    stored = load_responses(path)  # what fitted in the file's last page: whole batches only, the failed one rolled back
    assert len(stored) < ROWS and len(stored) % 4 == 0 and path.read_bytes().count(b"\n") == len(stored) + 1
    filler.unlink()  # the space comes back
    _resumed_complete(campaign, data, generation)


def test_a_file_that_cannot_be_cut_back_is_written_no_more_and_the_next_open_repairs_it(tmp_path, monkeypatch):
    path = tmp_path / "s.jsonl"
    with SliceStore.open(path, IDENTITY) as store:
        store.append([row(0)])
        inject(store, 10, enospc())
        monkeypatch.setattr("trace_lib.generation.store.os.ftruncate", lambda fd, length: (_ for _ in ()).throw(
            OSError(errno.EIO, os.strerror(errno.EIO))))
        with pytest.raises(OSError):
            store.append(BATCH)
        monkeypatch.undo()
        with pytest.raises(Exception, match="not open for writing"):
            store.append(BATCH)  # nothing more is written after a roll-back that failed
    with SliceStore.open(path, IDENTITY) as store:  # the 10 torn bytes are cut on open
        assert store.repaired_bytes == 10 and list(store.done) == [row(0).row_key]


def test_a_second_ctrl_c_during_the_roll_back_waits_for_it(tmp_path, monkeypatch):
    """The first Ctrl-C tears the write; a second one arrives while the file is being cut back: it is held until
    the roll-back is done, then raised, so the file is as it was and a flush of the same batch writes it once."""
    import signal

    session = signal.signal(signal.SIGINT, signal.default_int_handler)  # not the session's stop_on_signals
    try:
        _ctrl_c_during_roll_back(tmp_path, monkeypatch)
    finally:
        signal.signal(signal.SIGINT, session)


def _ctrl_c_during_roll_back(tmp_path, monkeypatch):
    import signal

    path = tmp_path / "s.jsonl"
    with SliceStore.open(path, IDENTITY) as store:
        store.append([row(0), row(1)])
        before = path.read_bytes()
        inject(store, 10, KeyboardInterrupt())
        real = os.ftruncate

        def ctrl_c_then_truncate(fd: int, length: int) -> None:
            signal.raise_signal(signal.SIGINT)  # a handler that raised here would leave the torn bytes
            real(fd, length)

        monkeypatch.setattr("trace_lib.generation.store.os.ftruncate", ctrl_c_then_truncate)
        with pytest.raises(KeyboardInterrupt):
            store.append(BATCH)
        monkeypatch.undo()
        assert path.read_bytes() == before
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler in place is restored
        assert store.append(BATCH) == 3
    _stored_once(path, 5)


@pytest.mark.parametrize("kind", ["fifo", "link", "directory"])
def test_a_slice_path_that_is_not_a_regular_file_is_refused_before_it_is_read(tmp_path, kind):
    from trace_lib.errors import UsageError

    path, target = tmp_path / "s.jsonl", tmp_path / "elsewhere.jsonl"
    if kind == "fifo":
        os.mkfifo(path)  # reading it would block for ever
    elif kind == "link":
        with SliceStore.open(target, IDENTITY) as store:
            store.append([row(0)])
        path.symlink_to(target)  # appending through it would write another file
    else:
        path.mkdir()
    before = target.read_bytes() if target.exists() else None
    with pytest.raises(UsageError) as refused:
        SliceStore.open(path, IDENTITY)
    assert refused.value.file == str(path) and "never replaces one that is not" in str(refused.value)
    assert (target.read_bytes() if target.exists() else None) == before
    assert not path.with_name(path.name + ".lock").exists()  # the lock taken for the check is released


def test_a_failed_retain_leaves_the_file_and_the_store_usable(tmp_path, monkeypatch):
    path = tmp_path / "s.jsonl"
    with SliceStore.open(path, IDENTITY) as store:
        store.append([row(0), row(1)])
        before = path.read_bytes()
        monkeypatch.setattr("trace_lib.generation.store.write_bytes_atomic", lambda *a: (_ for _ in ()).throw(
            OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))))
        with pytest.raises(OSError):
            store.retain(lambda r: r.ordinal == 0)
        monkeypatch.undo()
        assert path.read_bytes() == before and len(store.done) == 2
        assert store.append([row(2)]) == 1  # reopened: appends go on
        monkeypatch.setattr(SliceStore, "_reopen", lambda self: (_ for _ in ()).throw(
            OSError(errno.EMFILE, os.strerror(errno.EMFILE))))
        with pytest.raises(OSError):
            store.retain(lambda r: r.ordinal != 1)  # rewritten, then the handle cannot be opened again
        monkeypatch.undo()
        with pytest.raises(Exception, match="not open for writing"):
            store.append([row(3)])
    assert [r.ordinal for r in load_responses(path)] == [0, 2]


def test_short_writes_are_continued_where_they_stopped(tmp_path):
    """A raw write may take fewer bytes than given (a signal, a pipe-like filesystem): the rest follows, none twice."""

    class Short:
        def __init__(self, real):
            self.real = real

        def write(self, data):
            return self.real.write(bytes(data[:7]))

        def __getattr__(self, name):
            return getattr(self.real, name)

    path = tmp_path / "s.jsonl"
    with SliceStore.open(path, IDENTITY) as store:
        store._file = Short(store._file)
        assert store.append(BATCH) == 3
    assert [r.response for r in load_responses(path)] == [r.response for r in BATCH]


def test_the_repair_of_a_torn_line_and_the_roll_back_of_a_batch_are_made_durable(tmp_path, monkeypatch):
    path = tmp_path / "s.jsonl"
    with SliceStore.open(path, IDENTITY) as store:
        store.append([row(0), row(1)])
    good = len(path.read_bytes())
    path.write_bytes(path.read_bytes() + b'{"kind":"ro')
    sizes = []
    real = os.fsync
    monkeypatch.setattr("trace_lib.generation.store.os.fsync",
                        lambda fd: (sizes.append(os.fstat(fd).st_size), real(fd))[1])
    with SliceStore.open(path, IDENTITY) as store:
        assert sizes == [good]  # cut back to the whole rows, then fsynced before anything is appended
        inject(store, 5, enospc())
        with pytest.raises(OSError):
            store.append(BATCH)
    assert sizes == [good, good]  # the torn batch cut off again, and that made durable too


def test_a_ctrl_c_while_a_new_slice_opens_leaves_no_file(tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("trace_lib.generation.store._check_header", interrupted)
    path = tmp_path / "s.jsonl"
    with pytest.raises(KeyboardInterrupt):
        SliceStore.open(path, IDENTITY)
    assert list(tmp_path.iterdir()) == []  # neither the header-only file nor its lock
