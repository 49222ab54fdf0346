"""Pinned benchmark downloads: each benchmark's evaluation artifact as ``benchmark_provenance.v1.json`` pins it.

Sources are read from the release, never restated. Three kinds exist there:

- ``url``: a plain HTTP(S) file (the VLMEvalKit TSVs), downloaded with the standard library;
- ``hf_file``: one file of a Hugging Face dataset repository at a commit (``repository`` + ``repository_revision``
  + ``path``, or a ``huggingface.co/datasets/<repo>/resolve/<commit>/<path>`` URL), via ``hf_hub_download``;
- ``hf_snapshot``: a whole dataset repository at a commit (a ``.../tree/<commit>`` URL), via ``snapshot_download``
  into ``hf/<alias>/``; TRACE's table for it (EvoChart, CountQA) is then built by
  :mod:`trace_lib.data.hf_tables` from the split the provenance names.

Every download lands in a temporary ``.incomplete`` name and is moved into place only after its MD5 (when the
provenance gives one) matched, so an interrupted or wrong download never looks finished. Layout under the data
root (VLMEvalKit's ``LMUData`` convention): ``<alias><ext>`` for the table the protocol loads, ``hf/<alias>/``
for snapshots, images in ``images/<alias>/``. ``huggingface_hub`` is imported only when a Hugging Face source
is fetched; it reads ``HF_TOKEN`` / ``HF_HOME`` as usual.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Literal, Mapping
from urllib.parse import unquote, urlsplit

from trace_lib.atomic import atomic_output
from trace_lib.data.hub_access import EndpointCheck, hub_client
from trace_lib.errors import InputError, ReleaseFileError
from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot

_COMMIT = re.compile(r"[0-9a-f]{40}")  # used with fullmatch: no trailing newline
_HF_URL = re.compile(
    r"^https://huggingface\.co/datasets/(?P<repo>[^/]+/[^/]+)/(?P<verb>resolve|tree)/(?P<rev>[^/]+)(?:/(?P<path>.+))?$"
)

Kind = Literal["url", "hf_file", "hf_snapshot"]


@dataclass(frozen=True)
class ArtifactSource:
    """Where one benchmark's evaluation data comes from, as the release pins it."""

    key: str
    alias: str  # the suite's VLMEvalKit alias; names the local file/directory
    kind: Kind
    url: str | None = None  # kind "url"
    repo_id: str | None = None  # kinds "hf_*": "owner/name" (a dataset repository)
    revision: str | None = None  # kinds "hf_*": a 40-hex commit
    filename: str | None = None  # kind "hf_file": path inside the repository
    md5: str | None = None  # the release's checksum, when it has one
    split: str | None = None  # kind "hf_snapshot": the dataset split the table is built from

    def describe(self) -> str:
        if self.kind == "url":
            return str(self.url)
        suffix = f"/{self.filename}" if self.filename else ""
        return f"hf://datasets/{self.repo_id}@{self.revision}{suffix}"

    def local_path(self, data_root: Path) -> Path:
        """The table handed to the protocol's ``load`` (for snapshots: the table built from them)."""
        if self.kind == "hf_snapshot":
            return Path(data_root) / f"{self.alias}.tsv"
        name = PurePosixPath(unquote(urlsplit(self.url).path)).name if self.kind == "url" else self.filename
        suffix = PurePosixPath(name or "").suffix or ".tsv"
        return Path(data_root) / f"{self.alias}{suffix}"

    def snapshot_dir(self, data_root: Path) -> Path:
        """Where a ``hf_snapshot`` source's repository files go."""
        return Path(data_root) / "hf" / self.alias

    def image_dir(self, data_root: Path) -> Path:
        """Where the protocol materialises this benchmark's prompt images."""
        return Path(data_root) / "images" / self.alias


def _source_from_entry(entry: Mapping[str, Any], alias: str, *, where: str) -> ArtifactSource:
    key = entry.get("benchmark_id")
    artifact = entry.get("evaluation_artifact")
    if not isinstance(artifact, Mapping):
        raise ReleaseFileError("evaluation artifact is missing", file=identity.PROVENANCE, field=where)
    checksum = artifact.get("checksum")
    md5 = None
    if checksum is not None:
        if checksum.get("algorithm") != "md5" or not re.fullmatch(r"[0-9a-f]{32}", str(checksum.get("value"))):
            raise ReleaseFileError("unsupported checksum", file=identity.PROVENANCE, field=f"{where}.checksum",
                                   expected="md5 of 32 hex", found=checksum)
        md5 = checksum["value"]
    if "url" in artifact:
        url = artifact["url"]
        match = _HF_URL.match(url)
        if match:
            rev = match["rev"]
            if not _COMMIT.fullmatch(rev):
                raise ReleaseFileError("Hugging Face URL is not pinned to a commit", file=identity.PROVENANCE,
                                       field=f"{where}.url", found=url)
            if match["verb"] == "tree":
                split = re.match(r"[A-Za-z0-9_.-]+", str((entry.get("source") or {}).get("split", "")))
                if not split:
                    raise ReleaseFileError("dataset split is missing", file=identity.PROVENANCE,
                                           field=f"{where}.source.split")
                return ArtifactSource(key, alias, "hf_snapshot", repo_id=match["repo"], revision=rev, md5=md5,
                                      split=split.group(0))
            return ArtifactSource(key, alias, "hf_file", repo_id=match["repo"], revision=rev,
                                  filename=match["path"], md5=md5)
        if urlsplit(url).scheme not in ("http", "https"):
            raise ReleaseFileError("artifact URL is not http(s)", file=identity.PROVENANCE, field=f"{where}.url",
                                   found=url)
        return ArtifactSource(key, alias, "url", url=url, md5=md5)
    repo = str(artifact.get("repository", ""))
    match = re.fullmatch(r"https://huggingface\.co/datasets/([^/]+/[^/]+)", repo)
    rev = artifact.get("repository_revision")
    if not match or not isinstance(rev, str) or not _COMMIT.fullmatch(rev) or not artifact.get("path"):
        raise ReleaseFileError("artifact is neither a URL nor a pinned Hugging Face dataset file",
                               file=identity.PROVENANCE, field=where)
    return ArtifactSource(key, alias, "hf_file", repo_id=match.group(1), revision=rev, filename=artifact["path"],
                          md5=md5)


def load_artifact_sources(release: ReleaseRoot) -> dict[str, ArtifactSource]:
    """Suite key -> pinned artifact source, from ``benchmark_provenance.v1.json`` (suite order).

    Raises:
        ReleaseFileError: a benchmark without a usable pinned artifact, or keys that differ from the suite's.
    """
    from trace_lib.release.suite import load_suite

    suite = load_suite(release)
    doc = release.read_json(identity.PROVENANCE)
    entries = {e.get("benchmark_id"): (i, e) for i, e in enumerate(doc.get("benchmarks", []))}
    missing = [k for k in suite.keys if k not in entries]
    if missing:
        raise ReleaseFileError("benchmarks without provenance", file=identity.PROVENANCE, field="benchmarks",
                               found=missing)
    return {
        key: _source_from_entry(entries[key][1], suite.benchmark(key).official_alias,
                                where=f"benchmarks[{entries[key][0]}]")
        for key in suite.keys
    }


# -- downloading -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Fetched:
    """A benchmark artifact on disk."""

    source: ArtifactSource
    path: Path  # file or directory (see ArtifactSource.local_path)
    downloaded: bool  # False when an existing verified copy was kept


def file_digests(path: Path) -> tuple[str, str]:
    """(md5, sha256) hex of a file."""
    md5, sha = hashlib.md5(usedforsecurity=False), hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            md5.update(block)
            sha.update(block)
    return md5.hexdigest(), sha.hexdigest()


def _verify_md5(source: ArtifactSource, md5: str, *, label: str) -> None:
    if source.md5 is not None and md5 != source.md5:
        raise InputError("checksum mismatch", file=label, field=f"{source.key}.md5", expected=source.md5, found=md5,
                         hint="the upstream artifact changed or the download is corrupt; nothing was kept")


def _download_url(url: str, out: BinaryIO, md5: Any, *, name: str, timeout_s: float, progress: bool) -> None:
    """Stream ``url`` into ``out``, feeding every block to ``md5``."""
    headers = {"User-Agent": "trace-repro"}
    if urlsplit(url).hostname == "huggingface.co" and os.environ.get("HF_TOKEN"):
        headers["Authorization"] = f"Bearer {os.environ['HF_TOKEN']}"
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout_s) as response:
        total = int(response.headers.get("Content-Length") or 0) or None
        bar = _bar(total, name) if progress else None
        while block := response.read(1 << 20):
            out.write(block)
            md5.update(block)
            if bar is not None:
                bar.update(len(block))
        if bar is not None:
            bar.close()


def _copy_file(source: Path, out: BinaryIO, md5: Any) -> None:
    """Copy ``source`` into ``out``, feeding every block to ``md5``."""
    with open(source, "rb") as handle:
        while block := handle.read(1 << 20):
            out.write(block)
            md5.update(block)


def _bar(total: int | None, name: str) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="B", unit_scale=True, desc=name, dynamic_ncols=True)


def fetch_artifact(
    source: ArtifactSource, data_root: Path, *, force: bool = False, timeout_s: float = 600.0,
    progress: bool = True, hub: Any = None, check: EndpointCheck | None = None,
) -> Fetched:
    """Download one benchmark's artifact into ``data_root`` (atomically, checksum-verified).

    An existing file whose MD5 matches is kept unless ``force``; an existing snapshot directory is kept unless
    ``force`` (its content is bound by the manifest). ``hub`` defaults to ``huggingface_hub``'s client for
    ``check``'s endpoint (:func:`~trace_lib.data.hub_access.hub_client`; pass one check for a whole command), which
    is reached before a Hugging Face request, not when the HF cache serves the file.

    Raises:
        InputError: checksum mismatch (nothing is kept); the Hub endpoint refused or accepted no connection.
        OSError / huggingface_hub errors: the download itself failed (nothing is kept).
    """
    data_root = Path(data_root)
    data_root.mkdir(parents=True, exist_ok=True)
    dest = source.local_path(data_root)
    label = source.describe()
    if source.kind == "hf_snapshot":
        from trace_lib.data.hf_tables import build_table

        snapshot = source.snapshot_dir(data_root)
        downloaded = False
        if force or not (snapshot.is_dir() and any(snapshot.iterdir())):
            hub, check = _hub(hub, check)
            check.ensure()  # a new staging directory: every file is a request
            snapshot.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{snapshot.name}.", suffix=".incomplete", dir=snapshot.parent))
            try:
                hub.snapshot_download(repo_id=source.repo_id, repo_type="dataset", revision=source.revision,
                                      local_dir=str(staging))
                shutil.rmtree(staging / ".cache", ignore_errors=True)
                _replace_directory(staging, snapshot)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
            downloaded = True
        if downloaded or force or not dest.is_file():
            build_table(source.key, snapshot, str(source.split), dest, source.image_dir(data_root).resolve())
        return Fetched(source, dest, downloaded)
    if dest.is_file() and not force and source.md5 is not None and file_digests(dest)[0] == source.md5:
        return Fetched(source, dest, False)
    if dest.is_file() and not force and source.md5 is None:
        return Fetched(source, dest, False)
    cached = None
    if source.kind != "url":
        hub, check = _hub(hub, check)
        check.ensure_for_file(str(source.repo_id), str(source.filename), revision=str(source.revision))
        cached = Path(hub.hf_hub_download(repo_id=source.repo_id, filename=source.filename, repo_type="dataset",
                                          revision=source.revision))
    md5 = hashlib.md5(usedforsecurity=False)
    with atomic_output(dest) as out:  # a failed download or checksum leaves nothing behind
        if cached is None:
            _download_url(str(source.url), out, md5, name=dest.name, timeout_s=timeout_s, progress=progress)
        else:
            _copy_file(cached, out, md5)
        _verify_md5(source, md5.hexdigest(), label=label)
    return Fetched(source, dest, True)


def _hub(hub: Any, check: EndpointCheck | None) -> tuple[Any, EndpointCheck]:
    """:func:`~trace_lib.data.hub_access.hub_client`, with a missing ``huggingface_hub`` as one line."""
    try:
        return hub_client(hub, check)
    except ImportError as exc:
        raise InputError(f"huggingface_hub is not importable ({exc})", field="prepare-data",
                         hint="install the 'eval' extra") from None


def _replace_directory(new: Path, old: Path) -> None:
    """Put directory ``new`` where ``old`` is: ``old`` is renamed aside first and put back if the rename of
    ``new`` fails, so a failure leaves the old snapshot whole; the one set aside is removed after."""
    aside = None
    if old.exists():
        aside = old.with_name(f".{old.name}.{os.getpid()}.replaced.incomplete")
        shutil.rmtree(aside, ignore_errors=True)
        os.replace(old, aside)
    try:
        os.replace(new, old)
    except BaseException:
        if aside is not None:
            os.replace(aside, old)
        raise
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)
