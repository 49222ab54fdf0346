"""The inputs every doctor check reads (roots, judge URL, environment) and the result type they return.

A check never raises for a missing piece: it returns a :class:`CheckResult` whose ``missing`` names the one thing
absent and whose ``fix`` is the exact command (or step) that supplies it. Facts that several checks share (the
release, installed versions) are computed once through the context.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping


class Status(str, enum.Enum):
    OK = "ok"
    MISSING = "missing"  # the lane that needs it cannot run
    INFO = "info"  # reported, never blocks a lane


@dataclass(frozen=True)
class CheckResult:
    """One check's answer: ``detail`` says what was found; ``missing``/``fix`` are set when it blocks."""

    name: str
    status: Status
    detail: str
    missing: str = ""
    fix: str = ""

    @property
    def ok(self) -> bool:
        return self.status is not Status.MISSING

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status.value, "detail": self.detail,
                "missing": self.missing or None, "fix": self.fix or None}


@dataclass
class DoctorContext:
    """What the user pointed the doctor at; ``None`` roots fall back to their environment variables/defaults."""

    trace_root: str | None = None
    model_root: str | None = None
    data_root: str | None = None
    judge_url: str | None = None
    archive_root: str | None = None
    probe_cuda: bool = False
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    timeout: float = 1.5  # seconds for the judge probe and nvidia-smi
    _release: Any = field(default=None, repr=False)

    def release(self) -> Any:
        """The located release (``--trace-root`` / ``TRACE_ROOT`` / discovery / bundled); raises its error."""
        if self._release is None:
            from trace_lib.release.locate import locate_release

            self._release = locate_release(self.trace_root, env=dict(self.env))
        return self._release

    def root(self, value: str | None, env_var: str, leaf: str) -> Path:
        """Flag, then ``env_var``, then ``trace-repro-work/<leaf>`` (the campaign commands' defaults)."""
        from trace_lib.options import DEFAULT_WORK_DIR

        chosen = value or self.env.get(env_var)
        return Path(chosen) if chosen else DEFAULT_WORK_DIR / leaf
