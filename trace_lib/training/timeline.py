"""Wall-time phases of a training launch, read from ``trainer.log`` (each line prefixed ``[+SECONDS]``).

``phase_times(log_path) -> dict[str, float]``: seconds spent in python/verl import, Ray start, worker and
vLLM-engine start (plus dataset load), the training step(s), checkpoint save plus the post-step validation,
and shutdown, split at lines verl 0.9.1 prints (``MARKERS``). A marker that never appears leaves its phase out.
"""

from __future__ import annotations

import re
from pathlib import Path

#: (phase that ends at the marker, substring verl prints at that point), in launch order.
MARKERS: tuple[tuple[str, str], ...] = (
    ("import", "ray init kwargs"),
    ("ray_start", "TaskRunner hostname"),
    ("engine_start", "Training Progress"),
    ("step", "local_global_step_folder"),
    ("save_and_validate", "step:1 "),
)
_STAMP = re.compile(r"^\[\+(\d+(?:\.\d+)?)s\] ")


def stamp(elapsed: float, line: str) -> str:
    """``line`` prefixed with its elapsed time."""
    return f"[+{elapsed:.3f}s] {line}"


def phase_times(log_path: Path) -> dict[str, float]:
    """Phase name -> seconds (the last phase, ``shutdown``, runs from the last marker to the last line)."""
    first_seen: dict[str, float] = {}
    last = 0.0
    for line in log_path.read_text(encoding="utf-8", errors="replace").splitlines():
        match = _STAMP.match(line)
        if not match:
            continue
        last = float(match.group(1))
        for phase, marker in MARKERS:
            if phase not in first_seen and marker in line:
                first_seen[phase] = last
    out: dict[str, float] = {}
    previous = 0.0
    for phase, _ in MARKERS:
        if phase in first_seen:
            out[phase] = round(first_seen[phase] - previous, 3)
            previous = first_seen[phase]
    out["shutdown"] = round(last - previous, 3)
    return out
