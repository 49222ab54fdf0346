"""The one fail-fast mechanism of every Hub download path (``data/hub_access``): an :class:`EndpointCheck` reaches its
endpoint at most once, from any number of threads; a refused endpoint is one line naming it at once and is not
connected to again; a file the HF cache holds needs no request; ``HF_HUB_OFFLINE`` connects to nothing; an inactive
check (a stand-in client) never connects; ``hub_timeouts`` sets huggingface_hub's two timeouts for a block only."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import httpx
import pytest
from huggingface_hub import constants, hf_hub_download

from trace_lib.data import hub_access
from trace_lib.data.hub_access import (ENDPOINT_HINT, NO_HUB_HINT, EndpointCheck, hub_client, hub_timeouts,
                                       reach_endpoint)
from trace_lib.errors import InputError
from trace_lib.testing.hub_server import REFUSED_REASON, LoopbackHub, refused_url
from trace_lib.testing.loopback_http import serving

pytestmark = pytest.mark.offline

REPO = "owner/data"
REVISION = "e" * 40
@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "table.tsv").write_bytes(b"index\tquestion\n0\thello\n")
    return root


@pytest.fixture
def reaches(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """Every endpoint :func:`reach_endpoint` is asked to reach (the real one still runs)."""
    calls: list[str | None] = []
    real = hub_access.reach_endpoint

    def counting(endpoint: str | None = None, **kwargs: object) -> None:
        calls.append(endpoint)
        real(endpoint, **kwargs)

    monkeypatch.setattr(hub_access, "reach_endpoint", counting)
    return calls


def test_one_check_reaches_its_endpoint_once_from_many_threads(repo):
    with LoopbackHub({(REPO, REVISION): repo}) as hub:
        check = EndpointCheck(hub.url)
        start = threading.Barrier(8)

        def ensure() -> None:
            start.wait()
            check.ensure()

        threads = [threading.Thread(target=ensure) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        check.ensure()
    assert hub.requests == ["HEAD /"]


def test_a_refused_endpoint_is_one_line_at_once_and_is_not_connected_to_again(reaches):
    url = refused_url()
    check = EndpointCheck(url)
    start = time.monotonic()
    with pytest.raises(InputError) as first:
        check.ensure()
    assert time.monotonic() - start < 5
    assert str(first.value) == (f"{url}: cannot connect to the Hugging Face Hub endpoint ({REFUSED_REASON}); "
                                f"{ENDPOINT_HINT}")
    with pytest.raises(InputError) as again:
        check.ensure()
    assert str(again.value) == str(first.value) and again.value is not first.value
    assert reaches == [url]


def test_a_file_in_the_hf_cache_needs_no_request(repo, tmp_path, reaches):
    cache = str(tmp_path / "cache")
    with LoopbackHub({(REPO, REVISION): repo}) as hub:
        hf_hub_download(REPO, "table.tsv", repo_type="dataset", revision=REVISION, cache_dir=cache, endpoint=hub.url)
    check = EndpointCheck(refused_url())
    check.ensure_for_file(REPO, "table.tsv", revision=REVISION, cache_dir=cache)  # cached: nothing reached
    assert reaches == []
    with pytest.raises(InputError, match="cannot connect"):
        check.ensure_for_file(REPO, "other.tsv", revision=REVISION, cache_dir=cache)


def test_offline_mode_connects_to_nothing(repo, monkeypatch, reaches):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    EndpointCheck(refused_url()).ensure()
    with LoopbackHub({(REPO, REVISION): repo}) as hub:
        EndpointCheck(hub.url).ensure()
    assert hub.requests == [] and reaches == []


def test_a_stand_in_client_gets_a_check_that_never_connects(reaches):
    stand_in = object()
    client, check = hub_client(stand_in, None)
    assert client is stand_in and not check.active
    check.ensure()
    check.ensure_for_file(REPO, "table.tsv", revision=REVISION)
    assert reaches == []
    url = refused_url()
    client, check = hub_client(None, EndpointCheck(url))
    assert client.endpoint == url and check.endpoint == url  # the client talks to the endpoint the check reaches


def test_a_timeout_names_where_it_came_from(monkeypatch):
    timeouts: list[float] = []

    class Session:
        def head(self, url: str, *, timeout: float, follow_redirects: bool) -> None:
            timeouts.append(timeout)
            raise httpx.ConnectTimeout("timed out")

    monkeypatch.setattr("huggingface_hub.get_session", Session)
    with pytest.raises(InputError) as given:
        EndpointCheck("http://127.0.0.1:9", timeout=0.25, timeout_from="--timeout").ensure()
    assert "accepted no connection within 0.25 s (--timeout)" in str(given.value)
    with pytest.raises(InputError) as default:
        EndpointCheck("http://127.0.0.1:9").ensure()
    assert f"within {constants.HF_HUB_ETAG_TIMEOUT:g} s (HF_HUB_ETAG_TIMEOUT)" in str(default.value)
    assert timeouts == [0.25, float(constants.HF_HUB_ETAG_TIMEOUT)]


def test_hub_timeouts_last_for_the_block_only():
    before = (constants.HF_HUB_ETAG_TIMEOUT, constants.HF_HUB_DOWNLOAD_TIMEOUT)
    with pytest.raises(RuntimeError):
        with hub_timeouts(2.5):
            assert (constants.HF_HUB_ETAG_TIMEOUT, constants.HF_HUB_DOWNLOAD_TIMEOUT) == (2.5, 2.5)
            raise RuntimeError("the command failed")
    assert (constants.HF_HUB_ETAG_TIMEOUT, constants.HF_HUB_DOWNLOAD_TIMEOUT) == before
    with hub_timeouts(None):
        assert (constants.HF_HUB_ETAG_TIMEOUT, constants.HF_HUB_DOWNLOAD_TIMEOUT) == before


@pytest.mark.parametrize(("error", "line"), [
    (httpx.ConnectError("[Errno 111] Connection refused"), "ConnectError: [Errno 111] Connection refused"),
    (OSError("401 Client Error\nRepository Not Found for url"), "OSError: 401 Client Error"),  # its first line
])
def test_a_failed_hub_call_is_one_line_naming_what_was_fetched(error, line):
    with pytest.raises(InputError) as refused:
        with hub_access.hub_access("org/data@abc:file.tsv"):
            raise error
    assert str(refused.value) == f"org/data@abc:file.tsv: Hugging Face Hub download failed: {line}; {NO_HUB_HINT}"


def test_an_endpoint_is_named_as_given_even_where_hf_endpoint_is_set(monkeypatch):
    """The endpoint passed in is named as such (with its trailing slash dropped); only the default one, taken from
    ``HF_ENDPOINT``, is named by the variable."""
    url = refused_url()
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(InputError) as refused:
        reach_endpoint(url + "/")
    assert str(refused.value).startswith(f"{url}: cannot connect to the Hugging Face Hub endpoint (")
    assert str(refused.value).endswith(f"; {ENDPOINT_HINT}")


class _Session:
    """``huggingface_hub.get_session()``'s stand-in: ``head`` records its arguments and raises ``error``."""

    def __init__(self, error):
        self.error, self.calls = error, []

    def head(self, url, **kwargs):
        self.calls.append((url, kwargs))
        if self.error is not None:
            raise self.error


def _with_session(monkeypatch, error):
    import huggingface_hub

    session = _Session(error)
    monkeypatch.setattr(huggingface_hub, "get_session", lambda: session)
    return session


def test_an_endpoint_that_accepts_no_connection_in_time_is_one_line(monkeypatch):
    from huggingface_hub import constants

    session = _with_session(monkeypatch, httpx.ConnectTimeout("timed out"))
    with pytest.raises(InputError) as refused:
        reach_endpoint("http://10.255.255.1")
    timeout = float(constants.HF_HUB_ETAG_TIMEOUT)
    assert str(refused.value) == (f"http://10.255.255.1: the Hugging Face Hub endpoint accepted no connection within "
                                  f"{timeout:g} s (HF_HUB_ETAG_TIMEOUT); {ENDPOINT_HINT}")
    [(url, kwargs)] = session.calls
    assert url == "http://10.255.255.1/" and kwargs["timeout"] == timeout  # the Hub's own metadata timeout


def test_an_endpoint_that_connected_then_failed_is_up(monkeypatch):
    """A timeout or a broken answer after the connection: transient, left to the Hub's own retries."""
    _with_session(monkeypatch, httpx.ReadTimeout("read timed out"))
    assert reach_endpoint("http://hub.example") is None
    _with_session(monkeypatch, httpx.RemoteProtocolError("server disconnected"))
    assert reach_endpoint("http://hub.example") is None


def test_a_redirect_is_an_answer_not_followed():
    """Any HTTP answer means the endpoint is up: a redirect to somewhere that refuses connections is not followed."""
    target = refused_url()

    class Redirect(BaseHTTPRequestHandler):
        def do_HEAD(self):  # noqa: N802
            self.send_response(302)
            self.send_header("Location", target + "/")
            self.end_headers()

        def log_message(self, *args):
            pass

    with serving(Redirect) as url:
        assert reach_endpoint(url) is None


def _client_of(library: str):
    """A real client of ``library``, as ``huggingface_hub.get_session()`` returns one: a ``requests.Session`` below
    1.0, an ``httpx.Client`` in 1.x, an ``httpx2.Client`` in 2.x."""
    module = pytest.importorskip(library, reason=f"{library} is not installed: no huggingface_hub of it to stand for")
    return module.Session() if library == "requests" else module.Client()


class _Redirect(BaseHTTPRequestHandler):
    target = ""

    def do_HEAD(self):  # noqa: N802
        self.send_response(302)
        self.send_header("Location", self.target + "/")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("library", ["requests", "httpx", "httpx2"])
def test_every_client_huggingface_hub_has_had_reaches_an_endpoint_the_same_way(monkeypatch, library):
    """A refused endpoint is one line naming it, and an answering one (a redirect to a refused port, not followed)
    is up, through a real client of each library (loopback)."""
    import huggingface_hub

    client = _client_of(library)
    monkeypatch.setattr(huggingface_hub, "get_session", lambda: client)
    url = refused_url()
    with pytest.raises(InputError) as refused:
        reach_endpoint(url)
    line = str(refused.value)
    assert line.startswith(f"{url}: cannot connect to the Hugging Face Hub endpoint (") and "\n" not in line
    assert REFUSED_REASON in line and line.endswith(f"; {ENDPOINT_HINT}")
    monkeypatch.setattr(_Redirect, "target", refused_url())
    with serving(_Redirect) as answering:
        assert reach_endpoint(answering) is None


@pytest.mark.parametrize("library", ["requests", "httpx", "httpx2"])
def test_each_librarys_errors_mean_the_same_for_the_endpoint(monkeypatch, library):
    """Each library's own exceptions: no connection in time, no connection, and a failure after connecting."""
    module = pytest.importorskip(library, reason=f"{library} is not installed: its exceptions cannot be raised")
    errors = module.exceptions if library == "requests" else module
    outcomes = {}
    for name in ("ConnectTimeout", "ReadTimeout"):
        _with_session(monkeypatch, getattr(errors, name)("timed out"))
        try:
            outcomes[name] = reach_endpoint("http://hub.example", timeout=0.5)
        except InputError as exc:
            outcomes[name] = str(exc)
    refusal = errors.ConnectionError if library == "requests" else errors.ConnectError
    _with_session(monkeypatch, refusal("[Errno 111] Connection refused"))
    with pytest.raises(InputError, match=r"cannot connect to the Hugging Face Hub endpoint \(\[Errno 111\]"):
        reach_endpoint("http://hub.example")
    assert "accepted no connection within 0.5 s (HF_HUB_ETAG_TIMEOUT)" in outcomes["ConnectTimeout"]
    assert outcomes["ReadTimeout"] is None  # connected: left to the Hub's own retries
    with pytest.raises(InputError, match=r"^org/x: Hugging Face Hub download failed: ConnectTimeout: timed out; "):
        with hub_access.hub_access("org/x"):
            raise errors.ConnectTimeout("timed out")


@pytest.mark.parametrize("endpoint", ["notaurl", "ftp://hub", "http://", "http://[::1", "http://127.0.0.1:99999"],
                         ids=["no-scheme", "ftp", "no-host", "bad-ipv6", "port-out-of-range"])
def test_a_malformed_endpoint_is_one_line_naming_it_before_any_connection(endpoint, monkeypatch, reaches):
    """huggingface_hub parses HF_ENDPOINT at import (a malformed one was a ValueError traceback from that import) or
    fails each request later: an active check refuses it when it is made, naming where it came from."""
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    with pytest.raises(InputError) as refused:
        EndpointCheck()
    assert refused.value.render().startswith(f"HF_ENDPOINT {endpoint}: not a Hugging Face Hub endpoint: ")
    monkeypatch.delenv("HF_ENDPOINT")
    with pytest.raises(InputError, match=r"not a Hugging Face Hub endpoint"):
        EndpointCheck(endpoint)
    EndpointCheck(endpoint, active=False)  # a stand-in client's check reads no endpoint
    assert reaches == []


@pytest.mark.parametrize("variable", hub_access.HUB_TIMEOUT_VARIABLES)
@pytest.mark.parametrize("value", ["abc", "", "1.5", "nan", "-5", "99999999999"],
                         ids=["word", "empty", "fraction", "nan", "negative", "overflow"])
def test_a_hub_timeout_huggingface_hub_cannot_parse_is_one_line_naming_it(variable, value, monkeypatch, reaches):
    """huggingface_hub reads both timeouts with int() at import: these were ValueError or OverflowError tracebacks."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(InputError) as refused:
        EndpointCheck()
    assert refused.value.render().startswith(f"{variable}: huggingface_hub needs a whole number of seconds from 0 ")
    assert f"found {value!r}" in refused.value.render() and reaches == []


@pytest.mark.parametrize("value", ["0", " 7 ", "10000000"], ids=["zero-default", "padded", "largest"])
def test_a_hub_timeout_it_parses_is_accepted(value, monkeypatch):
    for variable in hub_access.HUB_TIMEOUT_VARIABLES:
        monkeypatch.setenv(variable, value)
    EndpointCheck()


@pytest.mark.parametrize("error", [httpx.InvalidURL("Invalid port: ':1'"), ValueError("bad port"),
                                   ImportError("Using SOCKS proxy, but the 'socksio' package is not installed."),
                                   FileNotFoundError(2, "No such file or directory")],
                         ids=["invalid-url", "value", "socks", "ca-file"])
def test_a_client_the_environment_cannot_make_is_one_line(error, monkeypatch):
    """httpx builds its proxies and TLS context when huggingface_hub makes its client: a proxy variable that is not
    a URL, a SOCKS proxy without socksio or a missing SSL_CERT_FILE was a traceback there."""
    def get_session():  # noqa: ANN202
        raise error

    monkeypatch.setattr("huggingface_hub.get_session", get_session)
    with pytest.raises(InputError) as refused:
        reach_endpoint(refused_url())
    assert "the Hugging Face Hub client cannot be made from this environment" in refused.value.render()
    assert hub_access.CLIENT_HINT in refused.value.render()
