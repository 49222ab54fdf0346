"""``trace-repro prepare-data`` and ``trace-repro prepare-models``: pinned downloads and their receipts.

``prepare-data`` fetches each benchmark's evaluation artifact as ``benchmark_provenance.v1.json`` pins it
(checksum-verified, atomic), builds every prompt with the benchmark's protocol (materialising images) and
records the content-bound manifest ``<data-root>/trace_eval_v1_dataset_manifest.json``. ``--verify-only``
re-hashes everything the manifest names and writes nothing.

``prepare-models`` downloads each model at its pinned commit with huggingface_hub (standard auth: ``HF_TOKEN``
or a login), verifies the file set, hashes every file and writes the revision marker; ``--verify-only``
re-checks directories; ``--register-local SLUG DIR OWNER/REPO@REV`` registers a local (e.g. merged) checkpoint
and prints its ``sha256set:`` revision for ``--model``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trace_lib import options
from trace_lib.campaign.models import SOURCE_PATTERN, SLUG_PATTERN
from trace_lib.campaign.plan import DATA_ROOT_ENV, add_plan_options, plan_from_options, select_benchmarks
from trace_lib.errors import TraceReproError, UsageError
from trace_lib.exitcodes import ExitCode
from trace_lib.interrupts import stoppable
from trace_lib.release.locate import locate_release


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    data = subparsers.add_parser("prepare-data", help="download pinned benchmark data and write its manifest",
                                 description=__doc__)
    data.add_argument("--benchmark", action="append", default=None, metavar="KEY",
                      help="prepare only this benchmark (repeatable; default: all 24)")
    data.add_argument("--data-root", default=None, metavar="DIR",
                      help=f"where data goes (env {DATA_ROOT_ENV}; default trace-repro-work/data)")
    data.add_argument("--force", action="store_true", help="download and rebuild even when a verified copy exists")
    data.add_argument("--verify-only", action="store_true", help="re-verify the manifest and files; write nothing")
    data.add_argument("--workers", type=options.positive_int, default=8, help="threads hashing images (default 8)")
    data.add_argument("--no-progress", action="store_true", help="no progress bars")
    options.add_to_argparse(data, options.TRACE_ROOT)
    data.set_defaults(run=stoppable(run_prepare_data, label="prepare-data"))

    models = subparsers.add_parser("prepare-models", help="download pinned model snapshots and write markers",
                                   description=__doc__)
    add_plan_options(models.add_argument)
    models.add_argument("--judge", action="store_true", help="also prepare the judge (Qwen3-32B)")
    models.add_argument("--verify-only", action="store_true", help="verify directories; download nothing")
    models.add_argument("--shallow", action="store_true", help="with --verify-only: skip re-hashing files")
    models.add_argument("--register-local", nargs=3, default=None, metavar=("SLUG", "DIR", "OWNER/REPO@REV"),
                        help="register a local checkpoint directory and print its sha256set revision")
    options.add_to_argparse(models, options.TRACE_ROOT)
    models.set_defaults(run=stoppable(run_prepare_models, label="prepare-models"))


def run_prepare_data(args: argparse.Namespace) -> ExitCode:
    from trace_lib.data.manifest import check_manifest, load_manifest, manifest_path
    from trace_lib.outputs import check_output_dir, no_empty_tree_left
    from trace_lib.release.suite import load_suite

    release = locate_release(options.given(args, options.TRACE_ROOT))
    suite = load_suite(release)
    keys = select_benchmarks(suite, args.benchmark)
    data_root = options.work_root(args.data_root, DATA_ROOT_ENV, "data", directory="--data-root").resolve()
    path = manifest_path(data_root)

    if args.verify_only:
        manifest = load_manifest(path)
        problems = check_manifest(manifest, suite, keys=keys)
        for problem in problems:
            print(f"{path}: {problem}")
        print(f"[prepare-data] verified {len(keys)} benchmark(s): {len(problems)} problem(s)"
              + (f"; dataset_revision={manifest.dataset_revision}" if manifest.dataset_revision else ""))
        return ExitCode.FINDINGS if problems else ExitCode.OK

    check_output_dir(data_root, flag="--data-root")
    with no_empty_tree_left(data_root):  # a run where every download fails leaves no empty data root
        return _prepare_data(args, release, suite, keys, data_root, path)


def _prepare_data(args: argparse.Namespace, release, suite, keys,  # noqa: ANN001
                  data_root: Path, path: Path) -> ExitCode:
    from trace_lib.benchmarks.registry import get_protocol
    from trace_lib.data.manifest import (
        build_dataset_entry, check_manifest, load_manifest, new_manifest, with_entry, write_manifest,
    )
    from trace_lib.data.hub_access import EndpointCheck
    from trace_lib.data.prepare import fetch_artifact, load_artifact_sources

    sources = load_artifact_sources(release)
    check = EndpointCheck()  # the Hub endpoint is reached once for the command, before its first Hub request
    manifest = load_manifest(path) if path.exists() else new_manifest(suite, data_root)
    if manifest.suite_sha256 != suite.sha256 or manifest.data_root != str(data_root):
        print(f"[prepare-data] {path}: built for another suite or data root; starting a new manifest",
              file=sys.stderr)
        manifest = new_manifest(suite, data_root)
    failed = []
    for key in keys:
        source = sources[key]
        try:
            if key in manifest.datasets and not args.force and not check_manifest(manifest, suite, keys=[key]):
                print(f"[prepare-data] {key}: ready (kept)")
                continue
            fetched = fetch_artifact(source, data_root, force=args.force, progress=not args.no_progress,
                                     check=check)
            entry = build_dataset_entry(source, data_root, get_protocol(key), suite, workers=args.workers)
            manifest = with_entry(manifest, entry)
            write_manifest(path, manifest)
            print(f"[prepare-data] {key}: ready ({entry.rows} rows, {len(entry.media_files)} images, "
                  f"{'downloaded' if fetched.downloaded else 'verified copy'} from {source.describe()})")
        except TraceReproError as exc:
            failed.append(key)
            print(f"[prepare-data] {key}: error: {exc.render()}", file=sys.stderr)
        except OSError as exc:
            failed.append(key)
            print(f"[prepare-data] {key}: error: {source.describe()}: {exc}", file=sys.stderr)
    revision = manifest.dataset_revision
    print(f"[prepare-data] {len(keys) - len(failed)}/{len(keys)} ready -> {path}"
          + (f"; dataset_revision={revision}" if revision else ""))
    return ExitCode.FINDINGS if failed else ExitCode.OK


def run_prepare_models(args: argparse.Namespace) -> ExitCode:
    from trace_lib.data.hub_access import EndpointCheck
    from trace_lib.data.model_dirs import download_model, register_local, verify_model_dir

    if args.register_local:
        slug, directory, source = args.register_local
        if not SLUG_PATTERN.fullmatch(slug):
            raise UsageError("invalid slug", field="--register-local SLUG", found=slug)
        if not SOURCE_PATTERN.fullmatch(source):
            raise UsageError("invalid source", field="--register-local SOURCE", found=source,
                             expected="owner/repository@<40- or 64-hex revision>")
        revision = register_local(directory, slug=slug, source=source)
        print(revision)
        return ExitCode.OK

    release = locate_release(options.given(args, options.TRACE_ROOT))
    plan = plan_from_options(release, args)
    descriptors = list(plan.models) + ([plan.judge] if args.judge and plan.judge else [])
    bad = 0
    check = EndpointCheck()  # reached once, before the first download; a model already in place needs none
    for desc in descriptors:
        if args.verify_only:
            report = verify_model_dir(desc, deep=not args.shallow)
        else:
            report = verify_model_dir(desc, deep=False)
            if report.ok:
                print(f"[prepare-models] {desc.slug}: present at {desc.local_path} (verify with --verify-only)")
                continue
            try:
                report = download_model(desc, check=check)
            except TraceReproError as exc:
                print(f"[prepare-models] {desc.slug}: error: {exc.render()}", file=sys.stderr)
                bad += 1
                continue
        for problem in report.problems:
            print(f"[prepare-models] {desc.slug}: {problem}", file=sys.stderr)
        if report.ok:
            note = ""
            if report.content_revision and desc.canonical_revision and desc.canonical_revision.startswith("sha256set:"):
                same = report.content_revision == desc.canonical_revision
                note = (f"; content {'matches' if same else 'differs from'} the canonical run's "
                        f"{desc.canonical_revision}")
            print(f"[prepare-models] {desc.slug}: ok ({desc.revision}"
                  + (f", {report.content_revision}" if report.content_revision else "") + f"){note}")
        else:
            bad += 1
    return ExitCode.FINDINGS if bad else ExitCode.OK
