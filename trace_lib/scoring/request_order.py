"""The order judge requests go out in: grouped for vLLM's prefix cache, a deterministic function of the requests.

:func:`prefix_order` sorts the prompts lexicographically (ties keep their positions). Lexicographic order is the
depth-first order of the prompts' prefix trie, so every group of prompts sharing a prefix (the judge instruction,
then the instruction and the question, ...) is contiguous, the longest shared prefixes innermost; the judge
engine then sees each shared prefix in one burst and computes it once. Two slices of the same benchmark (decoding
seeds of one model: the same instruction and questions, other responses) ordered this way walk the questions in
the same order, so scored side by side their requests for one question reach the engine together.

Only the dispatch order changes: replies are mapped back to their prompts' positions, so what a protocol sees is
the same in either order. ``TRACE_JUDGE_PREFIX_ORDER=0`` sends prompts in the protocol's order (for measuring).
"""

from __future__ import annotations

from typing import Sequence

from trace_lib.options import JUDGE_PREFIX_ORDER_ENV

ORDER_ENV = JUDGE_PREFIX_ORDER_ENV.name


def enabled() -> bool:
    """Whether judge requests are ordered for prefix reuse (``TRACE_JUDGE_PREFIX_ORDER``, default on; ``0``,
    ``false``, ``no`` or ``off`` turn it off)."""
    return JUDGE_PREFIX_ORDER_ENV.read().strip().lower() not in ("0", "false", "no", "off")


def prefix_order(texts: Sequence[str]) -> list[int]:
    """The positions of ``texts`` in dispatch order: lexicographic by text, equal texts by position."""
    return sorted(range(len(texts)), key=lambda i: (texts[i], i))


def dispatch_order(texts: Sequence[str]) -> list[int]:
    """:func:`prefix_order` when :func:`enabled`, else the given order."""
    return prefix_order(texts) if enabled() else list(range(len(texts)))
