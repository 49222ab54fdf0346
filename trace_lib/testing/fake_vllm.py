"""A fake ``vllm`` executable for testing the judge pool launcher without a GPU.

``write_fake_vllm(dir)`` writes ``dir/vllm``: ``vllm serve MODEL --served-model-name N... --host H --port P ...``
records its argv and GPU environment to ``$FAKE_VLLM_RECORD/<port>.json`` and then, by ``$FAKE_VLLM_MODE``:
``ok`` (default) serves ``GET /v1/models`` listing the served names after ``$FAKE_VLLM_DELAY`` seconds, and answers
``/v1/chat/completions`` and ``/v1/completions`` with ``B``; ``crash`` prints a vLLM-like error and exits 3;
``hang`` never listens. SIGTERM ends it (default action).
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path

_SCRIPT = r'''
import json, os, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer

argv = sys.argv[1:]
assert argv[0] == "serve", argv
def value(flag):
    return argv[argv.index(flag) + 1]
names = []
if "--served-model-name" in argv:
    for item in argv[argv.index("--served-model-name") + 1:]:
        if item.startswith("--"):
            break
        names.append(item)
port = int(value("--port"))
record = os.environ.get("FAKE_VLLM_RECORD")
if record:
    partial = os.path.join(record, f".{port}.json.partial")  # renamed into place: a reader never sees half of it
    with open(partial, "w") as handle:
        json.dump({"argv": argv, "pid": os.getpid(), "env": {k: os.environ.get(k) for k in (
            "CUDA_VISIBLE_DEVICES", "VLLM_PORT", "OMP_NUM_THREADS", "VLLM_WORKER_MULTIPROC_METHOD")}}, handle)
    os.replace(partial, os.path.join(record, f"{port}.json"))
mode = os.environ.get("FAKE_VLLM_MODE", "ok")
print(f"INFO fake vllm serve on port {port} mode {mode}", flush=True)
if mode == "crash":
    print("RuntimeError: CUDA out of memory (fake)", flush=True)
    sys.exit(3)
if mode == "hang":
    while True:
        time.sleep(1)
time.sleep(float(os.environ.get("FAKE_VLLM_DELAY", "0")))

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass
    def _send(self, payload):
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        self._send({"object": "list", "data": [{"id": n, "object": "model"} for n in names]})
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        if self.path.endswith("/chat/completions"):
            choice = {"index": 0, "message": {"role": "assistant", "content": "B"}, "finish_reason": "stop"}
        else:
            prompts = body.get("prompt")
            prompts = prompts if isinstance(prompts, list) else [prompts]
            self._send({"choices": [{"index": i, "text": "B", "finish_reason": "stop"} for i in range(len(prompts))]})
            return
        self._send({"choices": [choice]})

HTTPServer((value("--host"), port), Handler).serve_forever()
'''


def write_fake_vllm(directory: Path) -> Path:
    """Write the fake ``vllm`` (see module docstring) into ``directory``; returns its path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "vllm"
    path.write_text(f"#!{sys.executable}\n{_SCRIPT}", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def fake_judge_weights(directory: Path) -> Path:
    """A directory that passes the launcher's weight check (``config.json`` + one ``.safetensors`` file)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text("{}", encoding="utf-8")
    (directory / "model.safetensors").write_bytes(b"")
    return directory


def free_port_run(count: int, host: str = "127.0.0.1") -> int:
    """A port ``p`` such that ``p .. p + count - 1`` are free now (best effort, for tests), by the pool's own test
    (:func:`~trace_lib.scoring.judge_pool.port_taken`)."""
    import socket

    from trace_lib.scoring.judge_pool import port_taken

    for _ in range(50):
        with socket.socket() as sock:
            sock.bind((host, 0))
            base = sock.getsockname()[1]
        if base + count > 65535:
            continue
        if not any(port_taken(host, port) for port in range(base, base + count)):
            return base
    raise RuntimeError("no run of free ports")


__all__ = ["write_fake_vllm", "fake_judge_weights", "free_port_run"]
