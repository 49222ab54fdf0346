"""Hugging Face Hub calls whose failures (offline, unreachable, unknown repo or revision) become one-line errors.

``huggingface_hub`` reports every such failure as an ``OSError`` subclass (``OfflineModeIsEnabled``,
``LocalEntryNotFoundError``, ``HfHubHTTPError`` ...); :func:`hub_access` turns them into :class:`InputError`
naming what was being fetched, so a machine without network gets an explanation instead of a traceback.

An endpoint that refuses or accepts no connection is told apart before the first network request
(:func:`reach_endpoint`): ``hf_hub_download`` retries a failed metadata request as transient (``http_backoff``
counts a connection error as a network error: five retries after 1, 2, 4, 8 and 8 s), so a dead endpoint took
about 24 s per file to fail, and a blackholed one minutes. Once the endpoint has answered, the Hub's own retries
stay for what is transient (429, 5xx, a timeout while it answers). Every Hub download path (``fetch-runs``,
``prepare-data``, ``prepare-models``, ``train prepare``, ``validation prepare --download``) goes through one
:class:`EndpointCheck` per command: it reaches the endpoint at most once, only when a request is about to leave the
machine (never for a file the HF cache or a complete local copy serves), and never under ``HF_HUB_OFFLINE``.
"""

from __future__ import annotations

import copy
import importlib
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from trace_lib.errors import InputError
from trace_lib.options import MAX_SECONDS, url_problem

NO_HUB_HINT = ("this step needs the Hugging Face Hub (network, and HF_HUB_OFFLINE unset); "
               "run it on a machine that can reach the Hub")
ENDPOINT_HINT = "check the endpoint (HF_ENDPOINT), the network and any proxy, or run this where the Hub can be reached"
CLIENT_HINT = ("check the proxy variables (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY) and SSL_CERT_FILE; "
               "a SOCKS proxy needs httpx[socks]")
#: What names the metadata timeout in an error line when no timeout is given.
ETAG_TIMEOUT_ENV = "HF_HUB_ETAG_TIMEOUT"


@dataclass(frozen=True)
class _TransportErrors:
    """What the HTTP library of ``huggingface_hub``'s client may raise, by what it means for an endpoint:
    ``requests`` (huggingface_hub < 1.0, the paper's environment), ``httpx`` (1.x) and ``httpx2`` (2.x), whichever
    are installed."""

    no_connection_in_time: tuple[type[BaseException], ...]  # checked first: requests' subclasses its refusal
    no_connection: tuple[type[BaseException], ...]  # refused, no route to the host, a name that does not resolve
    any: tuple[type[BaseException], ...]  # every transport error, also after the connection
    no_client: tuple[type[BaseException], ...]  # the client could not be made from the environment (a proxy URL)


def _transport_errors() -> _TransportErrors:
    in_time: list[type[BaseException]] = []
    refused: list[type[BaseException]] = []
    every: list[type[BaseException]] = []
    no_client: list[type[BaseException]] = [ValueError, ImportError, OSError]  # a port, httpx[socks], a CA file
    for name in ("httpx", "httpx2"):
        try:
            library = importlib.import_module(name)
        except ImportError:
            continue
        in_time.append(library.ConnectTimeout)
        refused.append(library.ConnectError)
        every.append(library.HTTPError)
        no_client.append(library.InvalidURL)
    try:
        from requests import exceptions
    except ImportError:
        pass
    else:
        in_time.append(exceptions.ConnectTimeout)
        refused.append(exceptions.ConnectionError)
        every.append(exceptions.RequestException)
    return _TransportErrors(tuple(in_time), tuple(refused), tuple(every), tuple(no_client))


def _hub_error_types() -> tuple[type[BaseException], ...]:
    return (OSError, *_transport_errors().any)


def _follows_redirects_by(session: Any) -> str:
    """The keyword that turns redirects off for ``session``'s ``head``: ``allow_redirects`` for a ``requests``
    session (huggingface_hub < 1.0), ``follow_redirects`` for ``httpx`` and ``httpx2`` clients."""
    return "allow_redirects" if type(session).__module__.partition(".")[0] == "requests" else "follow_redirects"


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


def check_endpoint_url(url: str, *, field: str) -> None:
    """Refuse an endpoint that is not an ``http(s)`` URL with a host (:func:`~trace_lib.options.url_problem`), in one
    line naming ``field``. ``huggingface_hub`` parses ``HF_ENDPOINT`` when it is imported, and a malformed one
    (``http://[::1``, port 99999) is a ``ValueError`` from deep inside that import; one without a scheme fails each
    request later.

    Raises:
        InputError: ``url`` is not such a URL.
    """
    problem = url_problem(url)
    if problem is not None:
        raise InputError(f"not a Hugging Face Hub endpoint: {problem}", field=field,
                         hint="give the Hub's URL, e.g. https://huggingface.co (HF_ENDPOINT unset: that one)")


#: The timeouts huggingface_hub reads with ``int()`` when it is imported (0: its default of 10 s).
HUB_TIMEOUT_VARIABLES = ("HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT")


def check_hub_environment() -> None:
    """Refuse, in one line naming the variable, what ``huggingface_hub`` cannot parse when it is imported, where it
    is a ``ValueError`` or ``OverflowError`` traceback: ``HF_ENDPOINT`` (:func:`check_endpoint_url`) and the
    timeouts of :data:`HUB_TIMEOUT_VARIABLES` (a whole number of seconds; ``1.5``, ``nan`` or ``-5`` are not).

    Raises:
        InputError: such a variable is set to a value ``huggingface_hub`` cannot use.
    """
    endpoint = os.environ.get("HF_ENDPOINT")
    if endpoint:
        check_endpoint_url(endpoint, field=f"HF_ENDPOINT {endpoint}")
    for name in HUB_TIMEOUT_VARIABLES:
        value = os.environ.get(name)
        if value is None:
            continue
        try:
            seconds = int(value)
        except ValueError:
            seconds = -1
        if not 0 <= seconds <= MAX_SECONDS:
            raise InputError(f"huggingface_hub needs a whole number of seconds from 0 to {MAX_SECONDS:,} "
                             f"(0: its default; found {value!r})", field=name, hint="e.g. 10, or unset it")


def reach_endpoint(endpoint: str | None = None, *, timeout: float | None = None,
                   timeout_from: str = ETAG_TIMEOUT_ENV) -> None:
    """Check that the Hub ``endpoint`` (default: ``HF_ENDPOINT`` or huggingface.co, as ``huggingface_hub`` resolves
    it) accepts a connection: one request through ``huggingface_hub``'s own client (its proxies, offline mode and
    headers) within ``timeout`` seconds (default: its metadata timeout, ``HF_HUB_ETAG_TIMEOUT``), no retry. Any HTTP
    answer, even an error status, is an endpoint that is up. ``timeout_from`` names the timeout in the error line.

    Raises:
        InputError: the connection was refused, the host has no route or no address, or no connection was accepted
            within the timeout (one line naming the endpoint, and ``HF_ENDPOINT`` when it came from there); or the
            client cannot be made (a proxy variable that is not a URL, a SOCKS proxy without ``socksio``).
    """
    from huggingface_hub import constants, get_session

    url = (endpoint or constants.ENDPOINT).rstrip("/")
    field = f"HF_ENDPOINT {url}" if endpoint is None and os.environ.get("HF_ENDPOINT") else url
    seconds = float(constants.HF_HUB_ETAG_TIMEOUT if timeout is None else timeout)
    errors = _transport_errors()
    try:
        session = get_session()  # httpx builds its proxies from the environment here
    except errors.no_client as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"the Hugging Face Hub client cannot be made from this environment ({type(exc).__name__}: "
                         f"{reason})", field=field, hint=CLIENT_HINT) from None
    try:
        session.head(url + "/", timeout=seconds, **{_follows_redirects_by(session): False})
    except errors.no_connection_in_time:
        raise InputError(f"the Hugging Face Hub endpoint accepted no connection within {seconds:g} s "
                         f"({timeout_from})", field=field, hint=ENDPOINT_HINT) from None
    except errors.no_connection as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"cannot connect to the Hugging Face Hub endpoint ({reason})", field=field,
                         hint=ENDPOINT_HINT) from None
    except errors.any:
        pass  # connected (a timeout or a broken answer after that): transient, left to the Hub's own retries


def _offline() -> bool:
    """``huggingface_hub``'s offline mode (``HF_HUB_OFFLINE``), as its client reads it at each request."""
    from huggingface_hub import constants

    is_offline = getattr(constants, "is_offline_mode", None)
    return bool(is_offline() if callable(is_offline) else constants.HF_HUB_OFFLINE)


class EndpointCheck:
    """One Hugging Face Hub endpoint, reached at most once, just before the first request that needs the network.

    ``endpoint`` None: ``HF_ENDPOINT`` or huggingface.co, as ``huggingface_hub`` resolves it; :meth:`api` is a client
    for the same endpoint. ``timeout`` None: ``HF_HUB_ETAG_TIMEOUT``; ``timeout_from`` names a given one in the error
    line (e.g. ``"--timeout"``). ``active`` False: never connects (the client is a stand-in, not ``huggingface_hub``'s).
    One instance serves one command and all its threads. An active check refuses at once a malformed endpoint
    (``endpoint``, :func:`check_endpoint_url`) or Hub variable (:func:`check_hub_environment`).
    """

    def __init__(self, endpoint: str | None = None, *, timeout: float | None = None,
                 timeout_from: str = ETAG_TIMEOUT_ENV, active: bool = True) -> None:
        if active:  # before anything imports huggingface_hub, which parses its variables at import
            check_hub_environment()
            if endpoint:
                check_endpoint_url(endpoint, field=endpoint)
        self.endpoint = endpoint
        self.timeout = timeout
        self.timeout_from = timeout_from
        self.active = active
        self._lock = threading.Lock()
        self._reached = False
        self._failure: InputError | None = None

    def ensure(self) -> None:
        """Reach the endpoint (:func:`reach_endpoint`) unless this check has already: later calls, in any thread,
        return at once, or raise the first call's error again without connecting. Under ``HF_HUB_OFFLINE`` nothing
        is reached: the Hub call that follows raises its own offline error (one line through :func:`hub_access`).

        Raises:
            InputError: the endpoint refused or accepted no connection (one line naming it).
        """
        if not self.active or _offline():
            return
        with self._lock:
            if self._failure is not None:
                raise copy.copy(self._failure) from None
            if self._reached:
                return
            try:
                reach_endpoint(self.endpoint, timeout=self.timeout, timeout_from=self.timeout_from)
            except InputError as exc:
                self._failure = exc
                raise
            self._reached = True

    def ensure_for_file(self, repo_id: str, filename: str, *, revision: str, repo_type: str = "dataset",
                        cache_dir: str | None = None) -> None:
        """:meth:`ensure`, unless the HF cache (``cache_dir``, default ``HF_HUB_CACHE``) holds ``filename`` of
        ``repo_id`` at ``revision``: then ``hf_hub_download`` (cache mode, a pinned commit) serves it with no request.

        Raises:
            InputError: as :meth:`ensure`.
        """
        if not self.active:
            return
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(repo_id, filename, cache_dir=cache_dir, revision=revision,
                                        repo_type=repo_type)
        if not isinstance(cached, str):
            self.ensure()

    def api(self) -> Any:
        """A ``huggingface_hub.HfApi`` for this check's endpoint (``model_info``, ``dataset_info``, ``hf_hub_download``,
        ``snapshot_download`` ...). Raises ``ImportError`` when ``huggingface_hub`` is missing (callers name the
        extra that brings it)."""
        from huggingface_hub import HfApi

        return HfApi(endpoint=self.endpoint)


def hub_client(hub: Any = None, check: EndpointCheck | None = None) -> tuple[Any, EndpointCheck]:
    """The client a download calls and the check its network requests wait for. ``hub`` None: ``check.api()``
    (``check`` None: a new :class:`EndpointCheck` for ``HF_ENDPOINT``); an injected ``hub`` (a stand-in) keeps the
    ``check`` given, and without one gets an inactive check (nothing of huggingface_hub's is reached for it).

    Raises:
        ImportError: ``hub`` is None and ``huggingface_hub`` is missing.
    """
    if hub is None:
        check = check or EndpointCheck()
        return check.api(), check
    return hub, check or EndpointCheck(active=False)


@contextmanager
def hub_timeouts(seconds: float | None) -> Iterator[None]:
    """Within the block, ``huggingface_hub``'s per-request timeouts are ``seconds``: the metadata request's
    (``HF_HUB_ETAG_TIMEOUT``, which ``hf_hub_download`` uses over its ``etag_timeout`` argument whenever it is not the
    default) and the body download's (``HF_HUB_DOWNLOAD_TIMEOUT``, which no argument sets). Both live in
    ``huggingface_hub.constants`` and are read at each request, so they are set there for the block and restored on
    exit, also after an error: process-wide while the block lasts, meant to wrap one command's downloads (the CLI runs
    one command per process). ``None``: nothing changes.
    """
    if seconds is None:
        yield
        return
    from huggingface_hub import constants

    names = ("HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT")
    saved = {name: getattr(constants, name) for name in names}
    for name in names:
        setattr(constants, name, seconds)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(constants, name, value)
