"""Hugging Face Hub calls whose failures (offline, unreachable, unknown repo or revision) become one-line errors.

``huggingface_hub`` reports every such failure as an ``OSError`` subclass (``OfflineModeIsEnabled``,
``LocalEntryNotFoundError``, ``HfHubHTTPError`` ...); :func:`hub_access` turns them into :class:`InputError`
naming what was being fetched, so a machine without network gets an explanation instead of a traceback.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from trace_lib.errors import InputError

NO_HUB_HINT = ("this step needs the Hugging Face Hub (network, and HF_HUB_OFFLINE unset); "
               "run it on a machine that can reach the Hub")


def _hub_error_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [OSError]
    try:  # huggingface_hub >= 1.0 raises httpx errors for transport failures
        import httpx

        types.append(httpx.HTTPError)
    except ImportError:
        pass
    return tuple(types)


@contextmanager
def hub_access(what: str) -> Iterator[None]:
    """Run Hub calls for ``what`` (e.g. ``"maveryn/trace@4e5b543"``); failures raise one ``InputError`` line."""
    try:
        yield
    except InputError:
        raise
    except _hub_error_types() as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"Hugging Face Hub download failed: {type(exc).__name__}: {reason}", field=what,
                         hint=NO_HUB_HINT) from None
