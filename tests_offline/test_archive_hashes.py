"""trace_lib.archive.hashes against digests computed by upstream's own exporter functions
(``trace_eval_public_export.py`` / ``trace_eval_media_contract.py`` at the pinned commit, run outside the repo on
these exact inputs). Any change to a definition (a field, a contract string, a separator) fails here."""

from __future__ import annotations

from trace_lib.archive import hashes
from trace_lib.archive.identity import media_inputs

MEDIA = [hashes.text_sha256("img-a"), hashes.text_sha256("img-b")]
PROMPT = "Question: ∠ABC = 30°?\nOptions:\nA. 日本\nB. x² \"q\"\n"
ROW = {"index": 17, "question": "Wie viel? ∑", "A": float("nan"), "answer": "B", "image": "AAAA", "__trace_x": 1,
       "hint": 3.5}
SAMPLING = {"temperature": 0.6, "top_p": 1.0, "top_k": -1, "presence_penalty": 0.0, "repetition_penalty": 1.0,
            "max_tokens": 4096, "seed": 43}
UPSTREAM = {
    "source_row": "33620e778508a491804002b0d6fede207b53c0c35f0a2c324bf9be71d77bc366",
    "media_set": "f5137e262dd525f31ed00b0e62ec4448a9818a4276d13a007f5e4554d8a30d6b",
    "source_record": "4cd91f179f13f803f55655602b9f9e16ccbada9849a5493e346c78102128cf04",
    "prompt": "acdf299c48012fb39021eaeef9adabbc5f25ffb3e44df512b30f128995586fe8",
    "request": "ec6cc37186337d6a030cc657690df7ba71233562b40a7ac7da6850cd149b0135",
    "contract": "69fcca0cd333b6074bb17e232020fbc1c3384eb09a06b058323d10f7469e90d4",
    "sample": "sample-caf141124bdd0330fe20320eecbf4c1f4a026578770c8cece5d9aac3cc969e87",
    "response": "response-7596b635db2671a892ce84166298ee76bd40b58ce17e59a8fdd4221d78888ee1",
    "extraction": "2e31956f8d6f2463c4d75bab4b635a205530774308246867de4ec744937cfa8f",
    "score": "score-8228085d9ce2606b703fb9ff5c54c62058ccb000a0c05c7367c2030e5e1513ef",
}


def test_every_public_hash_equals_upstreams():
    settings = hashes.generation_settings(SAMPLING, model_id="trace-qwen2.5-vl-7b",
                                          media_inputs=media_inputs({"min_pixels": 3136, "max_pixels": 12845056}))
    srh = hashes.source_row_hash(ROW)
    ms = hashes.media_set_sha256(MEDIA)
    sr = hashes.source_record_sha256(srh, ms)
    p = hashes.prompt_sha256(PROMPT)
    rq = hashes.request_sha256(prompt_digest=p, ordered_media_sha256=MEDIA, settings=settings)
    sid = hashes.sample_id(run_id="run-a", model_id="trace-qwen2.5-vl-7b", model_revision="a" * 40, seed=43,
                           benchmark_id="mathvista", source_index="17", source_ordinal=5, source_row_sha256=srh)
    ours = {
        "source_row": srh, "media_set": ms, "source_record": sr, "prompt": p, "request": rq,
        "contract": hashes.prompt_contract_sha256(dataset_sha256=hashes.text_sha256("dataset"), source_row_sha256=srh,
                                                  source_record_sha256=sr, media_set_sha256=ms, prompt_sha256=p,
                                                  request_sha256=rq),
        "sample": sid, "response": hashes.response_id(sid, hashes.response_sha256("The answer is B.")),
        "extraction": hashes.extraction_sha256(sample=sid, status="resolved", value="B", candidates=["B"]),
        "score": hashes.score_id(run_id="run-a", model_id="trace-qwen2.5-vl-7b", seed=43, benchmark_id="mathvista",
                                 scope="row", sample=sid),
    }
    assert ours == UPSTREAM
