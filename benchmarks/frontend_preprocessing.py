"""What one request costs the thread that adds it to vLLM's offline engine, per image size, on CPU: vLLM's own
chat-template rendering and multimodal processing (``LLM.preprocess_chat`` + the engine's input preprocessor, the
work ``LLM.chat`` / ``enqueue_chat`` does serially before a request reaches the GPU) vs trace-repro's preparation
of the same row (prompt, request and hashes; ``prepare_rows``), side by side in one process.

The images are ``campaign_throughput.py``'s (the same sizes and generator), the decoding the suite's pixel bounds.
vLLM's offline ``LLM`` runs this preprocessing on one thread, so ``1000 / ms per request`` bounds the rows/s any
offline-engine path can reach on that image size, whatever the GPU. Needs vLLM importable on CPU (written against
the paper's 0.10.2: run it in the paper environment, ``.ci/paper-env``'s venv) plus torch and transformers.

    PYTHONPATH=$PWD /work/venvs/paper/bin/python benchmarks/frontend_preprocessing.py [--rows 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20, help="requests per image size")
    args = parser.parse_args()

    from campaign_throughput import IMAGE_SIZES, _table

    from trace_lib.generation.run import prepare_rows
    from trace_lib.generation.request import suite_mm_processor_kwargs
    from trace_lib.release.locate import locate_release
    from trace_lib.release.suite import load_suite
    from trace_lib.testing.tiny_bench import tiny_tsv_protocol
    from trace_lib.testing.tiny_qwen import build_tiny_qwen25vl
    from trace_lib.testing.vllm_cpu import VLLMPreprocessor

    work = Path(tempfile.mkdtemp(prefix="frontend-preprocessing-"))
    model = build_tiny_qwen25vl(work / "model")
    generation = load_suite(locate_release()).generation
    mm_kwargs = suite_mm_processor_kwargs(generation)
    vllm = VLLMPreprocessor(model, allowed_local_media_path=str(work))
    print(f"pixel bounds {mm_kwargs}; {args.rows} one-image requests per size; ms per request (median of 3 passes)")
    print("| image | vLLM render + multimodal processing | trace-repro preparation | ratio | image tokens |")
    print("| --- | --- | --- | --- | --- |")
    for bench, size in enumerate(IMAGE_SIZES):
        if bench % 4 == 3:
            continue  # the two-image benchmarks: their sizes are covered by the others
        table = Path(_table(str(work / f"bench{bench}.tsv"), bench, args.rows))
        protocol = tiny_tsv_protocol(f"bench{bench}")
        rows = protocol.load(table)
        image_dir = work / "images" / f"bench{bench}"
        prepared = prepare_rows(rows, protocol, image_dir, served_name="m", generation=generation, seed=42)
        conversations = [p.request.messages_json() for p in prepared]
        vllm_ms, ours_ms = [], []
        for _ in range(3):
            start = time.perf_counter()
            prompts = vllm.prompts(conversations, mm_kwargs)
            vllm_ms.append(1000 * (time.perf_counter() - start) / len(rows))
            start = time.perf_counter()
            prepare_rows(rows, protocol, image_dir, served_name="m", generation=generation, seed=42)
            ours_ms.append(1000 * (time.perf_counter() - start) / len(rows))
        tokens = len(prompts[0].prompt_token_ids) - len(prompts[0].template_token_ids) + 1  # one pad -> N tokens
        theirs, ours = statistics.median(vllm_ms), statistics.median(ours_ms)
        print(f"| {size[0]}x{size[1]} | {theirs:.2f} ms (<= {1000 / theirs:.0f} requests/s on one thread) | "
              f"{ours:.3f} ms | {theirs / ours:.0f}x | {tokens} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
