"""The files a TRACE-validation run writes are byte-identical to what the code wrote when the golden digests were
recorded (main at 32d9373, before validation's receipts were touched): every receipt, results file, manifest and
hash of a stub run (trace_lib.testing.validation_bytes: an error row and its regeneration, the first score, a
judge ladder climb, an abstention, the final score), compared after replacing only what differs between two runs of
the same code (temporary paths, the release's location, ports, times, durations, the provenance's hashes of
trace_lib's own source). The same digests come from main at e4f0dc4 and from checkouts in other directories."""

from __future__ import annotations

import pytest

from trace_lib.testing.validation_bytes import normalized_digests, run_stub_validation

#: The tiny parquet these digests were recorded from (pyarrow 26.0.1, Pillow 13.0.0 build it).
PARQUET_SHA256 = "65181cad88c382861799b831cb18b798aa836cf05a35df5b9f6f5702142cdf63"
SLUG = "trace-qwen2.5-vl-3b"
GOLDEN = {
    "dataset/manifest.json": "f787ad0cd71e196a960a4ece06d937da6961bda7800468911f04e559263a2a4a",
    f"generation/{SLUG}/receipts/000000.json": "6e2a6c6827d177ef729903f315a8db1210b3749ac229ba5ab63a735a7bc244c8",
    f"generation/{SLUG}/receipts/000001.json": "b6a9ca47215c26c01a490b061936a30180082bad3a88118e561a76d4b960a369",
    f"generation/{SLUG}/receipts/000002.json": "11855f90877a18f7ca7afd0f29016a97e4c8d0b3258383dc74bda509d39f515f",
    f"generation/{SLUG}/receipts/000003.json": "6f24b40265e39d6d0bb90d9cb706943c0e0f482b3219c41308ac7f0ac3f43e97",
    f"generation/{SLUG}/receipts/000004.json": "d73a4a0f22d4ae163c01e404c72445b8368105c5c673dbd198e125826e5bc3b1",
    f"generation/{SLUG}/receipts/000005.json": "c12520d8118f7d7d5b2309ce29f1e297d610a1f227bd7bad8cdf31c7771327de",
    f"generation/{SLUG}/responses.jsonl": "c6e4ca25dddede838537fdc38e192d7b5595e81321fc401696d66a242b484208",
    f"generation/{SLUG}/run_metadata.json": "cec934ec6ec140d66c0832358e2665f775399cc27f4d95ffd9d1e19d28ee6d22",
    f"judge/{SLUG}/judge_results.jsonl": "739817c9a158ef74e227345a2bfa2e42eda8baa1904eee1519b546b807bef4f4",
    f"judge/{SLUG}/receipts/62910acfd36878f6e62e6beede639baa48c8a1fe76d85d6164e35e2d8f997797.json":
        "80e49431adf87ff7af3708f0ab88028919089c6d46dfaaf7e9f43942f5c1e0ef",
    f"judge/{SLUG}/receipts/9a8441ec7f7485bf2ffc99404e63a5adeccc85566ce9799b29ef84367a06d572.json":
        "522b4c12cd3e529033965863c2ec4dfc5a3b7825e90a27437b73e06e60c16b94",
    f"judge/{SLUG}/receipts/f90ae462fe04c325b74e7390a27f4fed2bd0fdfcc63074218b20a1e05a93a996.json":
        "c9b87c50331a7b9222596939054a60b41166f7cc3d42f8da74070fb36e9e0ff1",
    f"scoring/{SLUG}/by_task.jsonl": "70ba1d975600173dea910715adb89938cb73eaf559163b1d2b0e0cec8c75cf61",
    f"scoring/{SLUG}/judge_pending.jsonl": "d9c0de3946723a3d6403a1658ad74c34a26f81d31d8b076c45ae1cb7267bdaae",
    f"scoring/{SLUG}/scored_rows.jsonl": "0e3875388e8fcace7090a1da9fa09b24d3a5e7ad85ab1aab733b5c01e850d234",
    f"scoring/{SLUG}/summary.json": "51a480a9f74f39ce8a6f27ea6e016786c76c59c336183cf759d72873accfd959",
    f"scoring/{SLUG}/summary.md": "5d0d22ce17160103d6e90a889f9e167e75294cea03a0b471dc89127cb1b15c80",
}


def test_validation_files_are_byte_identical_to_the_recorded_run(release, tmp_path) -> None:
    run = run_stub_validation(release, tmp_path)
    if run.parquet_sha256 != PARQUET_SHA256:
        pytest.skip(f"the tiny parquet differs from the one the digests were recorded from ({run.parquet_sha256} vs "
                    f"{PARQUET_SHA256}: another pyarrow or Pillow); re-record GOLDEN with the code at 32d9373")
    digests = normalized_digests(run)
    media = {path: digest for path, digest in digests.items() if path.startswith("dataset/media/")}
    assert len(media) == 6 and all(path.endswith(f"/{digest}.png") for path, digest in media.items())
    others = {path: digest for path, digest in digests.items() if path not in media}
    assert others == GOLDEN  # the same files (no new one, none missing) with the same bytes


def test_the_comparison_sees_a_changed_byte(release, tmp_path) -> None:
    run = run_stub_validation(release, tmp_path)
    before = normalized_digests(run)
    receipt = run.work / "generation" / SLUG / "receipts" / "000004.json"
    receipt.write_bytes(receipt.read_bytes().replace(b"Final answer: 13", b"Final answer: 14"))
    after = normalized_digests(run)
    assert {path for path in before if before[path] != after[path]} == {f"generation/{SLUG}/receipts/000004.json"}
