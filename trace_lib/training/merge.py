"""``train merge``: validate a finished run, then merge its FSDP shards into a Hugging Face checkpoint.

``run_merge(profile, checkpoint_dir, output_dir) -> receipt`` (spec §1.6, §7.5, on verl's layout): the run
receipt must sit beside the checkpoint directory (``<run>/checkpoint`` and ``<run>/run_receipt.json``), be for
this profile and ``completed``; the selected step is the receipt's ``expected_step`` (the profile's selected
step, or 1 for a smoke run only); verl's tracker ``latest_checkpointed_iteration.txt`` must name it; the actor
directory must hold exactly ``model_world_size_W_rank_{0..W-1}.pt`` (non-empty) for the run's world size W,
``fsdp_config.json`` with that W, and ``huggingface/config.json``. The output must not exist. verl's own FSDP
merger (``verl.model_merger``) writes the bf16 model into a staging directory next to the output, which is
renamed into place only when complete, with ``trace_merge_receipt.json``.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

from trace_lib.errors import InputError, TraceReproError
from trace_lib.jsonio import loads_strict, strict_error
from trace_lib.outputs import check_outside_inputs
from trace_lib.release.load import sha256_file
from trace_lib.training.profiles import TrainingProfile
from trace_lib.training.receipts import MERGE_RECEIPT, MERGE_SCHEMA, RUN_RECEIPT, RUN_SCHEMA, read_receipt, write_receipt

TRACKER = "latest_checkpointed_iteration.txt"


def actor_dir(checkpoint_root: Path, step: int) -> Path:
    return checkpoint_root / f"global_step_{step}" / "actor"


def checkpoint_problems(checkpoint_root: Path, step: int, world_size: int) -> list[str]:
    """Everything wrong with the step-``step`` checkpoint of a ``world_size``-rank run (empty when complete). Its
    files are read as every input is (``decoding.read_text``): a FIFO there is a problem, never opened."""
    problems: list[str] = []
    tracker = checkpoint_root / TRACKER
    text = _read(tracker, problems)
    if text is not None:
        found = text.strip()
        if not (found.isascii() and found.isdigit()):
            problems.append(f"{tracker}: names no step (found {found[:40]!r}, expected {step})")
        elif int(found) != step:
            problems.append(f"{tracker}: names step {int(found)} (expected {step})")
    actor = actor_dir(checkpoint_root, step)
    expected = {f"model_world_size_{world_size}_rank_{r}.pt" for r in range(world_size)}
    present = {p.name for p in actor.glob("model_world_size_*_rank_*.pt")} if actor.is_dir() else set()
    if present != expected:
        problems.append(f"{actor}: model shards {sorted(present)} (expected {sorted(expected)})")
    empty = sorted(n for n in present & expected if not _nonempty_file(actor / n))
    if empty:
        problems.append(f"{actor}: empty model shards {empty}")
    fsdp = _read_object(actor / "fsdp_config.json", problems)
    if fsdp is not None and fsdp.get("world_size") != world_size:
        problems.append(f"{actor}/fsdp_config.json: world_size {fsdp.get('world_size')} (expected {world_size})")
    config = _read_object(actor / "huggingface" / "config.json", problems)
    if config is not None:
        if not config.get("architectures"):
            problems.append(f"{actor}/huggingface/config.json: no architectures")
        if not isinstance(config.get("model_type"), str) or not config["model_type"]:
            problems.append(f"{actor}/huggingface/config.json: no model_type (the merger's loader needs it)")
    return problems


def _read(path: Path, problems: list[str]) -> str | None:
    """The UTF-8 text of ``path``, or None with the reason in ``problems`` (missing, a FIFO, not UTF-8 ...)."""
    from trace_lib.decoding import read_text

    try:
        return read_text(path)
    except InputError as exc:
        problems.append(exc.render())
    except OSError as exc:
        problems.append(f"{path}: missing or unreadable ({exc.strerror or type(exc).__name__})")
    return None


def _read_object(path: Path, problems: list[str]) -> dict[str, Any] | None:
    """``path`` as a strict JSON object, or None with the reason in ``problems``."""
    text = _read(path, problems)
    if text is None:
        return None
    try:
        doc = loads_strict(text)
    except ValueError as exc:
        problems.append(f"{path}: {strict_error(exc)}")
        return None
    if not isinstance(doc, dict):
        problems.append(f"{path}: not a JSON object")
        return None
    return doc


def _nonempty_file(path: Path) -> bool:
    """``path`` is a regular file (links followed) holding at least one byte."""
    try:
        st = path.stat()
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size > 0


def validate_run(profile: TrainingProfile, checkpoint_root: Path) -> tuple[dict[str, Any], int, int]:
    """(run receipt, selected step, world size) of a finished run whose checkpoint directory is ``checkpoint_root``.

    Raises:
        InputError: receipt missing/foreign/incomplete, invalid step, or an incomplete checkpoint.
    """
    receipt_path = checkpoint_root.parent / RUN_RECEIPT
    receipt = read_receipt(receipt_path, RUN_SCHEMA)
    if receipt.get("config_id") != profile.config_id or receipt.get("status") != "completed":
        raise InputError("checkpoint run receipt is missing, incomplete, or for another config", file=str(receipt_path),
                         expected=f"config_id {profile.config_id!r}, status 'completed'",
                         found=f"config_id {receipt.get('config_id')!r}, status {receipt.get('status')!r}")
    step = receipt.get("expected_step")
    allowed = {profile.selected_checkpoint_step} | ({1} if receipt.get("mode") == "smoke" else set())
    if not isinstance(step, int) or isinstance(step, bool) or step not in allowed:
        raise InputError("checkpoint receipt has an invalid selected step", file=str(receipt_path),
                         field="expected_step", expected=sorted(allowed), found=step)
    world_size = receipt.get("world_size")
    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise InputError("invalid world size", file=str(receipt_path), field="world_size", found=world_size)
    problems = checkpoint_problems(checkpoint_root, step, world_size)
    if problems:
        raise InputError("incomplete checkpoint: " + "; ".join(problems), file=str(checkpoint_root))
    return receipt, step, world_size


def merge_shards(actor: Path, target: Path) -> None:
    """verl's FSDP merger: ``actor`` (a ``global_step_N/actor`` directory) -> a Hugging Face model in ``target``."""
    from verl.model_merger.base_model_merger import ModelMergerConfig
    from verl.model_merger.fsdp_model_merger import FSDPModelMerger

    config = ModelMergerConfig(operation="merge", backend="fsdp", local_dir=str(actor), target_dir=str(target),
                               hf_model_config_path=str(actor / "huggingface"))
    merger = FSDPModelMerger(config)
    merger.merge_and_save()
    merger.cleanup()


def _merge_or_explain(actor: Path, target: Path) -> None:
    """:func:`merge_shards`; what verl's merger (torch, transformers) raises on the checkpoint's files, beyond the
    checks of :func:`checkpoint_problems` (a shard that does not unpickle, a config its loader refuses), is one line
    naming the actor directory (the library's traceback with ``TRACE_REPRO_DEBUG=1``); an OS error stays one
    (ENOSPC is the machine's)."""
    try:
        merge_shards(actor, target)
    except (OSError, ImportError, TraceReproError):
        raise
    except Exception as exc:  # noqa: BLE001 - the libraries' errors on a checkpoint they cannot read
        reason = (str(exc).strip().splitlines() or [""])[0][:200]
        raise InputError(f"verl's merger cannot merge this checkpoint ({type(exc).__name__}: {reason})",
                         file=str(actor), hint="check the run's shards and huggingface/ config") from exc


def run_merge(profile: TrainingProfile, checkpoint_dir: Path, output_dir: Path) -> dict[str, Any]:
    """Validate the run, merge its selected step into ``output_dir`` (created atomically), return the receipt.

    Raises:
        InputError: a precondition fails (see the module docstring), or the output already exists.
        UsageError: the output lies inside the checkpoint directory it reads.
    """
    check_outside_inputs(output_dir, [("checkpoint directory", checkpoint_dir)], flag="--output-dir")
    checkpoint_root = checkpoint_dir.resolve()
    receipt, step, world_size = validate_run(profile, checkpoint_root)
    if output_dir.exists() or output_dir.is_symlink():
        raise InputError("output must not exist", field="--output-dir", found=str(output_dir))
    output = output_dir.absolute()
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.", suffix=".incomplete", dir=output.parent))
    try:
        _merge_or_explain(actor_dir(checkpoint_root, step), staging)
        merge_receipt = {
            "schema_version": MERGE_SCHEMA,
            "config_id": profile.config_id,
            "checkpoint_step": step,
            "world_size": world_size,
            "mode": receipt.get("mode"),
            "canonical": receipt.get("canonical"),
            "run_receipt_sha256": sha256_file(checkpoint_root.parent / RUN_RECEIPT),
            "publication_performed": False,
        }
        write_receipt(staging / MERGE_RECEIPT, merge_receipt)
        os.replace(staging, output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return merge_receipt
