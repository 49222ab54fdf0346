"""Tiny benchmark files in the real VLMEvalKit TSV format, and a minimal protocol that reads them (tests only).

``build_tiny_tsv(path, style=...)`` writes a tab-separated file whose ``image`` column holds base64 PNGs, with
the columns of a VLMEvalKit benchmark of that style:

- ``"mcq"`` (MMStar-like): ``index, question, A, B, C, D, answer, category, l2-category, image``
  (some rows have only options A-C, NaN in D, like real TSVs);
- ``"vqa"`` (MathVista-like): ``index, image, question, answer, question_type, answer_type, precision, choices,
  unit``;
- ``"multi_image_mcq"`` (BLINK-like): ``index, image`` (a JSON list of base64 PNGs), ``question, A, B, answer``.

Images are small deterministic PNGs of varied sizes (some below the Qwen minimum pixel bound, one RGBA).
:func:`tiny_tsv_protocol` is *not* a benchmark protocol: it is the smallest loader/prompt builder over these
files (images materialised as ``<image_dir>/<index>.png`` / ``<index>_<i>.png``, prompt = images then
question and options), so engine tests exercise generation without depending on a benchmark's details.
"""

from __future__ import annotations

import base64
import io
import json
import math
import random
from pathlib import Path
from typing import Any, Literal, Sequence

from trace_lib.atomic import atomic_output

Style = Literal["mcq", "vqa", "multi_image_mcq"]

_SUBJECTS = ("apples", "circles", "triangles", "cars", "birds", "stars", "chairs", "cups")
_COLOURS = ((200, 30, 30), (30, 160, 60), (40, 70, 200), (220, 180, 20), (120, 40, 160), (20, 150, 170))


def tiny_png(seed: int, *, size: tuple[int, int] | None = None, mode: str = "RGB") -> bytes:
    """A small deterministic PNG (coloured rectangles on a background)."""
    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    width, height = size or (rng.choice((40, 56, 64, 90, 120)), rng.choice((32, 56, 70, 84)))
    background = _COLOURS[rng.randrange(len(_COLOURS))]
    img = Image.new("RGB", (width, height), background)
    draw = ImageDraw.Draw(img)
    for _ in range(rng.randint(1, 4)):
        x0, y0 = rng.randrange(width // 2), rng.randrange(height // 2)
        draw.rectangle([x0, y0, x0 + rng.randint(4, width // 2), y0 + rng.randint(4, height // 2)],
                       fill=_COLOURS[rng.randrange(len(_COLOURS))])
    if mode != "RGB":
        img = img.convert(mode)
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _rows(style: Style, rows: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(rows):
        subject = _SUBJECTS[i % len(_SUBJECTS)]
        count = rng.randint(1, 9)
        mode = "RGBA" if i == 1 else "RGB"
        size = (20, 20) if i == 2 else None  # below min_pixels: the processor must upscale it
        image = _b64(tiny_png(seed * 1000 + i, size=size, mode=mode))
        if style == "mcq":
            options = [str(count + d) for d in (0, 1, 2, 3)]
            rng.shuffle(options)
            if i % 3 == 0:  # a three-option row: D is NaN and the answer is among A-C
                options = [str(count), *(o for o in options if o != str(count))][:3]
                rng.shuffle(options)
                options.append(math.nan)
            row = {"index": i, "question": f"How many {subject} are in the image?",
                   "A": options[0], "B": options[1], "C": options[2], "D": options[3],
                   "answer": "ABCD"[options.index(str(count))],
                   "category": "coarse perception", "l2-category": "counting", "image": image}
        elif style == "vqa":
            row = {"index": 1000 + i, "image": image,
                   "question": f"Hint: Please answer the question requiring an integer answer.\n"
                               f"Question: How many {subject} are shown? (unit: {subject})",
                   "answer": str(count), "question_type": "free_form", "answer_type": "integer",
                   "precision": math.nan, "choices": "[]", "unit": subject}
        else:
            images = [_b64(tiny_png(seed * 1000 + i * 10 + j)) for j in range(2)]
            row = {"index": f"val_{i}", "image": json.dumps(images),
                   "question": "Which image shows more red?", "A": "the first image", "B": "the second image",
                   "answer": "AB"[count % 2]}
        out.append(row)
    return out


def build_tiny_tsv(path: Path, *, style: Style = "mcq", rows: int = 8, seed: int = 0) -> Path:
    """Write a tiny VLMEvalKit-style TSV with ``rows`` rows at ``path`` and return it."""
    import pandas as pd

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(_rows(style, rows, seed)).to_csv(path, sep="\t", index=False)
    return path


def _decode_images(cell: str) -> list[bytes]:
    text = str(cell)
    if text.startswith("["):
        return [base64.b64decode(x) for x in json.loads(text)]
    return [base64.b64decode(text)]


def _load(path: Path) -> list[dict[str, Any]]:
    import pandas as pd

    frame = pd.read_csv(path, sep="\t", keep_default_na=True)
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
            for r in frame.to_dict(orient="records")]


def _build_prompt(row: dict[str, Any], image_dir: Path) -> list[Any]:
    from trace_lib.benchmarks.protocol import PromptItem

    image_dir = Path(image_dir)
    image_dir.mkdir(parents=True, exist_ok=True)
    blobs = _decode_images(row["image"])
    items = []
    for j, blob in enumerate(blobs):
        name = f"{row['index']}.png" if len(blobs) == 1 else f"{row['index']}_{j}.png"
        target = image_dir / name
        if not target.exists():
            with atomic_output(target, durable=False) as handle:  # an image cache: re-decoded if lost
                handle.write(blob)
        items.append(PromptItem("image", str(target.resolve())))
    text = f"Question: {row['question']}\n"
    options = [(k, row[k]) for k in "ABCD" if row.get(k) is not None]
    if options:
        text += "Options:\n" + "".join(f"{k}. {v}\n" for k, v in options)
        text += "Please select the correct answer from the options above. \n"
    items.append(PromptItem("text", text))
    return items


def _score(rows: Sequence[Any], responses: Sequence[str | None], context: Any) -> Any:
    from trace_lib.benchmarks.protocol import RowScore, SliceScore

    records = tuple(RowScore(index=str(r["index"]), extracted=(resp or "")[:1], score=0.0)
                    for r, resp in zip(rows, responses))
    return SliceScore(benchmark="tiny", score=0.0, rows=len(records), records=records)


def tiny_tsv_protocol(key: str = "tiny") -> Any:
    """A minimal :class:`~trace_lib.benchmarks.protocol.Protocol` over :func:`build_tiny_tsv` files."""
    from trace_lib.benchmarks.protocol import Protocol

    return Protocol(key=key, upstream="trace_lib.testing.tiny_bench", version="tiny-1", load=_load,
                    build_prompt=_build_prompt, score=_score)
