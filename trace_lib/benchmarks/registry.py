"""Suite key -> protocol module: an explicit, greppable table, imported lazily.

Each value is ``"module:attribute"``. A key whose module does not exist yet is *registered but not
implemented*: its slices fail with that reason (never pass, never skip silently).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from trace_lib.errors import ProtocolNotImplementedError, UsageError, did_you_mean

if TYPE_CHECKING:
    from trace_lib.benchmarks.protocol import Protocol

PROTOCOLS: dict[str, str] = {
    # Charts & Tables
    "chartqapro": "trace_lib.benchmarks.chartqapro:PROTOCOL",
    "charxivreason": "trace_lib.benchmarks.charxivreason:PROTOCOL",
    "tablevqabench": "trace_lib.benchmarks.tablevqabench:PROTOCOL",
    "evochart": "trace_lib.benchmarks.evochart:PROTOCOL",
    # Visual Math
    "mathvision": "trace_lib.benchmarks.mathvision:PROTOCOL",
    "mathvista": "trace_lib.benchmarks.mathvista:PROTOCOL",
    "mathverse": "trace_lib.benchmarks.mathverse:PROTOCOL",
    "wemath": "trace_lib.benchmarks.wemath:PROTOCOL",
    # Science & General
    "phyx_mini_mc": "trace_lib.benchmarks.phyx_mini_mc:PROTOCOL",
    "mmmu_pro_vision": "trace_lib.benchmarks.mmmu_pro_vision:PROTOCOL",
    "realworldqa": "trace_lib.benchmarks.realworldqa:PROTOCOL",
    "mmstar": "trace_lib.benchmarks.mmstar:PROTOCOL",
    # Spatial Reasoning
    "embspatial": "trace_lib.benchmarks.embspatial:PROTOCOL",
    "spatialvizbench_cot": "trace_lib.benchmarks.spatialvizbench_cot:PROTOCOL",
    "cvbench_3d": "trace_lib.benchmarks.cvbench_3d:PROTOCOL",
    "erqa": "trace_lib.benchmarks.erqa:PROTOCOL",
    # Perception & Counting
    "blink": "trace_lib.benchmarks.blink:PROTOCOL",
    "countbenchqa": "trace_lib.benchmarks.countbenchqa:PROTOCOL",
    "countqa": "trace_lib.benchmarks.countqa:PROTOCOL",
    "treebench": "trace_lib.benchmarks.treebench:PROTOCOL",
    # Puzzles & Logic
    "puzzlevqa": "trace_lib.benchmarks.puzzlevqa:PROTOCOL",
    "visualpuzzles": "trace_lib.benchmarks.visualpuzzles:PROTOCOL",
    "logicvista": "trace_lib.benchmarks.logicvista:PROTOCOL",
    "mme_reasoning": "trace_lib.benchmarks.mme_reasoning:PROTOCOL",
}


def _check_known(key: str) -> str:
    if key not in PROTOCOLS:
        raise UsageError(f"unknown benchmark {key!r}", field="--benchmark", hint=did_you_mean(key, list(PROTOCOLS)))
    return PROTOCOLS[key]


def is_implemented(key: str) -> bool:
    """Whether ``key``'s protocol module exists (imports it)."""
    try:
        get_protocol(key)
    except ProtocolNotImplementedError:
        return False
    return True


def get_protocol(key: str) -> Protocol:
    """The protocol of a suite key.

    Raises:
        UsageError: the key is not a suite benchmark (lists close matches).
        ProtocolNotImplementedError: the key is known but its protocol module is not written yet.
    """
    target = _check_known(key)
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise ProtocolNotImplementedError(
            "evaluation protocol not implemented", field=key, hint="this slice cannot be scored by trace-repro yet"
        ) from None
    protocol = getattr(module, attr)
    if protocol.key != key:
        raise RuntimeError(f"{target} declares key {protocol.key!r}, registered as {key!r}")
    return protocol
