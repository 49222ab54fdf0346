"""TRACE training Parquet rows -> verl ``RLHFDataset`` rows, streamed one record batch at a time.

Each output row holds ``data_source``, ``prompt`` (the stripped system prompt, then the row's ``prompt_answer``
unchanged as the user message; verl splits its ``<image>`` markers), ``images`` (the source Arrow column,
byte for byte), ``reward_model`` (``{"style": "rule", "ground_truth": <answer_gt JSON string>}``) and
``extra_info`` (row index, split, ids and the ``annotation_gt`` / ``reward_contract`` JSON strings the reward
reads). No Hugging Face feature metadata is written, so verl sees image dicts with ``bytes`` and the dataset
class (:mod:`trace_lib.training.verl_dataset`) applies EasyR1's resize before anything converts the mode.

Every row is checked before any GPU time is spent: one ``<image>`` marker per image, no ``<video>`` /
``<audio>`` markers (verl would read them as placeholders), and a reward contract that the reward accepts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from trace_lib.atomic import atomic_output
from trace_lib.errors import InputError
from trace_lib.release.load import sha256_bytes, sha256_file
from trace_lib.release.locate import ReleaseRoot
from trace_lib.training.profiles import TrainingProfile
from trace_lib.training.reward import RewardInputError, decode_contract

_BATCH_ROWS = 256
_EXTRA_FIELDS = ("instance_id", "task", "domain")


@dataclass(frozen=True)
class ConvertedFile:
    """One converted Parquet file: its source, where it was written, its rows and SHA-256."""

    source: str
    path: str
    rows: int
    sha256: str


@dataclass(frozen=True)
class RowFormat:
    """Which source columns feed the verl row (from the profile's ``easyr1.data`` block)."""

    prompt_key: str
    answer_key: str
    image_key: str
    data_source: str  # every row's ``data_source`` (verl groups validation metrics by it): the dataset repo id
    system_prompt: str

    @classmethod
    def from_profile(cls, profile: TrainingProfile, system_prompt: str) -> "RowFormat":
        return cls(
            prompt_key=profile.easyr1_value("data.prompt_key"),
            answer_key=profile.easyr1_value("data.answer_key"),
            image_key=profile.easyr1_value("data.image_key"),
            data_source=profile.dataset.repo_id,
            system_prompt=system_prompt,
        )


def load_system_prompt(release: ReleaseRoot, profile: TrainingProfile) -> str:
    """The system prompt text the model sees (file content ``.strip()``-ed), after checking the raw bytes' hash.

    Raises:
        InputError: the file's SHA-256 differs from the profile's ``release.prompt.sha256``.
    """
    raw = release.read_bytes(profile.prompt_path)
    digest = sha256_bytes(raw)
    if digest != profile.prompt_sha256:
        raise InputError("system prompt hash differs from the profile", file=profile.prompt_path,
                         expected=profile.prompt_sha256, found=digest)
    from trace_lib.decoding import decode

    return decode(raw, file=profile.prompt_path).strip()


def _output_schema(image_type: object) -> object:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("data_source", pa.string()),
            pa.field("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
            pa.field("images", image_type),
            pa.field("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
            pa.field(
                "extra_info",
                pa.struct(
                    [("index", pa.int64()), ("split", pa.string())]
                    + [(name, pa.string()) for name in (*_EXTRA_FIELDS, "annotation_gt", "reward_contract")]
                ),
            ),
        ]
    )


def _check_row(label: str, prompt: object, images: int, answer: object, annotation: object, contract: object) -> None:
    if not isinstance(prompt, str):
        raise InputError("prompt is not a string", file=label)
    markers = prompt.count("<image>")
    if markers != images:
        raise InputError("<image> markers differ from the number of images", file=label, expected=images, found=markers)
    for marker in ("<video>", "<audio>"):
        if marker in prompt:
            raise InputError(f"prompt contains {marker}, which verl reads as a media placeholder", file=label)
    try:
        decode_contract(answer, annotation, contract)
    except RewardInputError as exc:
        raise InputError(f"reward contract rejected: {exc.message}", file=label) from None


def _converted_batches(source: Path, fmt: RowFormat, split: str, first_index: int) -> Iterator[object]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    handle = pq.ParquetFile(source)
    names = set(handle.schema_arrow.names)
    needed = [fmt.prompt_key, fmt.answer_key, fmt.image_key, "annotation_gt", "reward_contract", *_EXTRA_FIELDS]
    missing = [c for c in needed if c not in names]
    if missing:
        raise InputError("missing columns", file=str(source), expected=needed, found=sorted(names))
    schema = _output_schema(handle.schema_arrow.field(fmt.image_key).type)
    index = first_index
    for batch in handle.iter_batches(batch_size=_BATCH_ROWS, columns=needed):
        cols = {name: batch.column(name) for name in needed}
        prompts = cols[fmt.prompt_key].to_pylist()
        answers = cols[fmt.answer_key].to_pylist()
        annotations = cols["annotation_gt"].to_pylist()
        contracts = cols["reward_contract"].to_pylist()
        image_counts = [c or 0 for c in pc.list_value_length(cols[fmt.image_key]).to_pylist()]
        extras = {name: cols[name].to_pylist() for name in _EXTRA_FIELDS}
        n = batch.num_rows
        for i in range(n):
            _check_row(f"{source}: row {index + i}", prompts[i], image_counts[i], answers[i], annotations[i], contracts[i])
        out = pa.record_batch(
            [
                pa.array([fmt.data_source] * n, pa.string()),
                pa.array(
                    [[{"role": "system", "content": fmt.system_prompt}, {"role": "user", "content": p}] for p in prompts],
                    schema.field("prompt").type,
                ),
                cols[fmt.image_key],
                pa.array([{"style": "rule", "ground_truth": a} for a in answers], schema.field("reward_model").type),
                pa.array(
                    [
                        {"index": index + i, "split": split, "annotation_gt": annotations[i],
                         "reward_contract": contracts[i], **{k: extras[k][i] for k in _EXTRA_FIELDS}}
                        for i in range(n)
                    ],
                    schema.field("extra_info").type,
                ),
            ],
            schema=schema,
        )
        index += n
        yield out


def convert_file(source: Path, dest: Path, fmt: RowFormat, *, split: str, first_index: int = 0) -> ConvertedFile:
    """Convert one TRACE Parquet file into ``dest`` (written atomically); ``extra_info.index`` starts at
    ``first_index``.

    Raises:
        InputError: a column is missing or a row breaks the checks in the module docstring.
    """
    import pyarrow.parquet as pq

    rows = 0
    with atomic_output(dest) as out:
        writer = None
        try:
            for batch in _converted_batches(source, fmt, split, first_index):
                if writer is None:
                    writer = pq.ParquetWriter(out, batch.schema)
                writer.write_batch(batch)
                rows += batch.num_rows
        finally:  # closed before ``out`` is, also on error (the temp file is then removed)
            if writer is not None:
                writer.close()
        if writer is None:  # empty source: still write a valid (empty) file with the output schema
            image_type = pq.ParquetFile(source).schema_arrow.field(fmt.image_key).type
            pq.write_table(_output_schema(image_type).empty_table(), out)
    return ConvertedFile(source=str(source), path=str(dest), rows=rows, sha256=sha256_file(dest))


def convert_splits(
    train_sources: list[Path], validation_source: Path, out_dir: Path, fmt: RowFormat
) -> tuple[list[ConvertedFile], ConvertedFile]:
    """Convert the train shards (in the given order, one output per shard, global row index) and the validation
    file into ``out_dir/train/`` and ``out_dir/validation/``."""
    train: list[ConvertedFile] = []
    offset = 0
    for source in train_sources:
        done = convert_file(source, out_dir / "train" / source.name, fmt, split="train", first_index=offset)
        offset += done.rows
        train.append(done)
    validation = convert_file(validation_source, out_dir / "validation" / validation_source.name, fmt, split="validation")
    return train, validation
