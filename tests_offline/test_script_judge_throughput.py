"""benchmarks/judge_throughput.py's answer relay: what it forwards to the judge engine and what it answers."""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

pytestmark = pytest.mark.offline


class _Engine:
    """A loopback stand-in for ``vllm serve``: records each request body, answers noise."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        engine = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                engine.bodies.append(body)
                choices = [{"index": 0, "message": {"role": "assistant", "content": "noise"},
                            "finish_reason": "length"}]
                data = json.dumps({"choices": choices}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("answer_tokens, budget, forwarded", [(None, 1024, 1024), (32, 1024, 32), (32, 16, 16)])
def test_the_relay_caps_max_tokens_and_answers_the_recorded_reply(answer_tokens, budget, forwarded):
    """With ``answer_tokens`` the engine is asked for at most that many tokens (a real judge's short answer), the
    rest of the body as sent; the caller gets the recorded answer, whatever the engine decoded."""
    import httpx
    import judge_throughput as jt

    engine = _Engine()
    relay = jt.AnswerRelay(engine.url, {"Is 2 > 1?": "Yes"}, answer_tokens=answer_tokens)
    try:
        body = {"model": "judge", "max_tokens": budget, "temperature": 0.0,
                "messages": [{"role": "user", "content": [{"type": "text", "text": "Is 2 > 1?"}]}]}
        got = httpx.post(f"{relay.url}/chat/completions", json=body, timeout=30, trust_env=False).json()
    finally:
        relay.close()
        engine.close()
    assert engine.bodies == [{**body, "max_tokens": forwarded}]
    assert got["choices"][0]["message"]["content"] == "Yes" and got["choices"][0]["finish_reason"] == "stop"
    assert jt.cap_answer_tokens({"max_tokens": 512}, None) == {"max_tokens": 512}


def test_a_judge_share_this_gpu_cannot_hold_is_refused_before_the_start(tmp_path, monkeypatch):
    import judge_throughput as jt

    from trace_lib.testing.tiny_qwen3 import QWEN3_32B_SHAPES

    model = tmp_path / "judge"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(QWEN3_32B_SHAPES), encoding="utf-8")
    gpus = [{"index": 0, "utilization": 0, "memory_used_mib": 0, "memory_total_mib": 81559}]
    monkeypatch.setattr("trace_lib.reports.status.query_gpus", lambda: tuple(gpus))
    with pytest.raises(SystemExit) as refused:
        jt.check_fits("the judge", model, 0.60, 8192)
    assert str(refused.value).startswith("the judge: 0.6 of this 79.6 GiB GPU is 47.8 GiB, less than the")
    jt.check_fits("the judge", model, 0.90, 8192)  # fits: nothing raised
    gpus.clear()  # no nvidia-smi: nothing to check against
    jt.check_fits("the judge", model, 0.01, 8192)
