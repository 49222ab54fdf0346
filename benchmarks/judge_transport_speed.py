"""Judge transport throughput: the pooled httpx transport vs one urllib connection per request (the previous
clients), side by side against the same loopback OpenAI stub, same bodies, same concurrency.

    python benchmarks/judge_transport_speed.py [--requests 2000] [--concurrency 16] [--repeat 3]

Prints requests/s of each and the ratio (pooled / urllib). The stub answers at once, so the figure is the client's
own cost per request (connection setup, serialisation, parsing), which the real judge's latency hides only partly.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trace_lib.scoring.judge import completions_body, render_qwen3_no_think  # noqa: E402
from trace_lib.scoring.judge_http import JudgeTransport, encode_body  # noqa: E402
from trace_lib.testing.openai_server import OpenAIStubServer  # noqa: E402


def _urllib_post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, data=encode_body(body), method="POST",
                                     headers={"Content-Type": "application/json", "Authorization": "Bearer sk-local"})
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - loopback
        return json.loads(response.read().decode("utf-8"))


def _run(post, url: str, bodies: list[dict], concurrency: int) -> float:
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        answers = list(pool.map(lambda b: post(url, b), bodies))
    assert all(a["choices"][0]["text"] == "B" for a in answers)
    return len(bodies) / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    bodies = [completions_body("qwen3-32b-judge", [render_qwen3_no_think(f"Extract the answer of row {i}: B")],
                               max_tokens=128, temperature=0.0, top_p=1.0) for i in range(args.requests)]
    transport = JudgeTransport(concurrency=args.concurrency)
    pooled = lambda url, body: transport.post(url, body, timeout_s=60).data  # noqa: E731
    best = {"urllib": 0.0, "pooled": 0.0}
    with OpenAIStubServer(lambda route, body: "B", model="qwen3-32b-judge") as stub:
        url = f"{stub.url}/completions"
        for _ in range(args.repeat):
            best["urllib"] = max(best["urllib"], _run(_urllib_post, url, bodies, args.concurrency))
            best["pooled"] = max(best["pooled"], _run(pooled, url, bodies, args.concurrency))
    transport.close()
    print(f"requests={args.requests} concurrency={args.concurrency} best of {args.repeat}")
    print(f"urllib (one connection per request): {best['urllib']:.0f} requests/s")
    print(f"httpx pooled transport:              {best['pooled']:.0f} requests/s")
    print(f"ratio pooled/urllib: {best['pooled'] / best['urllib']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
