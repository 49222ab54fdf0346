"""VLMEvalKit TSV datasets, read exactly as the pinned ``ImageBaseDataset`` reads them, and their images.

``load_vlmeval_tsv(path)`` mirrors ``VLMEvalKit@a8b12bf1:vlmeval/dataset/image_base.py:ImageBaseDataset.__init__``
(``pandas.read_csv(sep='\\t')`` typing, ``skip_noimg``, short ``image`` cells resolved as references to another
row's index, list-valued ``image``/``image_path`` cells, ``index`` made ``int`` only when every index is an int
literal). ``materialize_images(row, image_dir)`` mirrors ``ImageBaseDataset.dump_image`` and
``vlmeval/smp/vlm.py:decode_base64_to_image_file`` (``RGBA``/``P``/``LA`` -> ``RGB``, ``<index>.png``,
``<index>_<i>.png`` or the row's ``image_path`` names; readable existing files are reused) and returns absolute
paths. Files are written atomically (:mod:`trace_lib.atomic`, not fsynced: a re-derivable cache).
"""

from __future__ import annotations

import ast
import base64
import binascii
import io
import math
import os
import re
from pathlib import Path
from typing import Any

from trace_lib.atomic import atomic_output
from trace_lib.errors import InputError
from trace_lib.extraction.workbook import isna
from trace_lib.outputs import not_regular
from trace_lib.protocol import DataRow

#: VLMEvalKit localises a TSV above this size to JPEG files (``prepare_tsv``: ``file_size(path, 'GB') > 1``).
LOCALIZE_THRESHOLD_BYTES = 2**30
#: An ``image`` cell of at most this many characters names another row's index (``ImageBaseDataset.__init__``).
IMAGE_REFERENCE_MAX_CHARS = 64
#: PIL modes converted to RGB before saving (``decode_base64_to_image``).
CONVERT_TO_RGB_MODES = ("RGBA", "P", "LA")

Row = dict[str, Any]



# -- loading -------------------------------------------------------------------------------------------------
def _native(value: Any) -> Any:
    """numpy scalars -> Python scalars (same ``str()``); pandas NA -> float NaN."""
    if value is None:
        return math.nan
    item = getattr(value, "item", None)
    if item is not None and not isinstance(value, (str, bytes)):
        value = item()
    if isinstance(value, float) and math.isnan(value):
        return math.nan
    return value


def _to_list_of_str(value: Any, *, file: str | None, field: str) -> list[str]:
    """VLMEvalKit ``toliststr``: a ``[...]`` string is a Python list literal; a string is one item (``file``: the
    TSV, None where the caller names it)."""
    if isinstance(value, str) and len(value) > 1 and value[0] == "[" and value[-1] == "]":
        try:
            parsed = ast.literal_eval(value)
        except (ValueError, SyntaxError) as exc:
            raise InputError("list-valued cell is not a Python list literal", file=file, field=field,
                             found=value[:80]) from exc
        if not isinstance(parsed, (list, tuple)):
            raise InputError("list-valued cell is not a list", file=file, field=field, found=value[:80])
        return [str(x) for x in parsed]
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(x) for x in value]
    raise InputError("cell must be a string or a list literal", file=file, field=field, found=repr(value))


_INT_LITERAL = re.compile(r"[ \t]*[+-]?[ \t]*(?:0+|[1-9](?:_?[0-9])*)[ \t]*")


def _is_int_literal(text: str) -> bool:
    """VLMEvalKit ``istype(x, int)`` (``isinstance(eval(x), int)``) for the strings an index column holds."""
    return bool(_INT_LITERAL.fullmatch(text))


def dropped_noimg_indices(path: str | os.PathLike[str]) -> frozenset[str]:
    """The ``str(index)`` of the rows :func:`load_vlmeval_tsv` drops (``skip_noimg``: no ``image`` cell), for
    telling a response to such a row (upstream never scores it) from an index the TSV does not hold at all.
    Empty for a file that is not a TSV or has no ``image`` column."""
    import pandas as pd  # noqa: PLC0415

    path = Path(path)
    if path.suffix.lower() != ".tsv" or not path.is_file():
        return frozenset()
    try:
        header = pd.read_csv(path, sep="\t", nrows=0)
        if "image" not in header.columns or "index" not in header.columns:
            return frozenset()
        frame = pd.read_csv(path, sep="\t", usecols=["index", "image"])
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError):
        return frozenset()
    return frozenset(str(i) for i in frame.loc[pd.isna(frame["image"]), "index"])


def load_vlmeval_tsv(path: str | os.PathLike[str], *, skip_noimg: bool = True) -> list[Row]:
    """The rows of a VLMEvalKit TSV in file order, typed as ``ImageBaseDataset`` types them.

    Each row maps every column to a Python value (``str``, ``int``, ``float``; NaN for empty cells). ``index``
    is ``int`` when every index is an int literal, else ``str``; ``image`` is the base64 string or a list of
    them (references resolved); ``image_path`` is a string or a list.

    Raises:
        InputError: the file is missing, is not a TSV with an ``index`` column, or an image reference dangles.

    A TSV over VLMEvalKit's 1 GiB threshold is read as upstream localises it: its images are named ``.jpg``, so
    they are materialised as the same re-encoded JPEG files the paper's runs served.
    """
    import pandas as pd  # noqa: PLC0415 - keep `import trace_lib.data` light

    path = Path(path)
    file = str(path)
    if not path.is_file():
        problem = not_regular(path)
        raise InputError(f"dataset file {problem}" if problem else "dataset file not found", file=file,
                         hint="run 'trace-repro prepare-data' for it ('score' also takes --dataset FILE)")
    localize = path.stat().st_size > LOCALIZE_THRESHOLD_BYTES
    try:
        frame = pd.read_csv(path, sep="\t")
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(f"not a readable TSV ({exc.__class__.__name__}: {str(exc)[:120]})", file=file) from None
    if "index" not in frame.columns:
        raise InputError("missing column", file=file, field="index", expected="a VLMEvalKit TSV")
    if skip_noimg and "image" in frame.columns:
        frame = frame[~pd.isna(frame["image"])]
    columns = [str(c) for c in frame.columns]
    rows: list[Row] = [  # a column the file lacks is one line when a protocol reads it (DataRow)
        DataRow({col: _native(val) for col, val in zip(columns, values)})
        for values in frame.itertuples(index=False, name=None)
    ]
    for row in rows:
        row["index"] = str(row["index"])
    raw_images = {row["index"]: row["image"] for row in rows} if "image" in columns else {}
    if "image" in columns:
        _resolve_images(rows, file)
    if "image_path" in columns:
        for row in rows:
            paths = _to_list_of_str(row["image_path"], file=file, field=f"rows[{row['index']}].image_path")
            row["image_path"] = paths[0] if len(paths) == 1 else paths
    elif localize and raw_images:
        _name_localized_images(rows, raw_images)
    if all(_is_int_literal(row["index"]) for row in rows):
        for row in rows:
            row["index"] = int(row["index"])
    return rows


def _name_localized_images(rows: list[Row], raw_images: dict[str, Any]) -> None:
    """``vlmeval/smp/file.py:localize_df`` file names for a TSV over 1 GiB: ``<index>.jpg`` (a reference cell
    shares the referenced row's file; several images become ``<index>_<i>.jpg``).

    Upstream decodes them once into JPEG files and serves those; naming the files ``.jpg`` here makes
    :func:`materialize_images` write the same re-encoded JPEG bytes (``Image.save`` infers the format from the name).
    """
    for row in rows:
        cell = raw_images[row["index"]]
        cell = "" if isna(cell) else str(cell)
        base = cell if 0 < len(cell) <= IMAGE_REFERENCE_MAX_CHARS else row["index"]
        images = row["image"]
        if isinstance(images, list) and len(images) > 1:
            row["image_path"] = [f"{base}_{i}.jpg" for i in range(len(images))]
        else:
            row["image_path"] = f"{base}.jpg"


def _resolve_images(rows: list[Row], file: str) -> None:
    cells = {row["index"]: ("" if isna(row["image"]) else str(row["image"])) for row in rows}
    resolved = dict(cells)
    for key, cell in cells.items():
        if 0 < len(cell) <= IMAGE_REFERENCE_MAX_CHARS:
            if cell not in cells or len(cells[cell]) <= IMAGE_REFERENCE_MAX_CHARS:
                raise InputError("image reference names no row with an image", file=file,
                                 field=f"rows[{key}].image", found=cell)
            resolved[key] = cells[cell]
    for row in rows:
        images = _to_list_of_str(resolved[row["index"]], file=file, field=f"rows[{row['index']}].image")
        row["image"] = images[0] if len(images) == 1 else images


# -- images --------------------------------------------------------------------------------------------------
def _readable_image(path: Path) -> bool:
    """VLMEvalKit ``read_ok``: the file exists and PIL opens it with a non-zero size."""
    if not path.exists():
        return False
    from PIL import Image  # noqa: PLC0415

    try:
        with Image.open(path) as image:
            return image.size[0] > 0 and image.size[1] > 0
    except Exception:  # noqa: BLE001 - any unreadable file is re-decoded, as upstream does
        return False


def decode_base64_to_image_file(encoded: str, path: str | os.PathLike[str], *, field: str = "image") -> Path:
    """Decode one base64 image to ``path`` (RGBA/P/LA converted to RGB; format from the extension), atomically."""
    from PIL import Image  # noqa: PLC0415

    target = Path(path)
    try:
        data = base64.b64decode(encoded)
        image = Image.open(io.BytesIO(data))
        image.load()
    except (binascii.Error, ValueError, OSError) as exc:
        raise InputError(f"image cell is not a decodable base64 image ({exc.__class__.__name__})",
                         field=field) from None
    if image.mode in CONVERT_TO_RGB_MODES:
        image = image.convert("RGB")
    save_image_atomic(image, target)
    return target


def save_image_atomic(image: Any, path: Path) -> None:
    """``image.save(path)`` (format from the extension, as PIL infers it) through :func:`atomic_output`, without
    ``fsync``: image files are a re-derivable cache, and an unreadable one is decoded again.

    Raises:
        ValueError: PIL knows no format for the file extension (nothing is written).
    """
    from PIL import Image  # noqa: PLC0415

    extension = os.path.splitext(path)[1].lower()
    image_format = Image.registered_extensions().get(extension)
    if image_format is None:
        raise ValueError(f"unknown file extension: {extension}")
    with atomic_output(path, "w+b", durable=False) as handle:
        image.save(handle, format=image_format)


def _image_names(row: Row) -> list[tuple[str, str]]:
    """(base64, file name) pairs exactly as ``dump_image`` names them."""
    images = row["image"]
    index = row["index"]
    if isinstance(images, list):
        names = row["image_path"] if "image_path" in row else [f"{index}_{i}.png" for i in range(len(images))]
        if isinstance(names, str):
            names = [names]
        return list(zip(images, names))  # zip: upstream silently truncates to the shorter list
    if "image_path" in row:
        if not isinstance(row["image_path"], str):
            raise InputError("one image but several image_path names", field=f"rows[{index}].image_path")
        return [(images, row["image_path"])]
    return [(images, f"{index}.png")]


def materialize_images(row: Row, image_dir: str | os.PathLike[str]) -> list[str]:
    """The row's images as absolute file paths under ``image_dir``, decoded where not already readable.

    Rows without an ``image`` column use ``image_path`` (absolute, else relative to ``image_dir``).

    Raises:
        InputError: an image cell does not decode, or a referenced file does not exist.
    """
    root = Path(image_dir).absolute()
    if "image" in row:
        paths = []
        for encoded, name in _image_names(row):
            target = root / name
            if not _readable_image(target):
                decode_base64_to_image_file(encoded, target, field=f"rows[{row['index']}].image")
            paths.append(str(target))
        return paths
    if "image_path" not in row:
        raise InputError("row has neither image nor image_path", field=f"rows[{row['index']}]")
    names = _to_list_of_str(row["image_path"], file=None, field=f"rows[{row['index']}].image_path")  # a TSV cell
    if all(_readable_image(Path(name)) for name in names):
        return [str(Path(name).absolute()) for name in names]
    rooted = [root / name for name in names]
    missing = [str(p) for p in rooted if not _readable_image(p)]
    if missing:
        raise InputError("image file not found", field=f"rows[{row['index']}].image_path", found=missing[0])
    return [str(p) for p in rooted]


def image_count(row: Row) -> int:
    """How many images the row carries."""
    value = row.get("image", row.get("image_path"))
    return len(value) if isinstance(value, list) else (0 if value is None else 1)
