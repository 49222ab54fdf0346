"""``trace-repro validation``: the 2,000-row TRACE validation table, stage by stage.

Sub-commands (pipeline order): ``plan``, ``prepare``, ``generate``, ``score``, ``judge``, ``verify``, and ``run``
(one model through every stage, judged against the release table). Every stage writes under ``--work-dir``
(see :mod:`trace_lib.validation.layout`) and resumes from what it finds there. ``plan`` prints one line per
slice; the other stages print their report as canonical JSON on stdout. A stage that ran but found problems
(incomplete generation, failed judge rows, a failed verification, an accuracy outside the tolerance band) exits 1;
bad input exits 2 with one ``error:`` line.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Callable

from trace_lib import options
from trace_lib.errors import InputError, UsageError
from trace_lib.exitcodes import ExitCode

WORK_DIR_ENV = options.VALIDATION_DIR_ENV.name
JUDGE_TOKENIZER_ENV = options.JUDGE_TOKENIZER_ENV.name
_PHASES = ("release", "generation-only", "full")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("validation", help="reproduce the TRACE validation table (8 models x 2,000 rows)",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    stages = parser.add_subparsers(dest="stage", metavar="STAGE")
    parser.set_defaults(run=_missing_stage(parser))

    def stage(name: str, help_text: str, handler: Callable[[argparse.Namespace], ExitCode]) -> argparse.ArgumentParser:
        sub = stages.add_parser(name, help=help_text, description=help_text)
        options.add_to_argparse(sub, options.TRACE_ROOT, options.UNPINNED)
        sub.add_argument("--work-dir", default=None, metavar="DIR",
                         help=f"validation work directory (env {WORK_DIR_ENV}; default <campaign-root>/validation "
                              "or trace-repro-work/validation)")
        options.add_to_argparse(sub, options.CAMPAIGN_ROOT)
        sub.set_defaults(run=handler)
        return sub

    sub = stage("plan", "list the validation slices, their canonical scores and model directories", _plan)
    _model_args(sub, required=False)

    sub = stage("prepare", "parquet -> content-addressed images + manifest.json (every hash checked)", _prepare)
    sub.add_argument("--parquet", default=None, metavar="FILE", help="the validation parquet (default: under inputs/)")
    sub.add_argument("--download", action="store_true", help="download the pinned parquet first (huggingface_hub)")
    sub.add_argument("--verify-only", action="store_true", help="re-verify an existing manifest and its images")

    sub = stage("generate", "one response per row through an engine backend (resumable)", _generate)
    _model_args(sub, required=True)
    _engine_args(sub)

    sub = stage("score", "deterministic extraction + MATCH; writes the judge queue (judge_pending.jsonl)", _score)
    _model_args(sub, required=False)
    sub.add_argument("--final", action="store_true", help="fold in the judge results (after 'validation judge')")

    sub = stage("judge", "Qwen3-32B fallback for missing/ambiguous rows, blind to the ground truth", _judge)
    _model_args(sub, required=False)
    _judge_args(sub)

    sub = stage("verify", "verify the release, the generations, or the whole campaign", _verify)
    sub.add_argument("phase", choices=_PHASES, help="release | generation-only | full")
    sub.add_argument("--parquet", default=None, metavar="FILE", help="the validation parquet (default: under inputs/)")
    _model_args(sub, required=False)
    options.add_to_argparse(sub, options.ALPHA, options.TOLERANCE_Z)

    sub = stage("run", "one model through every stage, judged against the release table", _run)
    _model_args(sub, required=True)
    _engine_args(sub)
    _judge_args(sub)
    options.add_to_argparse(sub, options.ALPHA, options.TOLERANCE_Z)


def _missing_stage(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], ExitCode]:
    def run(args: argparse.Namespace) -> ExitCode:
        parser.print_help(sys.stderr)
        return ExitCode.USAGE

    return run


def _model_args(sub: argparse.ArgumentParser, *, required: bool) -> None:
    sub.add_argument("--model", action="append", default=None, metavar="SLUG", required=required,
                     help="a suite model slug (repeatable)" + ("" if required else "; default: every suite model"))
    sub.add_argument("--model-root", default=None, metavar="DIR",
                     help="directory holding <slug>/ model checkpoints (env TRACE_MODEL_ROOT; default "
                          "trace-repro-work/models)")
    sub.add_argument("--model-path", default=None, metavar="DIR", help="this model's checkpoint (one --model only)")


def _engine_args(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--backend", default="vllm", choices=("vllm", "hf", "openai"), help="engine (default vllm)")
    sub.add_argument("--base-url", default=None, type=options.http_urls, metavar="URL",
                     help="openai backend: the server's /v1 base URL")
    sub.add_argument("--media-transport", default="data-url", choices=("data-url", "file-url"),
                     help="how images reach the engine (data-url = upstream's public client; hf needs file-url)")
    sub.add_argument("--backend-option", action="append", default=None, metavar="KEY=VALUE",
                     help="engine option (JSON value, e.g. tensor_parallel_size=1, max_model_len=8192); repeatable")
    sub.add_argument("--chunk-size", type=options.positive_int, default=256, metavar="N",
                     help="rows per backend call (default 256)")


def _judge_args(sub: argparse.ArgumentParser) -> None:
    options.add_to_argparse(sub, options.JUDGE_URL)
    sub.add_argument("--judge-tokenizer", default=None, metavar="DIR",
                     help=f"local Qwen3-32B checkpoint whose chat template renders judge prompts (env "
                          f"{JUDGE_TOKENIZER_ENV}; default <model-root>/qwen3-32b-judge)")
    sub.add_argument("--judge-timeout", type=options.positive_seconds, default=300.0, metavar="S",
                     help="per batch (default 300)")


# -- resolution --------------------------------------------------------------------------------------------------
def _release(args: argparse.Namespace) -> Any:
    from trace_lib.release.locate import locate_release

    return locate_release(options.given(args, options.TRACE_ROOT))


def _layout(args: argparse.Namespace) -> Any:
    from trace_lib.options import DEFAULT_WORK_DIR
    from trace_lib.validation.layout import ValidationLayout

    value, source = args.work_dir, "--work-dir"
    if not value and os.environ.get(WORK_DIR_ENV):
        value, source = os.environ[WORK_DIR_ENV], WORK_DIR_ENV
    if not value:
        campaign = options.resolve(args, options.CAMPAIGN_ROOT)  # checked as a directory as it resolves
        value = Path(campaign) / "validation" if campaign else DEFAULT_WORK_DIR / "validation"
    options.check_directory(Path(value).expanduser(), field=source)  # a file there: one line, before work
    return ValidationLayout(Path(value).expanduser().resolve())


def _model_root(args: argparse.Namespace) -> Path:
    from trace_lib.campaign.plan import MODEL_ROOT_ENV
    from trace_lib.options import work_root

    return work_root(getattr(args, "model_root", None), MODEL_ROOT_ENV, "models", directory="--model-root")


def _model_path(args: argparse.Namespace, slug: str) -> Path:
    if args.model_path:
        if len(args.model or []) > 1:
            raise UsageError("--model-path needs exactly one --model", field="--model-path")
        return Path(args.model_path).expanduser()
    return _model_root(args) / slug


def _expected(args: argparse.Namespace, layout: Any) -> Any:
    """The dataset identity to hold the manifest to: the pins, or (``--unpinned``) the manifest's own."""
    from trace_lib.validation import pins
    from trace_lib.validation.canonical import read_json_object

    if not options.resolve(args, options.UNPINNED):
        return pins.REPRODUCTION_DATASET
    d = read_json_object(layout.manifest).get("dataset")
    if not isinstance(d, dict):
        raise UsageError("manifest has no dataset block", file=str(layout.manifest))
    return pins.DatasetIdentity(repo_id=d.get("repo_id"), revision=d.get("revision"), file=d.get("file"),
                                file_sha256=d.get("file_sha256"), file_size_bytes=d.get("file_size_bytes"),
                                row_count=d.get("row_count"), manifest_sha256=None)


def _slugs(args: argparse.Namespace, release: Any) -> list[str]:
    from trace_lib.validation.pipeline import plan_validation

    return [s.model.slug for s in plan_validation(release, args.model)]


def _backend_options(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in args.backend_option or ():
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UsageError("expected KEY=VALUE", field="--backend-option", found=item)
        if not math.isfinite(_as_float(raw)):  # NaN, inf, 1e400: a number no run metadata can record
            raise UsageError("not a finite number", field=f"--backend-option {key}", found=raw)
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def _as_float(text: str) -> float:
    """``text`` as Python reads a number (0.0 where it is none)."""
    try:
        return float(text)
    except ValueError:
        return 0.0


def _judge_template(args: argparse.Namespace, *, needed: bool) -> Any:
    from trace_lib.validation.chat_template import ChatTemplate

    value = args.judge_tokenizer or os.environ.get(JUDGE_TOKENIZER_ENV)
    path = Path(value).expanduser() if value else _model_root(args) / "qwen3-32b-judge"
    if not needed and not path.is_dir():
        return None
    return ChatTemplate.from_tokenizer_dir(path)


def _judge_urls(args: argparse.Namespace) -> tuple[str, ...]:
    value = options.resolve(args, options.JUDGE_URL) or ""
    return tuple(u.strip() for u in str(value).split(",") if u.strip())


def _print(report: Any) -> None:
    from trace_lib.jsonio import canonical_json_utf8 as canonical_json

    print(canonical_json(report))


# -- stages --------------------------------------------------------------------------------------------------
def _plan(args: argparse.Namespace) -> ExitCode:
    from trace_lib.validation.pipeline import plan_validation

    release = _release(args)
    _layout(args)  # the plan writes nothing, but a --work-dir naming a file is refused here as by every stage
    for slice_ in plan_validation(release, args.model):
        path = _model_path(args, slice_.model.slug) if args.model_path else _model_root(args) / slice_.model.slug
        state = "present" if path.is_dir() else "missing"
        print(f"{slice_.id}: canonical {slice_.canonical.score:.2f}% over {slice_.canonical.evaluated_rows} rows; "
              f"revision {slice_.model.inference_revision}; model dir {path} ({state})")
    return ExitCode.OK


def _prepare(args: argparse.Namespace) -> ExitCode:
    from trace_lib.validation import pins
    from trace_lib.release.load import sha256_file
    from trace_lib.validation.prepare import (
        DOWNLOAD_HINT, download_parquet, prepare_dataset, require_input_file, verify_prepared,
    )

    layout = _layout(args)
    unpinned = options.resolve(args, options.UNPINNED)
    if args.verify_only:
        report = verify_prepared(layout.dataset_dir, expected=_expected(args, layout))
        _print(report.to_dict())
        return ExitCode.OK
    parquet = Path(args.parquet).expanduser() if args.parquet else layout.parquet
    if args.download:
        parquet = download_parquet(layout.root / "inputs")
    require_input_file(parquet, what="validation parquet", field="--parquet", hint=DOWNLOAD_HINT)
    expected = pins.REPRODUCTION_DATASET
    if unpinned:
        import pyarrow.parquet as pq

        try:
            rows = pq.ParquetFile(parquet).metadata.num_rows
        except Exception as exc:  # noqa: BLE001 - pyarrow's ArrowInvalid and kin: not a parquet file
            raise InputError(f"not a readable parquet file ({type(exc).__name__})", file=str(parquet),
                             field="--parquet") from None
        expected = pins.DatasetIdentity(
            repo_id=expected.repo_id, revision="0" * 40, file=expected.file, file_sha256=sha256_file(parquet),
            file_size_bytes=parquet.stat().st_size, row_count=rows, manifest_sha256=None)
    _print(prepare_dataset(parquet, layout.dataset_dir, expected=expected).to_dict())
    return ExitCode.OK


def _generate(args: argparse.Namespace) -> ExitCode:
    from trace_lib.validation.generate import GenerationTarget, generate_validation_responses
    from trace_lib.release.validation_suite import load_validation_suite

    release, layout = _release(args), _layout(args)
    suite = load_validation_suite(release)
    expected = _expected(args, layout)
    status = ExitCode.OK
    for slug in _slugs(args, release):
        target = GenerationTarget(model=suite.model(slug), model_path=_model_path(args, slug), backend=args.backend,
                                  served_model=slug, endpoint_url=args.base_url, media_transport=args.media_transport,
                                  backend_options=_backend_options(args))

        def progress(done: int, total: int) -> None:
            if done % 100 == 0 or done == total:
                print(f"[validation] {slug}: {done}/{total} durable rows", file=sys.stderr, flush=True)

        report = generate_validation_responses(release, layout.manifest, layout.generation_dir(slug), target,
                                               expected=expected, chunk_size=args.chunk_size, progress=progress)
        _print(report.to_dict())
        if not report.complete:
            print(f"{slug}: {report.error_rows} rows have no response; re-run to regenerate them", file=sys.stderr)
            status = ExitCode.FINDINGS
    return status


def _score(args: argparse.Namespace) -> ExitCode:
    from trace_lib.validation.score import run_score

    release, layout = _release(args), _layout(args)
    expected = _expected(args, layout)
    slugs = _slugs(args, release) if args.model else [
        s for s in _slugs(args, release) if (layout.generation_dir(s) / "responses.jsonl").exists()]
    if not slugs:
        raise UsageError("no generated model to score", file=str(layout.root / "generation"),
                         hint="run 'trace-repro validation generate --model SLUG' first")
    for slug in slugs:
        judge = layout.judge_results(slug) if args.final else None
        report = run_score(release, layout.manifest, layout.generation_dir(slug), layout.scoring_dir(slug),
                           model_slug=slug, judge_results=judge, expected=expected)
        _print(report.to_dict())
    return ExitCode.OK


def _judge(args: argparse.Namespace) -> ExitCode:
    from trace_lib.validation.judge import load_pending, run_judge
    from trace_lib.release.validation_suite import load_validation_suite

    release, layout = _release(args), _layout(args)
    suite = load_validation_suite(release)
    slugs = _slugs(args, release) if args.model else [
        s for s in _slugs(args, release) if (layout.scoring_dir(s) / "judge_pending.jsonl").exists()]
    if not slugs:
        raise UsageError("no judge queue found", file=str(layout.root / "scoring"),
                         hint="run 'trace-repro validation score' first")
    status = ExitCode.OK
    for slug in slugs:
        pending = load_pending(layout.scoring_dir(slug) / "judge_pending.jsonl")
        report = run_judge(pending, judge=suite.judge, template=_judge_template(args, needed=bool(pending)),
                           endpoints=_judge_urls(args), output_dir=layout.judge_dir(slug), timeout_s=args.judge_timeout)
        _print({"model_slug": slug, **report.to_dict()})
        failed = report.by_status.get("failed", 0)
        if failed:  # the module's contract: failed judge rows are findings, whatever failed them
            why = ("after transport errors; re-run to retry them" if report.transport_failed_attempts
                   else "every attempt's output was invalid; they score as unresolved")
            print(f"{slug}: {failed} judge rows failed {why}", file=sys.stderr)
            status = ExitCode.FINDINGS
    return status


def _verify(args: argparse.Namespace) -> ExitCode:
    from trace_lib.validation.verify import VerificationError, verify_full, verify_generation, verify_release

    release, layout = _release(args), _layout(args)
    pinned = not options.resolve(args, options.UNPINNED)
    try:
        if args.phase == "release":
            report = verify_release(release, pinned=pinned)
        else:
            parquet = Path(args.parquet).expanduser() if args.parquet else (layout.parquet if pinned else None)
            expected = _expected(args, layout)
            if args.phase == "generation-only":
                report = verify_generation(release, layout, parquet=parquet, expected=expected, models=args.model)[0]
            else:
                report = verify_full(release, layout, parquet=parquet, expected=expected, models=args.model,
                                     z=options.resolve(args, options.TOLERANCE_Z),
                                     alpha=options.resolve(args, options.ALPHA))
    except VerificationError as exc:
        _print({"error": exc.render(), "phase": args.phase, "status": "failed"})
        return ExitCode.FINDINGS
    _print(report)
    for line in report.get("failures", ()):
        print(line, file=sys.stderr)
    return ExitCode.OK if report["status"] == "ok" else ExitCode.FINDINGS


def _run(args: argparse.Namespace) -> ExitCode:
    from trace_lib.validation.pipeline import SliceSettings, plan_validation, run_validation_slice

    release, layout = _release(args), _layout(args)
    settings = SliceSettings(
        backend=args.backend, backend_options=_backend_options(args), endpoint_url=args.base_url,
        judge_urls=_judge_urls(args), judge_template=_judge_template(args, needed=False),
        z=options.resolve(args, options.TOLERANCE_Z), alpha=options.resolve(args, options.ALPHA),
        expected=_expected(args, layout),
    )
    status = ExitCode.OK
    for slice_ in plan_validation(release, args.model):
        outcome = run_validation_slice(release, slice_, layout, _model_path(args, slice_.model.slug), settings)
        _print({"slice": slice_.id, **outcome.score.to_dict(), "verdict": outcome.verdict.to_dict()})
        print(outcome.verdict.explain(), file=sys.stderr)
        if not outcome.verdict.ok:
            status = ExitCode.FINDINGS
    return status
