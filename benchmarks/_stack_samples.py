"""Where another process's threads are: one dump of their tracebacks on demand, or samples at a fixed rate.

Both need ``benchmarks/stall_dump``'s ``sitecustomize`` in the process (every process started with that directory
on ``PYTHONPATH``):

- **a dump** (:func:`dump_once`, for a stalled run) is written by faulthandler from its ``SIGUSR1`` handler into
  ``<dump dir>/<pid>.txt``, so it works while a thread holds the GIL in C code. Only pids whose dump file exists and
  that catch ``SIGUSR1`` (``/proc/PID/status``) are signalled (a process without the handler would die of it), and
  each only while it is the process that was found (its start time, as ``trace_lib.scoring.judge_pool`` checks its
  judge servers): a pid reused meanwhile is left alone. An empty dump is explained (:func:`why_no_dump`).
- **samples** (:class:`StackSampler`, for a profile) are taken by the process itself, from a thread that reads
  ``sys._current_frames()`` while a gate file exists: no signal. vLLM 0.24's engine core caught ``SIGUSR1`` yet
  wrote no dump byte for 1,240 signals (run 18 of docs/performance.md), so its profile cannot come from signals.
  A sample waits for the GIL: a thread that holds it in C code shows the frame it returns to, one that releases it
  (a CUDA sync, a socket wait) the frame that called the C code.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from trace_lib.scoring.judge_pool import ProcessIdentity, process_identity

_HEADER = re.compile(r"^(?:Current thread|Thread) (0x[0-9a-fA-F]+) \(most recent call first\):$")
_FRAME = re.compile(r'^\s+File "([^"]+)", line \d+ in (.+)$')

#: One sample: each thread's frames as ``(file name, function)``, innermost first.
Sample = dict[str, list[tuple[str, str]]]


def parse_dumps(text: str) -> list[Sample]:
    """faulthandler's all-thread dumps, appended one after another, as samples (a ``# sample`` line or a thread id
    seen again starts the next sample)."""
    samples: list[Sample] = []
    current: Sample = {}
    frames: list[tuple[str, str]] | None = None
    for line in text.splitlines():
        if line == "# sample":  # benchmarks/stall_dump's own sampler marks each sample
            if current:
                samples.append(current)
            current, frames = {}, None
            continue
        header = _HEADER.match(line)
        if header:
            if header.group(1) in current:
                samples.append(current)
                current = {}
            frames = current.setdefault(header.group(1), [])
            continue
        frame = _FRAME.match(line)
        if frame and frames is not None:
            frames.append((Path(frame.group(1)).name, frame.group(2)))
    if current:
        samples.append(current)
    return samples


def phases(samples: Iterable[Sample], anchor: str, *, below: int = 3) -> Counter:
    """For the thread of each sample whose stack holds the function ``anchor``: the ``below`` calls under it
    (outermost first, ``a > b > c``), counted. A sample without such a thread counts as ``(no anchor)``."""
    counts: Counter = Counter()
    for sample in samples:
        for frames in sample.values():
            funcs = [func for _, func in frames]
            if anchor in funcs:
                at = funcs.index(anchor)
                counts[" > ".join(reversed(funcs[max(0, at - below):at])) or "(in the anchor)"] += 1
                break
        else:
            counts["(no anchor)"] += 1
    return counts


def innermost(samples: Iterable[Sample], anchor: str, *, depth: int = 2) -> Counter:
    """For the same thread: its innermost ``depth`` frames (``file:function`` pairs, innermost last), counted."""
    counts: Counter = Counter()
    for sample in samples:
        for frames in sample.values():
            if any(func == anchor for _, func in frames):
                counts[" > ".join(f"{file}:{func}" for file, func in reversed(frames[:depth]))] += 1
                break
    return counts


_SIGUSR1 = 1 << (signal.SIGUSR1 - 1)  # its bit in /proc/PID/status's signal masks


@dataclass(frozen=True)
class Disposition:
    """How a process treats ``SIGUSR1`` now (``/proc/PID/status`` and each thread's)."""

    caught: bool  # a handler is installed (process-wide)
    ignored: bool
    pending: bool  # sent to the process and not yet delivered
    blocked_threads: int  # threads that block it: a signal only reaches a thread that does not
    threads: int

    def __str__(self) -> str:
        state = "caught" if self.caught else "ignored" if self.ignored else "NOT caught"
        return (f"SIGUSR1 {state}, blocked in {self.blocked_threads} of {self.threads} threads"
                + (", pending" if self.pending else ""))


def _status_masks(path: Path) -> dict[str, int]:
    masks = {}
    for line in path.read_text(encoding="ascii", errors="replace").splitlines():
        key, _, value = line.partition(":")
        if key in ("SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt"):
            masks[key] = int(value.strip(), 16)
    return masks


def disposition(pid: int) -> Disposition | None:
    """``pid``'s treatment of ``SIGUSR1``; ``None`` when it is gone or ``/proc`` does not say."""
    try:
        process = _status_masks(Path(f"/proc/{int(pid)}/status"))
        threads = []
        for task in Path(f"/proc/{int(pid)}/task").iterdir():
            try:
                threads.append(_status_masks(task / "status"))
            except OSError:
                continue  # a thread that ended meanwhile
    except (OSError, ValueError):
        return None
    if "SigCgt" not in process:
        return None
    return Disposition(caught=bool(process["SigCgt"] & _SIGUSR1), ignored=bool(process.get("SigIgn", 0) & _SIGUSR1),
                       pending=bool((process.get("ShdPnd", 0) | process.get("SigPnd", 0)) & _SIGUSR1),
                       blocked_threads=sum(bool(t.get("SigBlk", 0) & _SIGUSR1) for t in threads),
                       threads=len(threads))


def _holds_open(pid: int, path: Path) -> bool | None:
    """Whether ``pid`` still has ``path`` open (a handler whose file was closed writes nowhere, or elsewhere)."""
    target = str(path.resolve())
    try:
        links = list(Path(f"/proc/{int(pid)}/fd").iterdir())
    except OSError:
        return None
    for link in links:
        try:
            if os.readlink(link) == target:
                return True
        except OSError:
            continue
    return False


def registered(pids: Iterable[int], dump_dir: Path) -> dict[int, ProcessIdentity]:
    """Those of ``pids`` that registered the dump handler (their dump file exists and they catch ``SIGUSR1``) and
    are alive, with their identity now: the only ones safe to signal."""
    found = {}
    for pid in pids:
        if not (dump_dir / f"{pid}.txt").exists():
            continue
        treatment, identity = disposition(pid), process_identity(pid)
        if treatment is not None and treatment.caught and identity is not None:
            found[pid] = identity
    return found


def _signal(identities: dict[int, ProcessIdentity]) -> None:
    for pid, identity in identities.items():
        if process_identity(pid) != identity:
            continue  # gone, or the pid is another process's now
        try:
            os.kill(pid, signal.SIGUSR1)
        except OSError:
            continue


def _written_since(path: Path, offset: int) -> str:
    """What a dump or samples file holds past ``offset``."""
    with open(path, encoding="utf-8", errors="replace") as written:
        written.seek(offset)
        return written.read()


def why_no_dump(pid: int, dump_dir: Path) -> str:
    """Why ``pid`` wrote nothing when signalled: how it treats ``SIGUSR1`` now, whether its dump file is still open,
    and the last handler ``benchmarks/stall_dump``'s watch saw replace faulthandler's (either level)."""
    treatment = disposition(pid)
    if treatment is None:
        return "process gone"
    held = _holds_open(pid, dump_dir / f"{pid}.txt")
    replaced = dump_dir / f"{pid}.handler.txt"
    lines = replaced.read_text(encoding="utf-8", errors="replace").splitlines() if replaced.exists() else []
    return (f"{treatment}, "
            + {True: "dump file open", False: "dump file NOT open", None: "its files unreadable"}[held]
            + (f", {lines[-1]}" if lines else ""))


def dump_once(pids: Iterable[int], dump_dir: Path, *, wait_s: float = 5.0) -> dict[int, str]:
    """Signal each registered one of ``pids`` once; after ``wait_s``, what each wrote (its tracebacks), by pid."""
    identities = registered(pids, dump_dir)
    sizes = {pid: (dump_dir / f"{pid}.txt").stat().st_size for pid in identities}
    _signal(identities)
    time.sleep(wait_s)
    return {pid: _written_since(dump_dir / f"{pid}.txt", size) for pid, size in sizes.items()}


class StackSampler:
    """While entered, every one of ``pids`` that runs ``benchmarks/stall_dump``'s sampler (its
    ``<pid>.samples.txt`` exists in ``dump_dir``) samples its own threads (the ``sampling`` gate file exists
    meanwhile); then :meth:`samples` parses what each wrote. No process is signalled."""

    def __init__(self, pids: Iterable[int], dump_dir: Path) -> None:
        self.dump_dir = dump_dir
        self.gate = dump_dir / "sampling"
        self.pids = [pid for pid in pids if self._file(pid).exists()]
        self._offsets: dict[int, int] = {}
        self.seconds = 0.0

    def _file(self, pid: int) -> Path:
        return self.dump_dir / f"{pid}.samples.txt"

    def __enter__(self) -> StackSampler:
        self._offsets = {pid: self._file(pid).stat().st_size for pid in self.pids}
        self._t0 = time.monotonic()
        self.gate.touch()
        return self

    def __exit__(self, *exc: object) -> None:
        self.gate.unlink(missing_ok=True)
        self.seconds = time.monotonic() - self._t0
        time.sleep(0.2)  # the last sample's write

    def samples(self, pid: int) -> list[Sample]:
        return parse_dumps(_written_since(self._file(pid), self._offsets.get(pid, 0)))

    def account(self, pid: int) -> str:
        """What ``pid``'s sampler gave while entered: the samples, the seconds, whether the process is alive."""
        alive = disposition(pid) is not None
        return (f"{len(self.samples(pid))} samples in {self.seconds:.1f} s"
                + ("" if alive else ", process gone"))


def report(samples: list[Sample], anchor: str, *, top: int = 10, account: str = "") -> str:
    """The ``top`` call paths under ``anchor`` and innermost frames, as shares of the samples (``account`` says
    why there are none)."""
    if not samples:
        return f"  (no samples{': ' + account if account else ''})"
    lines = []
    for title, counts in (("under " + anchor, phases(samples, anchor)), ("innermost", innermost(samples, anchor))):
        lines.append(f"  {title} ({len(samples)} samples):")
        lines += [f"    {n / len(samples):6.1%}  {path}" for path, n in counts.most_common(top)]
    return "\n".join(lines)
