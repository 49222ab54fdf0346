"""Group ``profiles``: the two training profiles are the same answer-only GRPO recipe at two scales.

Upstream ``train.py check`` profile gate: exactly the two canonical YAML files, each
a mapping with its schema, id, answer-only scope and identity fields, no annotation/task-conditioned keys under
``easyr1``, run-time paths left null, and the 3B and 7B profiles deep-equal outside their identity fields (both are
checked whichever one is run). Upstream pins every hyperparameter as a literal (here: group ``identity``); here
each profile must agree with the files around it: the released and base models with ``results.json`` and the
TRACE-validation suite, the environment hashes and reference platform with ``environment_receipt.v1.json``, the
dataset counts with themselves (rows = tasks x rows per task), and every value of the source map's
``training_contract`` with the profile key that implements it. The prompt and dataset-receipt hashes are groups
``prompt_hash`` and ``equivalence``.
"""

from __future__ import annotations

import copy
from pathlib import PurePosixPath
from typing import Any, Iterator

from trace_lib.preflight import views
from trace_lib.preflight.context import CheckContext, GroupOutcome
from trace_lib.preflight.fields import MISSING, Fields, Kind, hashable, is_kind, json_equal
from trace_lib.preflight.registry import CheckGroup
from trace_lib.release import identity

SCHEMA = "trace-rlvr-training-config-v1"
SCOPE = "answer_only"
CONFIG_DIR = "rlvr/configs"
#: fields allowed to differ between the 3B and 7B profiles
IDENTITY_FIELDS = ("config_id", "release.source_revision", "release.source_config_sha256",
                   "release.source_environment_sha256", "release.released_model", "release.base_model",
                   "easyr1.trainer.experiment_name")
#: paths filled at run time by the launcher; a profile must not carry a machine-local value
RUNTIME_PATHS = ("easyr1.data.train_files", "easyr1.data.val_files", "easyr1.data.system_prompt_file",
                 "easyr1.worker.actor.model.model_path", "easyr1.worker.actor.model.tokenizer_path",
                 "easyr1.worker.reward.reward_function", "easyr1.trainer.save_checkpoint_path",
                 "easyr1.trainer.load_checkpoint_path")
FORBIDDEN_KEY_PARTS = ("annotation", "task_conditioned")
FORBIDDEN_KEYS = ("trace_output_mode",)
#: source_map release_inputs.training_contract key -> profile key that implements it
CONTRACT_KEYS = {
    "algorithm.actor_learning_rate": "easyr1.worker.actor.optim.lr",
    "algorithm.actor_lr_scheduler": "easyr1.worker.actor.optim.lr_scheduler_type",
    "algorithm.actor_lr_warmup_ratio": "easyr1.worker.actor.optim.lr_warmup_ratio",
    "algorithm.actor_ppo_epochs": "easyr1.worker.actor.ppo_epochs",
    "algorithm.disable_kl": "easyr1.algorithm.disable_kl",
    "algorithm.kl_coefficient": "easyr1.algorithm.kl_coef",
    "algorithm.name": "easyr1.algorithm.adv_estimator",
    "algorithm.use_kl_loss": "easyr1.algorithm.use_kl_loss",
    "batching.actor_global_batch_size": "easyr1.worker.actor.global_batch_size",
    "batching.max_prompt_tokens": "easyr1.data.max_prompt_length",
    "batching.max_response_tokens": "easyr1.data.max_response_length",
    "batching.rollout_batch_size": "easyr1.data.rollout_batch_size",
    "batching.rollouts_per_prompt": "easyr1.worker.rollout.n",
    "batching.validation_batch_size": "easyr1.data.val_batch_size",
    "decoding.training_temperature": "easyr1.worker.rollout.temperature",
    "decoding.training_top_p": "easyr1.worker.rollout.top_p",
    "decoding.validation_rollouts_per_prompt": "easyr1.worker.rollout.val_override_config.n",
    "decoding.validation_temperature": "easyr1.worker.rollout.val_override_config.temperature",
    "decoding.validation_top_p": "easyr1.worker.rollout.val_override_config.top_p",
    "answer_key": "easyr1.data.answer_key",
    "prompt_key": "easyr1.data.prompt_key",
    "train_rows": "release.dataset.train_rows",
    "validation_rows": "release.dataset.validation_rows",
    "schedule.max_steps": "easyr1.trainer.max_steps",
    "schedule.save_every_steps": "easyr1.trainer.save_freq",
    "schedule.validate_every_steps": "easyr1.trainer.val_freq",
    "schedule.validate_before_training": "easyr1.trainer.val_before_train",
}
#: training_contract.scale_specific.<scale> key -> profile key
SCALE_KEYS = {"find_last_checkpoint": "easyr1.trainer.find_last_checkpoint",
              "load_checkpoint_path": "easyr1.trainer.load_checkpoint_path",
              "save_limit": "easyr1.trainer.save_limit"}


def check_profiles(ctx: CheckContext, out: GroupOutcome) -> None:
    present = sorted(p.relative_to(ctx.release.path).as_posix() for p in ctx.release.file(CONFIG_DIR).glob("*.yaml"))
    Fields(out, CONFIG_DIR).expect("*.yaml", sorted(views.PROFILE_FILES), present,
                                   "the release must hold exactly the two canonical training profiles")
    docs: dict[str, dict[str, Any]] = {}
    for rel in views.PROFILE_FILES:
        doc = ctx.read_yaml(rel, out) if ctx.exists(rel) else None
        if doc is None:
            continue
        if not isinstance(doc, dict):
            out.fail(rel, "profile must be a mapping", found=type(doc).__name__)
            continue
        docs[rel] = doc
        _check_profile(ctx, Fields(out, rel), rel, doc)
    if len(docs) == 2:
        (rel_a, a), (rel_b, b) = docs.items()
        for path, left, right in _differences(_strip(a), _strip(b)):
            out.fail(rel_b, f"differs from {rel_a} outside the approved identity fields", field=path,
                     expected=left, found=right)
    _check_contract(ctx, out, docs)
    out.count("profiles", len(docs))
    out.count("config_sha256", {views.dig(d, "config_id"): ctx.sha256(r) for r, d in docs.items()})


def _check_profile(ctx: CheckContext, f: Fields, rel: str, doc: dict[str, Any]) -> None:
    config_id = PurePosixPath(rel).stem
    f.expect("schema_version", SCHEMA, doc.get("schema_version"), "unexpected profile schema")
    f.expect("config_id", config_id, doc.get("config_id"), "differs from the file name")
    f.expect("easyr1.trainer.experiment_name", config_id, views.dig(doc, "easyr1.trainer.experiment_name"),
             "differs from the config id")
    f.expect("release.scope", SCOPE, views.dig(doc, "release.scope"), "only the answer-only recipe is released")
    release = f.get(doc, "release", kind=Kind.OBJECT) or {}
    f.get(release, "source_revision", "release", Kind.COMMIT)
    f.get(release, "source_config_sha256", "release", Kind.SHA256)
    env_sha = f.get(release, "source_environment_sha256", "release", Kind.SHA256)
    step = f.get(release, "selected_checkpoint_step", "release", Kind.COUNT)
    trainer = views.dig(doc, "easyr1.trainer") or {}
    max_steps, save_freq = trainer.get("max_steps"), trainer.get("save_freq")
    if step is not None and is_kind(max_steps, Kind.COUNT) and is_kind(save_freq, Kind.COUNT):
        if step > max_steps or step % save_freq:
            f.fail("release.selected_checkpoint_step", "is not a saved step of the run",
                   expected=f"a multiple of save_freq {save_freq} up to max_steps {max_steps}", found=step)
    models = {}
    for role in ("base_model", "released_model"):
        block = f.get(release, role, "release", Kind.OBJECT)
        if block is not None:
            f.get(block, "repo_id", f"release.{role}", Kind.TEXT)
            f.get(block, "revision", f"release.{role}", Kind.COMMIT)
            models[role] = block
    required = views.dig(release, "base_model.required_files")
    if not (isinstance(required, list) and required and all(is_kind(x, Kind.TEXT) for x in required)
            and len(set(required)) == len(required)):
        f.fail("release.base_model.required_files", "must be a non-empty array of unique file names", found=required)
    _check_dataset(f, views.dig(doc, "release.dataset"), views.dig(doc, "easyr1.data") or {})
    f.expect("release.prompt.path", identity.SYSTEM_PROMPT, views.dig(doc, "release.prompt.path"),
             "does not name the release's system prompt")
    for path in RUNTIME_PATHS:
        value = views.dig(doc, path)
        if value is not None:
            f.fail(path, "must be null (filled at run time; a profile carries no machine path)", found=value)
    bad = sorted(set(_forbidden_keys(doc.get("easyr1"), "easyr1")))
    for path in bad:
        f.fail(path, "non-answer training configuration key")
    _check_environment(ctx, f, config_id, doc, env_sha)
    _check_models(ctx, f, models)


def _check_dataset(f: Fields, dataset: Any, data: dict[str, Any]) -> None:
    if not isinstance(dataset, dict):
        f.fail("release.dataset", "must be a mapping", found=dataset)
        return
    w = "release.dataset"
    f.get(dataset, "repo_id", w, Kind.TEXT)
    reproduction = f.get(dataset, "revision", w, Kind.COMMIT)
    historical = f.get(dataset, "historical_training_revision", w, Kind.COMMIT)
    if reproduction is not None and reproduction == historical:
        f.fail(f"{w}.revision", "the reproduction revision must be the post-squash one, not the historical")
    for split in ("train", "validation"):
        rows = f.get(dataset, f"{split}_rows", w, Kind.COUNT)
        tasks = f.get(dataset, "task_count", w, Kind.COUNT)
        per_task = f.get(dataset, f"{split}_rows_per_task", w, Kind.COUNT)
        if None not in (rows, tasks, per_task) and rows != tasks * per_task:
            f.fail(f"{w}.{split}_rows", f"differs from task_count x {split}_rows_per_task",
                   expected=tasks * per_task, found=rows)
    train = f.get(dataset, "train_files", w, Kind.LIST) or []
    if not train or not all(is_kind(x, Kind.TEXT) for x in train) or len(set(train)) != len(train):
        f.fail(f"{w}.train_files", "must be a non-empty array of unique paths", found=train)
    validation = f.get(dataset, "validation_file", w, Kind.TEXT)
    if validation in train:
        f.fail(f"{w}.validation_file", "is also a training file", found=validation)
    for name in ("train_manifest", "validation_manifest"):
        f.get(dataset, name, w, Kind.TEXT)
    columns = f.get(dataset, "required_columns", w, Kind.LIST) or []
    for key in ("prompt_key", "answer_key", "image_key"):
        if data.get(key) not in columns:
            f.fail(f"easyr1.data.{key}", f"names no column of {w}.required_columns", found=data.get(key))


def _forbidden_keys(node: Any, where: str) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{where}.{key}"
            if isinstance(key, str) and (any(p in key for p in FORBIDDEN_KEY_PARTS) or key in FORBIDDEN_KEYS):
                yield path
            yield from _forbidden_keys(value, path)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _forbidden_keys(value, f"{where}[{i}]")


def _check_environment(ctx: CheckContext, f: Fields, config_id: str, doc: dict[str, Any], env_sha: Any) -> None:
    receipt = views.document(ctx, identity.ENVIRONMENT_RECEIPT)
    if receipt is None:
        return
    per_config = views.dig(receipt, "source_receipts")
    entry = per_config.get(config_id) if isinstance(per_config, dict) else None
    recorded = views.dig(entry, "requirements_sha256")
    if recorded is MISSING:
        f.fail("config_id", f"has no environment receipt in {identity.ENVIRONMENT_RECEIPT} source_receipts",
               found=config_id)
    elif env_sha is not None:
        f.expect("release.source_environment_sha256", recorded, env_sha,
                 f"differs from {identity.ENVIRONMENT_RECEIPT} source_receipts[{config_id}].requirements_sha256")
    for mine, theirs in (("gpu_count", "gpu_count"), ("cuda", "cuda"), ("gpu_model", "gpu")):
        f.expect(f"release.reference_hardware.{mine}", views.dig(receipt, f"reference_platform.{theirs}"),
                 views.dig(doc, f"release.reference_hardware.{mine}"),
                 f"differs from {identity.ENVIRONMENT_RECEIPT} reference_platform.{theirs}")
    trainer = views.dig(doc, "easyr1.trainer") or {}
    if is_kind(trainer.get("nnodes"), Kind.COUNT) and is_kind(trainer.get("n_gpus_per_node"), Kind.COUNT):
        f.expect("release.reference_hardware.gpu_count", trainer["nnodes"] * trainer["n_gpus_per_node"],
                 views.dig(doc, "release.reference_hardware.gpu_count"),
                 "differs from easyr1.trainer nnodes x n_gpus_per_node")


def _check_models(ctx: CheckContext, f: Fields, models: dict[str, dict[str, Any]]) -> None:
    """Base and released model pins equal the revisions both evaluations record for those repositories."""
    results = views.results_doc(ctx) or {}
    suite = views.document(ctx, identity.VALIDATION_SUITE) or {}
    evaluated = [(m.get("repository_id"), m.get("repository_revision"), m.get("parameter_scale"))
                 for m in results.get("models", []) if isinstance(m, dict)] \
        if isinstance(results.get("models"), list) else []
    validated = [(m.get("repo_id"), m.get("revision")) for m in suite.get("models", []) if isinstance(m, dict)] \
        if isinstance(suite.get("models"), list) else []
    scales = set()
    for role, block in models.items():
        repo, revision = block.get("repo_id"), block.get("revision")
        for source, pairs in ((identity.RESULTS, [(r, v) for r, v, _ in evaluated]),
                              (identity.VALIDATION_SUITE, validated)):
            revisions = sorted({str(v) for r, v in pairs if r == repo})
            if pairs and not revisions:
                f.fail(f"release.{role}.repo_id", f"is not an evaluated model of {source}", found=repo)
            elif revisions and revisions != [revision]:
                f.fail(f"release.{role}.revision", f"differs from the revision {source} evaluated",
                       expected=revisions[0] if len(revisions) == 1 else revisions, found=revision)
        scales |= {hashable(s) for r, _, s in evaluated if r == repo}
    if len(scales) > 1:
        f.fail("release.released_model", "released and base models have different parameter scales",
               found=sorted(map(str, scales)))


def _strip(doc: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``doc`` without the identity fields."""
    stripped = copy.deepcopy(doc)
    for dotted in IDENTITY_FIELDS:
        *parents, last = dotted.split(".")
        node: Any = stripped
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    return stripped


def _differences(a: Any, b: Any, where: str = "") -> Iterator[tuple[str, Any, Any]]:
    """``(dotted path, a value, b value)`` of every leaf where two parsed documents differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            path = f"{where}.{key}" if where else str(key)
            if key not in a or key not in b:
                yield path, a.get(key, "<absent>"), b.get(key, "<absent>")
            else:
                yield from _differences(a[key], b[key], path)
    elif not json_equal(a, b):
        yield where or "(document)", a, b


def _check_contract(ctx: CheckContext, out: GroupOutcome, docs: dict[str, dict[str, Any]]) -> None:
    """Every value of the source map's training contract is what the profiles configure."""
    contract = views.dig(views.document(ctx, identity.SOURCE_MAP), "release_inputs.training_contract")
    if not isinstance(contract, dict) or not docs:
        return
    f = Fields(out, identity.SOURCE_MAP)
    w = "release_inputs.training_contract"
    for rel, doc in docs.items():
        for key, profile_key in CONTRACT_KEYS.items():
            f.expect(f"{w}.{key}", views.dig(doc, profile_key), views.dig(contract, key),
                     f"differs from {rel} {profile_key}")
        step = views.dig(doc, "release.selected_checkpoint_step")
        f.expect(f"{w}.schedule.checkpoint_selection", f"global_step_{step}" if step is not MISSING else MISSING,
                 views.dig(contract, "schedule.checkpoint_selection"),
                 f"differs from {rel} release.selected_checkpoint_step")
        scale = _scale_of(ctx, doc)
        specific = (contract.get("scale_specific") or {}).get(scale) if scale else None
        if scale and not isinstance(specific, dict):
            f.fail(f"{w}.scale_specific", f"has no entry for the {scale} profile {rel}", expected=scale)
            continue
        if specific is None:
            continue
        repo, revision = views.dig(doc, "release.base_model.repo_id"), views.dig(doc, "release.base_model.revision")
        f.expect(f"{w}.scale_specific.{scale}.base_model",
                 MISSING if MISSING in (repo, revision) else f"{repo}@{revision}",
                 views.dig(specific, "base_model"), f"differs from {rel} release.base_model")
        for key, profile_key in SCALE_KEYS.items():
            f.expect(f"{w}.scale_specific.{scale}.{key}", views.dig(doc, profile_key), views.dig(specific, key),
                     f"differs from {rel} {profile_key}")
    review = views.dig(views.document(ctx, identity.SOURCE_MAP), "release_inputs.training_source_equivalence_review")
    if isinstance(review, dict) and len(docs) == 2:
        revisions = sorted(str(views.dig(d, "release.source_revision")) for d in docs.values())
        found = sorted(str(review.get(k)) for k in ("primary_public_source_revision", "compared_revision"))
        f.expect("release_inputs.training_source_equivalence_review", revisions, found,
                 "does not compare the two profiles' source revisions")


def _scale_of(ctx: CheckContext, doc: dict[str, Any]) -> str | None:
    """The parameter scale ``results.json`` records for the profile's released model."""
    results = views.results_doc(ctx) or {}
    repo = views.dig(doc, "release.released_model.repo_id")
    for model in results.get("models", []) if isinstance(results.get("models"), list) else []:
        if isinstance(model, dict) and model.get("repository_id") == repo:
            return model.get("parameter_scale")
    return None


GROUP = CheckGroup(
    "profiles",
    "training profiles (both): answer-only, 3B = 7B outside identity fields, = training contract and models",
    check_profiles,
)
