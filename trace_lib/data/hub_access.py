"""Hugging Face Hub calls whose failures (offline, unreachable, unknown repo or revision) become one-line errors.

``huggingface_hub`` reports every such failure as an ``OSError`` subclass (``OfflineModeIsEnabled``,
``LocalEntryNotFoundError``, ``HfHubHTTPError`` ...); :func:`hub_access` turns them into :class:`InputError`
naming what was being fetched, so a machine without network gets an explanation instead of a traceback.

An endpoint that refuses or accepts no connection is told apart before the first download
(:func:`reach_endpoint`): ``hf_hub_download`` retries a failed metadata request as transient (``http_backoff``
counts ``httpx.ConnectError`` a network error: five retries after 1, 2, 4, 8 and 8 s), so a dead endpoint took
about 24 s per file to fail, and a blackholed one minutes. Once the endpoint has answered, the Hub's own retries
stay for what is transient (429, 5xx, a timeout while it answers).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

from trace_lib.errors import InputError

NO_HUB_HINT = ("this step needs the Hugging Face Hub (network, and HF_HUB_OFFLINE unset); "
               "run it on a machine that can reach the Hub")
ENDPOINT_HINT = "check the endpoint (HF_ENDPOINT), the network and any proxy, or run this where the Hub can be reached"


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


def reach_endpoint(endpoint: str | None = None) -> None:
    """Check that the Hub ``endpoint`` (default: ``HF_ENDPOINT`` or huggingface.co, as ``huggingface_hub`` resolves
    it) accepts a connection: one request through ``huggingface_hub``'s own client (its proxies, offline mode and
    headers) with its metadata timeout (``HF_HUB_ETAG_TIMEOUT``), no retry. Any HTTP answer, even an error status,
    is an endpoint that is up.

    Raises:
        InputError: the connection was refused, the host has no route or no address, or no connection was accepted
            within the timeout (one line naming the endpoint, and ``HF_ENDPOINT`` when it came from there).
    """
    import httpx
    from huggingface_hub import constants, get_session

    url = (endpoint or constants.ENDPOINT).rstrip("/")
    field = f"HF_ENDPOINT {url}" if endpoint is None and os.environ.get("HF_ENDPOINT") else url
    timeout = float(constants.HF_HUB_ETAG_TIMEOUT)
    try:
        get_session().head(url + "/", timeout=httpx.Timeout(timeout), follow_redirects=False)
    except httpx.ConnectError as exc:  # refused, no route to the host, a name that does not resolve
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"cannot connect to the Hugging Face Hub endpoint ({reason})", field=field,
                         hint=ENDPOINT_HINT) from None
    except httpx.ConnectTimeout:
        raise InputError(f"the Hugging Face Hub endpoint accepted no connection within {timeout:g} s "
                         "(HF_HUB_ETAG_TIMEOUT)", field=field, hint=ENDPOINT_HINT) from None
    except httpx.HTTPError:
        pass  # connected (a timeout or a broken answer after that): transient, left to the Hub's own retries
