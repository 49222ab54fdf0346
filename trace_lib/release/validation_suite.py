"""Typed views of the TRACE-validation suite and its canonical results table, read from the release.

``load_validation_suite(release)`` reads ``rlvr/evaluation/trace_validation/suite.v1.json`` (models, decoding,
judge pins and retry ladder, scoring policy); ``load_release_scores(release)`` reads ``results.v1.json``. No value
here is restated in code: decoding, pixel bounds, the judge's ladder and the canonical scores all come from there.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from trace_lib.errors import ReleaseFileError
from trace_lib.jsonio import required
from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot


@dataclass(frozen=True)
class ValidationModel:
    """One suite model: slug (also the served model name), label, source repo/revision, runtime view."""

    slug: str
    label: str
    repo_id: str
    revision: str
    runtime_view_revision: str | None = None

    @property
    def inference_revision(self) -> str:
        """The revision generation records: the runtime view when the suite names one, else the source commit."""
        return self.runtime_view_revision or self.revision


@dataclass(frozen=True)
class JudgeContract:
    """The suite's judge block: pinned Qwen3-32B, served name, decoding and the max-token retry ladder."""

    repo_id: str
    revision: str
    served_model_name: str
    temperature: float
    top_p: float
    thinking: bool
    max_token_retries: tuple[int, ...]
    input_fields: tuple[str, ...]
    forbidden_fields: tuple[str, ...]


@dataclass(frozen=True)
class ValidationSuite:
    """``suite.v1.json`` as typed fields; ``document`` keeps the parsed file for structural checks."""

    suite_id: str
    models: tuple[ValidationModel, ...]
    dataset: Mapping[str, Any]
    prompt: Mapping[str, Any]
    generation: Mapping[str, Any]
    scoring: Mapping[str, Any]
    judge: JudgeContract
    sha256: str
    document: Mapping[str, Any]

    @property
    def slugs(self) -> tuple[str, ...]:
        return tuple(m.slug for m in self.models)

    def model(self, slug: str) -> ValidationModel:
        for model in self.models:
            if model.slug == slug:
                return model
        raise KeyError(slug)

    @property
    def rows(self) -> int:
        return int(self.dataset["rows"])

    def decoding(self) -> dict[str, Any]:
        """The ten decoding keys every generation request carries (``n`` = ``responses_per_prompt``)."""
        g = self.generation
        return {
            "temperature": g["temperature"],
            "top_p": g["top_p"],
            "top_k": g["top_k"],
            "max_tokens": g["max_tokens"],
            "seed": g["seed"],
            "presence_penalty": g["presence_penalty"],
            "frequency_penalty": g["frequency_penalty"],
            "repetition_penalty": g["repetition_penalty"],
            "n": g["responses_per_prompt"],
            "stream": False,
        }

    def mm_processor_kwargs(self) -> dict[str, int]:
        """The image pixel bounds sent with every request (and to the server)."""
        return {"min_pixels": self.generation["min_image_pixels"], "max_pixels": self.generation["max_image_pixels"]}


@dataclass(frozen=True)
class ReleaseScore:
    """One row of the canonical table: percent exact-match accuracy over ``evaluated_rows``."""

    model_id: str
    label: str
    evaluated_rows: int
    score: float




def load_validation_suite(release: ReleaseRoot) -> ValidationSuite:
    """The validation suite of ``release``. Raises ReleaseFileError naming a missing field."""
    rel = identity.VALIDATION_SUITE
    doc = release.read_json(rel)
    models = []
    for i, item in enumerate(required(doc, "models", file=rel)):
        where = f"models[{i}]."
        models.append(
            ValidationModel(
                slug=required(item, "slug", file=rel, where=where),
                label=required(item, "label", file=rel, where=where),
                repo_id=required(item, "repo_id", file=rel, where=where),
                revision=required(item, "revision", file=rel, where=where),
                runtime_view_revision=item.get("runtime_view_revision"),
            )
        )
    judge = required(doc, "judge", file=rel)
    judge_contract = JudgeContract(
        **{
            name: required(judge, name, file=rel, where="judge.")
            for name in ("repo_id", "revision", "served_model_name", "temperature", "top_p", "thinking")
        },
        max_token_retries=tuple(required(judge, "max_token_retries", file=rel, where="judge.")),
        input_fields=tuple(required(judge, "input_fields", file=rel, where="judge.")),
        forbidden_fields=tuple(required(judge, "forbidden_fields", file=rel, where="judge.")),
    )
    return ValidationSuite(
        suite_id=required(doc, "suite_id", file=rel),
        models=tuple(models),
        dataset=MappingProxyType(dict(required(doc, "dataset", file=rel))),
        prompt=MappingProxyType(dict(required(doc, "prompt", file=rel))),
        generation=MappingProxyType(dict(required(doc, "generation", file=rel))),
        scoring=MappingProxyType(dict(required(doc, "scoring", file=rel))),
        judge=judge_contract,
        sha256=release.sha256(rel),
        document=MappingProxyType(doc),
    )


def load_release_scores(release: ReleaseRoot) -> dict[str, ReleaseScore]:
    """Canonical scores by model id, in table order (``results.v1.json``)."""
    rel = identity.VALIDATION_RESULTS
    doc = release.read_json(rel)
    out: dict[str, ReleaseScore] = {}
    for i, item in enumerate(required(doc, "results", file=rel)):
        where = f"results[{i}]."
        row = ReleaseScore(
            model_id=required(item, "model_id", file=rel, where=where),
            label=required(item, "label", file=rel, where=where),
            evaluated_rows=required(item, "evaluated_rows", file=rel, where=where),
            score=required(item, "score", file=rel, where=where),
        )
        out[row.model_id] = row
    return out


def load_system_prompt(release: ReleaseRoot, suite: ValidationSuite) -> tuple[str, str]:
    """``(stripped prompt text, file sha256)`` of the suite's generation system prompt.

    Raises:
        ReleaseFileError: the file is missing, its sha256 differs from ``prompt.system_prompt_sha256`` or it is empty.
    """
    rel = suite.prompt["system_prompt_file"]
    raw = release.read_bytes(rel)
    digest = release.sha256(rel)
    if digest != suite.prompt["system_prompt_sha256"]:
        raise ReleaseFileError(
            "system prompt differs from the suite's pin",
            file=rel,
            expected=suite.prompt["system_prompt_sha256"],
            found=digest,
        )
    text = raw.decode("utf-8").strip()
    if not text:
        raise ReleaseFileError("system prompt is empty", file=rel)
    return text, digest
