"""Download the paper release's canonical data files at the pinned commit, verify every hash, write atomically.

``fetch_release(dest)`` fetches exactly :data:`trace_lib.release.identity.CANONICAL_SHA256` (raw GitHub URLs at
:data:`~trace_lib.release.identity.COMMIT`, or any mirror with the same layout via ``base_url``). Each file is
streamed into ``<name>.incomplete`` and hashed; only when *every* file verified are they renamed into place, so a
failure leaves nothing half-written: no ``.incomplete`` file, no new file, no directory it created. Files already
present with the pinned hash are kept. The result is a data-only release that ``trace-repro check`` accepts.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from trace_lib import __version__
from trace_lib.atomic import TEMP_SUFFIX, temp_name
from trace_lib.errors import TraceReproError, UsageError, render_line
from trace_lib.interrupts import raise_if_stopped
from trace_lib.outputs import check_replaceable
from trace_lib.release import identity
from trace_lib.release.load import sha256_file

DEFAULT_BASE_URL = "https://raw.githubusercontent.com"
INCOMPLETE_SUFFIX = TEMP_SUFFIX
#: no canonical file comes near this; a larger body is not the release
MAX_BYTES = 64 << 20
_CHUNK = 1 << 16


@dataclass(frozen=True)
class FetchedFile:
    """One canonical file in place with its verified hash; ``downloaded`` False when it was already there."""

    path: str
    sha256: str
    size: int
    downloaded: bool


@dataclass(frozen=True)
class FetchReport:
    """The verified release written under ``dest``."""

    dest: Path
    files: tuple[FetchedFile, ...]

    @property
    def downloaded(self) -> int:
        return sum(f.downloaded for f in self.files)


class FetchError(TraceReproError):
    """Some canonical files could not be downloaded or failed verification; nothing was written.

    ``problems`` holds one rendered line per failed file (every failure, not only the first).
    """

    def __init__(self, problems: Iterable[str], *, dest: Path) -> None:
        self.problems = tuple(problems)
        super().__init__(
            f"{len(self.problems)} of {len(identity.CANONICAL_SHA256)} canonical files failed; nothing was written",
            file=str(dest),
        )


def fetch_release(
    dest: str | os.PathLike[str],
    *,
    base_url: str = DEFAULT_BASE_URL,
    timeout: float = 60.0,
    workers: int = 8,
) -> FetchReport:
    """Download and verify every canonical file of the paper release into ``dest`` (a release root).

    Args:
        dest: directory that becomes the release root (``dest/rlvr/...``); created if missing.
        base_url: raw-file host; the URL of a file is ``<base_url>/<repository>/<commit>/<path>``.
        timeout: seconds per HTTP request.
        workers: concurrent downloads.

    Raises:
        UsageError: ``dest`` exists and is not a directory.
        FetchError: any file failed (HTTP error, unreachable host, hash mismatch); lists every failure.
    """
    root = Path(dest).expanduser()
    from trace_lib.options import MAX_SECONDS, url_problem

    problem = url_problem(base_url, schemes=("http", "https", "file"), what="an http(s) URL with a host or a file URL")
    if problem is not None:
        raise UsageError(problem, field="--base-url", found=base_url)

    if not 0 < timeout <= MAX_SECONDS:  # inf or NaN too: a deadline past the clock's range is a traceback
        raise UsageError(f"must be a number of seconds > 0 and at most {MAX_SECONDS:,}", field="--timeout",
                         found=timeout)
    if root.exists() and not root.is_dir():
        raise UsageError("not a directory", file=str(root), hint="choose a directory for the release")
    wanted = sorted(identity.CANONICAL_SHA256.items())
    present = {rel for rel, sha in wanted if _has(root / rel, sha)}
    todo = [(rel, sha) for rel, sha in wanted if rel not in present]
    for rel, _ in todo:
        check_replaceable(root / rel)  # a FIFO, device, directory or link there is refused, never replaced
    from concurrent.futures import ThreadPoolExecutor

    created = _missing_dirs(root, [rel for rel, _ in todo])
    staged: list[tuple[Path, Path]] = []
    made: list[Path] = []  # every partial file a download created: removed unless it went in (an interrupt too)
    problems: list[str] = []
    finished = False
    try:
        for directory in created:
            directory.mkdir(exist_ok=True)
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:  # its exit waits for every download
            outcomes = list(pool.map(lambda item: _download(root, *item, base_url, timeout, made), todo))
        for (rel, _), (partial, problem) in zip(todo, outcomes):
            if partial is not None:
                staged.append((partial, root / rel))
            if problem is not None:
                problems.append(problem)
        if problems:
            raise FetchError(problems, dest=root)
        for partial, final in staged:
            os.replace(partial, final)
        staged.clear()
        finished = True
    finally:
        for partial in made:
            partial.unlink(missing_ok=True)  # gone already where it was renamed into place
        if not finished:
            for directory in reversed(created):
                _remove_if_empty(directory)
    files = tuple(
        FetchedFile(rel, sha, (root / rel).stat().st_size, downloaded=rel not in present) for rel, sha in wanted
    )
    return FetchReport(root, files)


def _has(path: Path, sha: str) -> bool:
    try:
        return path.is_file() and sha256_file(path) == sha
    except OSError:
        return False


def _missing_dirs(root: Path, rels: list[str]) -> list[Path]:
    """Directories (parents first) that must be created for ``rels`` under ``root``."""
    needed: list[Path] = []
    for rel in rels:
        for parent in reversed((root / rel).parents):
            if parent != root and root not in parent.parents:
                continue
            if not parent.exists() and parent not in needed:
                needed.append(parent)
    if not root.exists():
        needed.insert(0, root)
    return sorted(set(needed), key=lambda p: len(p.parts))


def _remove_if_empty(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass


def _download(root: Path, rel: str, sha: str, base_url: str, timeout: float,
              made: list[Path]) -> tuple[Path | None, str | None]:
    """Stream one file into a new temp file beside it (``.<name>.<random>.incomplete``, created exclusively and
    listed in ``made``): ``(staged path or None, problem line or None)``."""
    import urllib.error
    import urllib.request

    url = identity.raw_url(rel, base=base_url)
    partial = (root / rel).with_name(temp_name(root / rel))
    request = urllib.request.Request(url, headers={"User-Agent": f"trace-repro/{__version__}"})
    digest = hashlib.sha256()
    size = 0
    deadline = time.monotonic() + timeout  # the whole request: a server that trickles bytes ends too
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response, open(partial, "xb") as handle:
            made.append(partial)
            while block := response.read1(_CHUNK):  # what one read brings, so the deadline is seen
                raise_if_stopped()  # Ctrl-C or SIGTERM: every download ends now, not at its timeout
                size += len(block)
                if size > MAX_BYTES:
                    raise _TooLarge()
                if time.monotonic() > deadline:
                    raise TimeoutError(f"not done within --timeout {timeout:g} s")
                digest.update(block)
                handle.write(block)
    except urllib.error.HTTPError as exc:
        return _failed(partial, render_line(f"download failed: HTTP {exc.code} {exc.reason}", file=rel, hint=url))
    except urllib.error.URLError as exc:
        reason = getattr(exc.reason, "strerror", None) or str(exc.reason)
        return _failed(partial, render_line(f"download failed: {reason}", file=rel, hint=url))
    except _TooLarge:
        return _failed(partial, render_line(f"download failed: body exceeds {MAX_BYTES} bytes", file=rel, hint=url))
    except (OSError, ValueError) as exc:
        return _failed(partial, render_line(f"download failed: {exc}", file=rel, hint=url))
    found = digest.hexdigest()
    if found != sha:
        return partial, render_line(
            f"differs from the paper release ({identity.REPOSITORY}@{identity.COMMIT[:12]})",
            file=rel, field="sha256", expected=sha, found=found,
        )
    return partial, None


class _TooLarge(Exception):
    pass


def _failed(partial: Path, problem: str) -> tuple[None, str]:
    partial.unlink(missing_ok=True)
    return None, problem
