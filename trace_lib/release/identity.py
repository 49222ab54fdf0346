"""The pinned identity of the paper release: repository, rlvr commit and SHA-256 of every canonical data file.

This is trace-repro's own knowledge of *which* release the paper's numbers come from; every other fact is read
from the release files at run time. ``trace-repro check`` (pinned mode) asserts this identity;
``--unpinned`` skips it.
"""

from __future__ import annotations

from types import MappingProxyType

REPOSITORY = "maveryn/trace"
BRANCH = "rlvr"
COMMIT = "af32fe0e668eb878e909daef7322ac1c4ae20f64"

# Release-relative paths of the canonical files (one name per file; modules import these, never spell paths).
SUITE = "rlvr/evaluation/trace_eval/suite.v1.json"
RESULTS = "rlvr/evaluation/trace_eval/results.json"
PROVENANCE = "rlvr/evaluation/trace_eval/benchmark_provenance.v1.json"
RELEASE_RECEIPTS = "rlvr/evaluation/trace_eval/release_receipts.v1.json"
POST_RUN_PATCHES = "rlvr/evaluation/trace_eval/post_run_patches.v1.json"
VALIDATION_SUITE = "rlvr/evaluation/trace_validation/suite.v1.json"
VALIDATION_RESULTS = "rlvr/evaluation/trace_validation/results.v1.json"
VALIDATION_RECEIPT = "rlvr/evaluation/trace_validation/release_receipt.v1.json"
VALIDATION_PATCHES = "rlvr/evaluation/trace_validation/reproducibility_patches.v1.json"
DATASET_EQUIVALENCE = "rlvr/dataset_equivalence.v1.json"
ENVIRONMENT_RECEIPT = "rlvr/environment_receipt.v1.json"
RELEASE_FILES = "rlvr/release_files.v1.json"
SOURCE_MAP = "rlvr/source_map.v1.json"
PROFILE_3B = "rlvr/configs/trace-qwen2.5-vl-3b.yaml"
PROFILE_7B = "rlvr/configs/trace-qwen2.5-vl-7b.yaml"
SYSTEM_PROMPT = "rlvr/examples/prompts/trace_vero_json_system_prompt_answer.txt"
REQUIREMENTS_CU128 = "rlvr/requirements-cu128.txt"
EVAL_REQUIREMENTS = "rlvr/evaluation/requirements.txt"
EVAL_REQUIREMENTS_RUNTIME = "rlvr/evaluation/requirements-runtime.txt"

#: SHA-256 of every canonical data file at :data:`COMMIT`.
CANONICAL_SHA256 = MappingProxyType(
    {
        PROFILE_3B: "d398ed7d7f0a44e0989125a8514760c82c45fce7c3c58d47df16670e6252646b",
        PROFILE_7B: "c02334c3fb8b7ae02aa4f2cd95b83bc2b456eff2991814500773f84978991b33",
        DATASET_EQUIVALENCE: "40afcb59e0c67d7b7f47b78bb673a6c152320eb0656a990910ff52c634d43ae7",
        ENVIRONMENT_RECEIPT: "8e837a4ef77f93157050348ca6f119c5fa652fe1b732d31e47b67732086e6a86",
        EVAL_REQUIREMENTS_RUNTIME: "51e44d2f7ad1cb6a0d49b1d9b6f30c8e42cb690a3fd47125b0b28449690edfb2",
        EVAL_REQUIREMENTS: "6d8ae0a5a6c6ff60e6f56376a5f9b2b175f906753c2796d1a2292a02d9f89c1e",
        PROVENANCE: "6a1a8f8e39580cfc83f5c68f5fb38d9969cd73df29058a97bf5d33982d49da11",
        POST_RUN_PATCHES: "5e5aa457a7e38bfb3667015943e88f56661690ddd9b9f2c5f67b5402741c6185",
        RELEASE_RECEIPTS: "9501d8930054c7dce8f762026a835a5c9bd26d967c07fe2aa9650579dc97ef7f",
        RESULTS: "569ea2463ace4c6b505d1fb168957e558667641810e90a8d9ede80f555823c98",
        SUITE: "b84262bcd2243d1d2879b2e02d9b49b17052659ea767df3d7303758f4d63de71",
        VALIDATION_RECEIPT: "865c7901f70578b21f3ce8c0c74621b30fc9bfe64f957ba4bd38c8e830aa971f",
        VALIDATION_PATCHES: "25ee7507f9442dd146afb066282ac19ab44aa9e606e0a0efd077404f7974ae68",
        VALIDATION_RESULTS: "1e2b78d46dbbd606210653b584ed77dc436d16bbdc0d329c5aaf55718dc37e11",
        VALIDATION_SUITE: "f9cccdcdddb6135c16d3a9d434f985b51e4105c07ff0c74a54a71a4dfe7c85c7",
        SYSTEM_PROMPT: "f394927d9abcfb7a1e43ef48a30c29b8c70e6facdbda314d7b27c59d8c3ae900",
        RELEASE_FILES: "606b69947f9fa8e25597deca570c71786ae038c0c48bd1a736e4fc1ca8110ee1",
        REQUIREMENTS_CU128: "09bf7a026dcf46ec687372f953d6fdf4eb6b61b9e514fd2747a9936b78a1ba50",
        SOURCE_MAP: "8b7e7161b277b9343c12b8e08d0c96e19981fe1443523f1f024790163424962c",
    }
)


def raw_url(path: str, *, base: str = "https://raw.githubusercontent.com") -> str:
    """The download URL of one canonical file at the pinned commit (``base`` is overridable for mirrors/tests)."""
    return f"{base.rstrip('/')}/{REPOSITORY}/{COMMIT}/{path}"
