"""``trace-repro fetch-release`` against a loopback HTTP server serving the release under test's files: the
happy path yields a release that passes the pinned check; any bad file leaves nothing written and lists every
failure."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from trace_lib.preflight.report import check_release
from trace_lib.release import identity
from trace_lib.release.fetch import INCOMPLETE_SUFFIX, FetchError, fetch_release
from trace_lib.release.locate import ReleaseRoot


class _Server(http.server.ThreadingHTTPServer):
    request_queue_size = 64  # the fetcher's parallel connections must not overflow the listen backlog


class ReleaseServer:
    """Serves ``/<repository>/<commit>/<path>`` from a release root; ``tamper``/``missing`` change answers."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tamper: set[str] = set()
        self.missing: set[str] = set()
        self.requests: list[str] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's spelling
                prefix = f"/{identity.REPOSITORY}/{identity.COMMIT}/"
                rel = self.path[len(prefix):] if self.path.startswith(prefix) else ""
                server.requests.append(rel)
                path = server.root / rel
                if not rel or rel in server.missing or not path.is_file():
                    self.send_error(404)
                    return
                body = path.read_bytes() + (b"tampered" if rel in server.tamper else b"")
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"


@pytest.fixture
def server(release) -> Iterator[ReleaseServer]:
    served = ReleaseServer(release.path)
    thread = threading.Thread(target=served.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield served
    served.httpd.shutdown()
    served.httpd.server_close()


def test_fetch_writes_a_release_that_passes_the_pinned_check(server, tmp_path):
    report = fetch_release(tmp_path / "release", base_url=server.url)
    assert report.downloaded == len(identity.CANONICAL_SHA256)
    assert sorted(server.requests) == sorted(identity.CANONICAL_SHA256)
    assert check_release(ReleaseRoot(tmp_path / "release")).ok
    assert not list((tmp_path / "release").rglob(f"*{INCOMPLETE_SUFFIX}"))


def test_fetch_keeps_verified_files_and_only_downloads_the_rest(server, tmp_path):
    dest = tmp_path / "release"
    fetch_release(dest, base_url=server.url)
    (dest / identity.SUITE).unlink()
    server.requests.clear()
    report = fetch_release(dest, base_url=server.url)
    assert server.requests == [identity.SUITE] and report.downloaded == 1


def test_every_bad_file_is_listed_and_nothing_is_written(server, tmp_path):
    server.tamper = {identity.RESULTS, identity.SUITE}
    server.missing = {identity.SOURCE_MAP}
    dest = tmp_path / "release"
    with pytest.raises(FetchError) as info:
        fetch_release(dest, base_url=server.url)
    problems = info.value.problems
    assert len(problems) == 3
    assert any(p.startswith(f"{identity.RESULTS}: sha256: differs from the paper release") for p in problems)
    assert any(p.startswith(f"{identity.SUITE}: sha256: differs from the paper release") for p in problems)
    assert any(p.startswith(f"{identity.SOURCE_MAP}: download failed: HTTP 404") for p in problems)
    assert not dest.exists()


def test_failure_leaves_an_existing_destination_untouched(server, tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    server.tamper = {identity.PROFILE_3B}
    with pytest.raises(FetchError):
        fetch_release(tmp_path, base_url=server.url)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["keep.txt"]


def test_unreachable_host_lists_every_file(tmp_path):
    with pytest.raises(FetchError) as info:
        fetch_release(tmp_path / "r", base_url="http://127.0.0.1:9", timeout=5)
    assert len(info.value.problems) == len(identity.CANONICAL_SHA256)
    assert all("download failed" in p for p in info.value.problems)


@pytest.mark.parametrize("base_url", ["notaurl", "ftp://host/raw", "http://", "http://[::1", "http://h:99999"],
                         ids=["no-scheme", "ftp", "no-host", "bad-ipv6", "port-out-of-range"])
def test_a_base_url_no_client_can_open_is_one_line_before_anything_is_made(tmp_path, base_url):
    from trace_lib.errors import UsageError

    wanted = r"^--base-url: (must be an http\(s\) URL with a host or a file URL|not a URL)"
    with pytest.raises(UsageError, match=wanted):
        fetch_release(tmp_path / "r", base_url=base_url)
    assert list(tmp_path.iterdir()) == []


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRACE_ROOT"}
    return subprocess.run([sys.executable, "-m", "trace_lib", "fetch-release", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def test_cli_success_and_failure(server, tmp_path):
    done = _cli("--dest", str(tmp_path / "ok"), "--base-url", server.url)
    assert done.returncode == 0, done.stderr
    assert f"next: trace-repro check --trace-root {tmp_path / 'ok'}" in done.stdout
    server.tamper = {identity.SYSTEM_PROMPT}
    failed = _cli("--dest", str(tmp_path / "bad"), "--base-url", server.url)
    assert failed.returncode == 1
    assert failed.stderr.splitlines()[0].startswith(f"error: {identity.SYSTEM_PROMPT}: sha256: differs")
    assert failed.stderr.splitlines()[-1].endswith("1 of 19 canonical files failed; nothing was written")


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_a_canonical_path_that_is_not_a_regular_file_is_refused_before_any_download(server, tmp_path, kind):
    from trace_lib.errors import UsageError

    dest = tmp_path / "release"
    target = dest / identity.SUITE
    target.parent.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("mine")
    os.mkfifo(target) if kind == "fifo" else target.symlink_to(elsewhere)
    with pytest.raises(UsageError) as refused:
        fetch_release(dest, base_url=server.url)
    assert refused.value.file == str(target) and server.requests == []
    assert elsewhere.read_text() == "mine" and (target.is_symlink() or kind == "fifo")


def test_an_interrupted_fetch_leaves_no_partial_file_and_no_new_directory(server, tmp_path, monkeypatch):
    import trace_lib.release.fetch as fetch_module

    real = fetch_module._download
    calls = []

    def interrupting(*args):
        calls.append(args[1])
        outcome = real(*args)  # this one completes, its partial file made ...
        if len(calls) == 3:
            raise KeyboardInterrupt  # ... and Ctrl-C lands before its result is handed back
        return outcome

    monkeypatch.setattr(fetch_module, "_download", interrupting)
    dest = tmp_path / "release"
    with pytest.raises(KeyboardInterrupt):
        fetch_release(dest, base_url=server.url, workers=1)
    assert not dest.exists() or not any(p.is_file() for p in dest.rglob("*")), list(dest.rglob("*"))


class _Trickle(http.server.BaseHTTPRequestHandler):
    """Answers every GET with 1,000 bytes sent one every 0.2 s."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's spelling
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()
        try:
            for _ in range(1000):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.2)
        except OSError:
            pass  # the client gave up

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def trickle() -> Iterator[str]:
    httpd = _Server(("127.0.0.1", 0), _Trickle)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()
    httpd.server_close()


def test_a_server_that_trickles_bytes_ends_at_the_timeout(tmp_path, trickle):
    """--timeout bounds the whole request: a server sending a byte every 0.2 s ends in one line, nothing kept."""
    started = time.monotonic()
    with pytest.raises(FetchError) as failed:
        fetch_release(tmp_path / "release", base_url=trickle, timeout=0.4)
    assert time.monotonic() - started < 15
    assert any("not done within --timeout 0.4 s" in p for p in failed.value.problems)
    assert not (tmp_path / "release").exists()
    for bad in (float("inf"), float("nan"), 1e400):
        with pytest.raises(Exception, match="--timeout"):
            fetch_release(tmp_path / "release", base_url="http://127.0.0.1:9", timeout=bad)


def test_sigterm_mid_fetch_stops_like_ctrl_c_and_leaves_nothing(tmp_path, trickle):
    import signal

    dest = tmp_path / "release"
    proc = subprocess.Popen([sys.executable, "-m", "trace_lib", "fetch-release", "--dest", str(dest), "--base-url",
                             trickle, "--timeout", "30"], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    deadline = time.monotonic() + 20
    while not list(dest.rglob(f"*{INCOMPLETE_SUFFIX}")) and time.monotonic() < deadline:
        time.sleep(0.05)  # until the downloads have begun
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "[fetch-release] stopped by SIGTERM" in err, err
    assert not dest.exists() or not any(p.is_file() for p in dest.rglob("*")), list(dest.rglob("*"))
