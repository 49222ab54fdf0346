"""Deliberate deviations of trace-repro's protocols from the pinned upstream scorers, one line each.

``DEVIATIONS[key]`` lists every place a benchmark's protocol knowingly differs from what upstream would do (and why);
everything not listed is meant to match upstream exactly. Shared by the benchmark helpers: add only your keys.
"""

from __future__ import annotations

DEVIATIONS: dict[str, list[str]] = {
    # -- Science & General, Spatial Reasoning (benchmarks-science-spatial.md) --------------------------------------
    "phyx_mini_mc": [
        "a TSV larger than 1 GiB is refused (VLMEvalKit would re-encode its images to JPEG files); none is expected",
    ],
    "realworldqa": [
        "a TSV larger than 1 GiB is refused (VLMEvalKit would re-encode its images to JPEG files); none is expected",
    ],
    "mmstar": [
        "a TSV larger than 1 GiB is refused (VLMEvalKit would re-encode its images to JPEG files); none is expected",
        "unseeded random.choice after three unusable judge replies -> deterministic_choice seeded by "
        "(benchmark, row index, decoding seed); the row is marked fallback",
        "judge health probe failing -> upstream silently switches to exact matching; here a first judge round in "
        "which every request fails raises JudgeError",
    ],
    "mmmu_pro_vision": [
        "a TSV larger than 1 GiB is refused (VLMEvalKit would re-encode its images to JPEG files); none is expected",
        "unseeded random.choice after three unusable judge replies -> deterministic_choice seeded by "
        "(benchmark, row index, decoding seed); the row is marked fallback",
        "judge health probe failing -> upstream silently switches to exact matching; here a first judge round in "
        "which every request fails raises JudgeError",
        "an empty or numeric response crashes upstream's cot_postproc (AttributeError); here it is an InputError",
    ],
    "cvbench_3d": [
        "a TSV larger than 1 GiB is refused (VLMEvalKit would re-encode its images to JPEG files); none is expected",
        "unseeded random.choice after three unusable judge replies -> deterministic_choice seeded by "
        "(benchmark, row index, decoding seed); the row is marked fallback",
        "judge health probe failing -> upstream silently switches to exact matching; here a first judge round in "
        "which every request fails raises JudgeError",
        "upstream returns a cached <stem>_acc.csv when one exists; trace-repro always scores afresh",
    ],
    "embspatial": [
        "a TSV larger than 1 GiB is refused (VLMEvalKit would re-encode its images to JPEG files); none is expected",
    ],
    "spatialvizbench_cot": [
        "a TSV larger than 1 GiB is refused (VLMEvalKit would re-encode its images to JPEG files); none is expected",
        "judge health probe failing -> upstream silently falls back to the rule matcher; here a first judge round "
        "in which every request fails raises JudgeError",
        "an empty judge reply makes upstream raise IndexError; here it counts as an unusable round",
    ],
    "erqa": [
        "a TSV larger than 1 GiB is refused (VLMEvalKit would re-encode its images to JPEG files); none is expected",
        "judge health probe failing -> upstream silently falls back to the rule matcher; here a first judge round "
        "in which every request fails raises JudgeError",
        "an empty judge reply makes upstream raise IndexError; here it counts as an unusable round",
    ],
}
