"""Download selected parts of the paper's archive at the release's pinned revisions, and verify every byte.

Pins come from the release at run time (:func:`release_pins`): ``trace_eval/results.json`` ``source_artifacts[]``
(repository, revision, ``manifest_sha256``, ``result_path``/``result_sha256``, run id, model ids) and
``trace_validation/results.v1.json`` ``source`` (with the manifest hash of ``release_receipt.v1.json``).
:func:`fetch_runs` downloads through ``huggingface_hub.hf_hub_download`` (``HF_TOKEN`` / standard config, the HF
cache, resumable ``.incomplete`` files, ``HF_ENDPOINT``), checks ``metadata/manifest.json`` against the pin, each
selected part against its content address and ``benchmark_scores.json`` against ``result_sha256``, and only then
places the files under ``DEST/runs/<run_id>/`` (atomically per file). A file whose bytes differ raises
:class:`~trace_lib.archive.reader.PartDigestError` naming it and both hashes; nothing from it is placed.
"""

from __future__ import annotations

import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from trace_lib.archive.reader import unknown_id_error, verify_file
from trace_lib.archive.schema import MANIFEST_PATH, RUN_ROOT_TEMPLATE
from trace_lib.atomic import atomic_output, temp_name
from trace_lib.errors import InputError, ReleaseFileError, UsageError
from trace_lib.outputs import check_replaceable, ensure_parent
from trace_lib.release.identity import RESULTS, VALIDATION_RECEIPT, VALIDATION_RESULTS
from trace_lib.release.load import sha256_file

#: The PartDigestError reason of a fetched file (nothing from it is placed).
_MISMATCH = "content hash mismatch; nothing from this file is used"


@dataclass(frozen=True)
class RunPin:
    """One archived run as the release pins it."""

    run_id: str
    repository_id: str
    revision: str
    manifest_sha256: str | None  # None only when the release does not pin it (then the fetch refuses)
    result_path: str  # relative to the run root
    result_sha256: str
    model_ids: tuple[str, ...]
    validation: bool = False

    @property
    def run_root(self) -> str:
        return RUN_ROOT_TEMPLATE.format(run_id=self.run_id)


def release_pins(release: Any) -> list[RunPin]:
    """Every archived run the release pins (evaluation runs first, then the TRACE validation run).

    Raises:
        ReleaseFileError: a pin lacks a field.
    """
    pins: list[RunPin] = []
    for i, art in enumerate(release.read_json(RESULTS).get("source_artifacts") or []):
        try:
            meta = art.get("run_metadata") or {}
            pins.append(RunPin(str(art["run_id"]), str(art["repository_id"]), str(art["repository_revision"]),
                               str(art["manifest_sha256"]), str(art["result_path"]), str(art["result_sha256"]),
                               tuple(str(m) for m in meta.get("model_ids") or ())))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ReleaseFileError(f"archive pin lacks {exc}", file=RESULTS,
                                   field=f"source_artifacts[{i}]") from None
    if release.exists(VALIDATION_RESULTS):
        doc = release.read_json(VALIDATION_RESULTS)
        src = doc.get("source") or {}
        manifest_sha = None
        if release.exists(VALIDATION_RECEIPT):
            files = (release.read_json(VALIDATION_RECEIPT).get("immutable_source") or {}).get("files") or {}
            manifest_sha = (files.get("export_manifest") or {}).get("sha256")
        try:
            run_id = str(src["run_id"])
            root = RUN_ROOT_TEMPLATE.format(run_id=run_id) + "/"
            result = str(src["results_path"])
            pins.append(RunPin(run_id, str(src["dataset_repo_id"]), str(src["dataset_revision"]), manifest_sha,
                               result[len(root):] if result.startswith(root) else result, str(src["results_sha256"]),
                               tuple(str(r["model_id"]) for r in doc.get("results") or ()), validation=True))
        except (KeyError, TypeError) as exc:
            raise ReleaseFileError(f"validation archive pin lacks {exc}", file=VALIDATION_RESULTS,
                                   field="source") from None
    return pins


@dataclass(frozen=True)
class Selection:
    """What to fetch: model ids (empty: all), seeds (empty: all), benchmarks (empty: all), the validation run."""

    model_ids: tuple[str, ...] = ()
    seeds: tuple[int, ...] = ()
    benchmarks: tuple[str, ...] = ()
    validation: bool = False
    evaluation: bool = True

    def wants(self, art: dict[str, Any]) -> bool:
        return ((not self.model_ids or str(art["model_id"]) in self.model_ids)
                and (not self.seeds or int(art["seed"]) in self.seeds)
                and (not self.benchmarks or str(art["benchmark_id"]) in self.benchmarks))


@dataclass
class FetchReport:
    """What a fetch placed (paths relative to DEST) and how many bytes were downloaded vs found in place."""

    dest: Path
    files: list[str] = field(default_factory=list)
    reused: int = 0
    runs: list[str] = field(default_factory=list)


Downloader = Callable[[RunPin, str], Path]


def hub_downloader(*, cache_dir: str | None = None, endpoint: str | None = None,
                   token: str | bool | None = None, timeout: float | None = None) -> Downloader:
    """A downloader through ``huggingface_hub.hf_hub_download`` at the pin's revision (HF cache, resumable).

    Before its first download that the HF cache cannot serve, in whichever thread, the endpoint must accept a
    connection (one :class:`~trace_lib.data.hub_access.EndpointCheck` for every download of this downloader): a
    refused or unreachable one is one line at once, not ``hf_hub_download``'s retries of a connection error (about
    24 s per file); after that, the Hub's own retries of transient failures apply. ``timeout`` (seconds; None:
    ``HF_HUB_ETAG_TIMEOUT``) bounds that check and each metadata request (``etag_timeout``); the body downloads'
    timeout is ``HF_HUB_DOWNLOAD_TIMEOUT`` (:func:`~trace_lib.data.hub_access.hub_timeouts` sets both per command).
    """
    from trace_lib.data.hub_access import ETAG_TIMEOUT_ENV, EndpointCheck, hub_access

    check = EndpointCheck(endpoint, timeout=timeout, timeout_from=ETAG_TIMEOUT_ENV if timeout is None else "--timeout")
    timeouts = {} if timeout is None else {"etag_timeout": timeout}

    def download(pin: RunPin, rel: str) -> Path:
        try:
            from huggingface_hub import hf_hub_download
        except ImportError as exc:
            raise InputError(f"huggingface_hub is not importable ({exc})", field="fetch-runs",
                             hint="install it: pip install 'trace-repro[eval]' (or huggingface_hub)") from None

        filename = f"{pin.run_root}/{rel}"
        with hub_access(f"{pin.repository_id}@{pin.revision[:12]}:{filename}"):
            check.ensure_for_file(pin.repository_id, filename, revision=pin.revision, cache_dir=cache_dir)
            return Path(hf_hub_download(repo_id=pin.repository_id, repo_type="dataset", revision=pin.revision,
                                        filename=filename, cache_dir=cache_dir, endpoint=endpoint, token=token,
                                        **timeouts))

    return download


def _place(source: Path, target: Path) -> None:
    """Put ``source``'s bytes at ``target`` atomically: a hard link when possible, else a copy through
    :func:`~trace_lib.atomic.atomic_output` (a failed copy leaves nothing). ``target`` must be absent or a
    regular file (:func:`~trace_lib.outputs.check_replaceable`)."""
    check_replaceable(target)
    ensure_parent(target)
    tmp = target.with_name(temp_name(target))
    try:
        os.link(os.path.realpath(source), tmp)
    except OSError:
        with atomic_output(target) as handle, open(source, "rb") as data:
            shutil.copyfileobj(data, handle)
        return
    try:
        check_replaceable(target)  # the path may have changed meanwhile
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _select_pins(pins: Sequence[RunPin], sel: Selection) -> list[RunPin]:
    known = sorted({m for p in pins for m in p.model_ids})
    for model in sel.model_ids:
        if model not in known:
            raise unknown_id_error("model id", model, known, field_name="--model-id")
    chosen = []
    for pin in pins:
        if pin.validation and not sel.validation:
            continue
        if not pin.validation and not sel.evaluation:
            continue
        if sel.model_ids and not set(sel.model_ids) & set(pin.model_ids):
            continue
        chosen.append(pin)
    return chosen


def fetch_runs(
    release: Any, dest: Path, selection: Selection, *, download: Downloader | None = None, workers: int = 8,
    progress: bool = True, benchmark_ids: Iterable[str] | None = None,
) -> FetchReport:
    """Fetch the selected parts of every selected run into ``dest/runs/<run_id>/`` (see the module docstring).

    ``benchmark_ids`` (the suite's keys) lets an unknown ``--benchmark`` fail before any download.

    Raises:
        UsageError: an unknown model id / benchmark / seed (one line with close matches), nothing selected.
        PartDigestError: the manifest, a part or the results file differs from its pin (nothing from it placed).
        InputError: a Hub download failed (one line).
    """
    download = download or hub_downloader()
    dest = Path(dest)
    pins = _select_pins(release_pins(release), selection)
    if benchmark_ids is not None:
        known = sorted(set(benchmark_ids))
        for bench in selection.benchmarks:
            if bench not in known:
                raise unknown_id_error("benchmark", bench, known, field_name="--benchmark")
    if not pins:
        raise UsageError("nothing selected", field="--model-id",
                         hint="the selection names no run of the release (use --validation for the TRACE validation run)")
    report = FetchReport(dest)
    for pin in pins:
        run_dir = dest / pin.run_root
        if pin.manifest_sha256 is None:
            raise ReleaseFileError("the release pins no manifest hash for this run", file=VALIDATION_RECEIPT,
                                   field="immutable_source.files.export_manifest.sha256")
        manifest_path = download(pin, MANIFEST_PATH)
        verify_file(manifest_path, pin.manifest_sha256, label=f"{pin.run_root}/{MANIFEST_PATH}",
                    reason=_MISMATCH)
        manifest = json.loads(Path(manifest_path).read_text(encoding="utf-8"))
        wanted = [a for a in manifest.get("artifacts") or [] if selection.wants(a)]
        if not wanted:
            continue
        files: list[tuple[str, str]] = [(pin.result_path, pin.result_sha256)]
        for art in wanted:
            files.append((str(art["parquet_path"]), str(art["parquet_sha256"])))
            if art.get("manifest_path"):
                files.append((str(art["manifest_path"]), str(art["manifest_sha256"])))
        todo = [(rel, sha) for rel, sha in files
                if not ((run_dir / rel).is_file() and sha256_file(run_dir / rel) == sha)]
        report.reused += len(files) - len(todo)
        bar = _bar(len(todo), pin.run_id) if progress and todo else None
        if bar is not None:
            _quiet_hub_bars()  # one bar of files per run instead of one byte bar per part and thread
        try:
            with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
                fetched = pool.map(lambda item: (item, download(pin, item[0])), todo)
                for (rel, sha), cached in fetched:
                    verify_file(Path(cached), sha, label=f"{pin.run_root}/{rel}", reason=_MISMATCH)
                    _place(Path(cached), run_dir / rel)
                    report.files.append(f"{pin.run_root}/{rel}")
                    if bar is not None:
                        bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        _place(Path(manifest_path), run_dir / MANIFEST_PATH)  # last: its presence means the run is readable
        report.runs.append(pin.run_id)
    if not report.runs:
        raise UsageError("the selection matches no archived slice", field="--seeds/--benchmark",
                         hint="check the seeds (42, 43, 44) and benchmark keys ('trace-repro benchmarks')")
    return report


def _quiet_hub_bars() -> None:
    try:
        from huggingface_hub.utils import disable_progress_bars
    except ImportError:
        return
    disable_progress_bars()


def _bar(total: int, name: str) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="file", desc=name, dynamic_ncols=True)
