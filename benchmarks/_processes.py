"""This machine's processes as ``/proc`` lists them: who descends from whom, and the CPU each has used.

One reader for the benchmarks that watch vLLM's engine processes (``engine_input_ceiling.py``,
``harness_overhead.py``); Linux only, as the GPU machine is.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Process:
    """One ``/proc/<pid>/stat`` line: the parent, the command name and user plus system CPU seconds so far."""

    pid: int
    ppid: int
    name: str
    cpu_s: float


def read_process(pid: int) -> Process | None:
    """``pid``'s :class:`Process`, or None when it is gone (or never was)."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as handle:
            line = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    name, rest = line[line.index("(") + 1:line.rindex(")")], line[line.rindex(")") + 1:].split()
    return Process(int(pid), int(rest[1]), name, (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK"))


def process_table() -> dict[int, Process]:
    """Every live process by pid (one that ends while the table is read is left out)."""
    table = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            process = read_process(int(entry.name))
            if process is not None:
                table[process.pid] = process
    return table


def descendants(pid: int | None = None) -> list[Process]:
    """The live descendants of ``pid`` (this process by default), parents before their children."""
    table, found, frontier = process_table(), [], [os.getpid() if pid is None else pid]
    children: dict[int, list[Process]] = {}
    for process in table.values():
        children.setdefault(process.ppid, []).append(process)
    while frontier:
        for child in children.get(frontier.pop(0), []):
            found.append(child)
            frontier.append(child.pid)
    return found


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of ``pid`` so far (0.0 when it is gone)."""
    process = read_process(pid)
    return 0.0 if process is None else process.cpu_s
