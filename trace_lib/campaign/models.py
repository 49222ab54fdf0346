"""Model descriptors: which checkpoint (by immutable revision) a campaign evaluates, and where it lives.

A descriptor is upstream's launcher 5-tuple ``--model SLUG LOCAL_PATH IMMUTABLE_REVISION OWNER/REPO@REVISION
"LABEL"`` (eval-campaign spec §1.5), validated the same way plus an immutability rule: a revision is either a
40-hex commit or a ``sha256set:<64 hex>`` content revision (local merged checkpoints register that way);
branch names, tags and short hashes are refused. The release's eight models and its judge come from
``results.json``; their directories are ``<model_root>/<model_id>`` (slug = the public ``model_id``, so the
slug namespaces of spec §1.2 never need a mapping).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from trace_lib.errors import ReleaseFileError, UsageError, did_you_mean
from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot
from trace_lib.release.suite import load_eval_models
from trace_lib.scoring.judge import JUDGE_SLUG  # the judge's directory under the model root
from trace_lib.slices import ModelDescriptor

#: ``SOURCE`` exactly as upstream's launcher accepts it.
SOURCE_PATTERN = re.compile(
    r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*@([0-9a-f]{40}|[0-9a-f]{64})"
)
#: An immutable revision: a commit, or the content hash of a directory's file set.
REVISION_PATTERN = re.compile(r"([0-9a-f]{40}|sha256set:[0-9a-f]{64})")
#: A slug becomes a directory component and the served model name. The patterns are used with ``fullmatch``: a
#: ``$``-anchored ``match`` would pass a value with a trailing newline.
SLUG_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def check_revision(value: str, *, field: str) -> str:
    """``value`` if it is an immutable revision, else a one-line error saying what is accepted."""
    if not REVISION_PATTERN.fullmatch(value):
        raise UsageError("not an immutable revision", field=field, found=value,
                         expected="a 40-hex commit or sha256set:<64 hex>",
                         hint="pin the commit (huggingface_hub model_info(repo).sha) or register the directory")
    return value


def parse_descriptor(tokens: Sequence[str], *, position: int = 0) -> ModelDescriptor:
    """Validate one ``--model SLUG LOCAL_PATH IMMUTABLE_REVISION SOURCE LABEL`` 5-tuple.

    Raises:
        UsageError: wrong arity, empty or unsafe slug, mutable revision, malformed source, empty label/path.
    """
    where = f"--model[{position}]"
    if len(tokens) != 5:
        raise UsageError("needs five values", field=where, expected="SLUG LOCAL_PATH IMMUTABLE_REVISION "
                         "OWNER/REPO@REVISION LABEL", found=len(tokens))
    slug, local_path, revision, source, label = (str(t) for t in tokens)
    if not SLUG_PATTERN.fullmatch(slug):
        raise UsageError("invalid slug", field=f"{where}.SLUG", found=slug,
                         expected="letters, digits, '.', '_', '-' (starting with a letter or digit)")
    if not local_path:
        raise UsageError("empty local path", field=f"{where}.LOCAL_PATH")
    check_revision(revision, field=f"{where}.IMMUTABLE_REVISION")
    if not SOURCE_PATTERN.fullmatch(source):
        raise UsageError("invalid source", field=f"{where}.SOURCE", found=source,
                         expected="owner/repository@<40- or 64-hex revision>")
    if not label.strip():
        raise UsageError("empty label", field=f"{where}.LABEL")
    return ModelDescriptor(slug, local_path, revision, source, label)


def parse_descriptors(groups: Sequence[Sequence[str]]) -> tuple[ModelDescriptor, ...]:
    """Validate every ``--model`` group; slugs must be unique.

    Raises:
        UsageError: a bad group (see :func:`parse_descriptor`) or a repeated slug.
    """
    descriptors = tuple(parse_descriptor(g, position=i) for i, g in enumerate(groups))
    check_unique(descriptors)
    return descriptors


def check_unique(descriptors: Sequence[ModelDescriptor]) -> None:
    seen: set[str] = set()
    for position, desc in enumerate(descriptors):
        if desc.slug in seen:
            raise UsageError("duplicate slug", field=f"--model[{position}].SLUG", found=desc.slug)
        seen.add(desc.slug)


def release_models(release: ReleaseRoot, model_root: Path) -> tuple[ModelDescriptor, ...]:
    """The release's evaluated models (``results.json`` order), each at ``<model_root>/<model_id>``.

    ``revision`` is the public repository commit (what a download yields); ``canonical_revision`` is the
    ``model_revision`` the canonical run recorded (a ``sha256set:`` for a locally registered checkpoint).
    """
    models = load_eval_models(release)
    doc = release.read_json(identity.RESULTS)
    entries = doc.get("models", []) if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not all(isinstance(m, dict) for m in entries):
        raise ReleaseFileError("not a list of model objects", file=identity.RESULTS, field="models",
                               found=type(entries if isinstance(doc, dict) else doc).__name__)
    recorded = {m.get("model_id"): m.get("model_revision") for m in entries}
    out = []
    for model in models:
        source = f"{model.repository_id}@{model.revision}"
        if not SOURCE_PATTERN.fullmatch(source):
            raise ReleaseFileError("model source is not owner/repo@commit", file=identity.RESULTS,
                                   field=f"models[{model.model_id}]", found=source)
        out.append(ModelDescriptor(
            slug=model.model_id, local_path=str(Path(model_root) / model.model_id), revision=model.revision,
            source=source, label=model.display_name, canonical_revision=recorded.get(model.model_id),
        ))
    return tuple(out)


def release_judge(release: ReleaseRoot, model_root: Path) -> ModelDescriptor:
    """The judge every canonical run recorded (``source_artifacts[].run_metadata.judge_model``).

    Raises:
        ReleaseFileError: no judge recorded, or the runs disagree on it.
    """
    rel = identity.RESULTS
    judges = set()
    for i, artifact in enumerate(release.read_json(rel).get("source_artifacts", [])):
        judge = (artifact.get("run_metadata") or {}).get("judge_model")
        if not isinstance(judge, dict) or not {"model_id", "model_revision"} <= set(judge):
            raise ReleaseFileError("judge model is missing", file=rel,
                                   field=f"source_artifacts[{i}].run_metadata.judge_model")
        judges.add((judge["model_id"], judge["model_revision"]))
    if len(judges) != 1:
        raise ReleaseFileError("runs disagree on the judge", file=rel, field="source_artifacts[].run_metadata",
                               expected="one judge", found=sorted(judges))
    repo, revision = judges.pop()
    return ModelDescriptor(slug=JUDGE_SLUG, local_path=str(Path(model_root) / JUDGE_SLUG), revision=revision,
                           source=f"{repo}@{revision}", label=repo.rpartition("/")[2])


def select_release_models(models: Sequence[ModelDescriptor], ids: Sequence[str]) -> tuple[ModelDescriptor, ...]:
    """The release models named by ``ids`` (in the order given).

    Raises:
        UsageError: an id that is not a release model (lists the known ones).
    """
    by_slug = {m.slug: m for m in models}
    picked = []
    for model_id in ids:
        if model_id not in by_slug:
            raise UsageError(f"unknown release model {model_id!r}", field="--model-id",
                             hint=did_you_mean(model_id, list(by_slug)))
        picked.append(by_slug[model_id])
    check_unique(picked)
    return tuple(picked)
