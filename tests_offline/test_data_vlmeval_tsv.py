"""VLMEvalKit TSV loading and image materialisation (``trace_lib.data.vlmeval_tsv``)."""

from __future__ import annotations

import base64
import io
import math
from pathlib import Path

import pytest

from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.errors import InputError

PIL = pytest.importorskip("PIL.Image", reason="pillow is needed to decode images (test extra)")


def _b64(mode: str = "RGB", size: tuple[int, int] = (3, 2)) -> str:
    buffer = io.BytesIO()
    image = PIL.new(mode, size)
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def _write(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    path.write_text("\n".join("\t".join(r) for r in [header, *rows]) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def tsv(tmp_path: Path) -> Path:
    img = _b64()
    return _write(tmp_path / "MMStar.tsv", ["index", "image", "question", "A", "B", "answer"], [
        ["1", img, "Q1", "x", "y", "A"],
        ["2", "1", "Q2 reuses row 1's image", "x", "", "B"],
        ["3", "", "no image: dropped", "x", "y", "A"],
    ])


def test_rows_are_typed_like_image_base_dataset(tsv: Path) -> None:
    rows = load_vlmeval_tsv(tsv)
    assert [r["index"] for r in rows] == [1, 2]
    assert rows[1]["image"] == rows[0]["image"]  # a <=64-char cell names another row's index
    assert math.isnan(rows[1]["B"])


def test_skip_noimg_false_keeps_rows_without_image(tsv: Path) -> None:
    assert [r["index"] for r in load_vlmeval_tsv(tsv, skip_noimg=False)] == [1, 2, 3]


def test_non_integer_indices_stay_text(tmp_path: Path) -> None:
    path = _write(tmp_path / "x.tsv", ["index", "image", "question"], [["a1", _b64(), "q"], ["7", _b64(), "q"]])
    assert [r["index"] for r in load_vlmeval_tsv(path)] == ["a1", "7"]


def test_list_images_and_image_path_names(tmp_path: Path) -> None:
    cell = repr([_b64(), _b64("RGBA")])
    path = _write(tmp_path / "ERQA.tsv", ["index", "image", "question"], [["5", cell, "q"]])
    row = load_vlmeval_tsv(path)[0]
    paths = materialize_images(row, tmp_path / "images")
    assert [Path(p).name for p in paths] == ["5_0.png", "5_1.png"]
    assert all(Path(p).is_absolute() for p in paths)


def test_rgba_palette_and_la_images_are_saved_as_rgb(tmp_path: Path) -> None:
    rows = [{"index": i, "image": _b64(mode)} for i, mode in enumerate(["RGBA", "P", "LA", "L"])]
    modes = [PIL.open(materialize_images(r, tmp_path)[0]).mode for r in rows]
    assert modes == ["RGB", "RGB", "RGB", "L"]


def test_image_path_column_names_the_file(tmp_path: Path) -> None:
    row = {"index": 9, "image": _b64(), "image_path": "nested/pic.jpg"}
    path = Path(materialize_images(row, tmp_path)[0])
    assert (path.name, PIL.open(path).format) == ("pic.jpg", "JPEG")


def test_readable_existing_file_is_reused(tmp_path: Path) -> None:
    first = Path(materialize_images({"index": 1, "image": _b64(size=(4, 4))}, tmp_path)[0])
    materialize_images({"index": 1, "image": _b64(size=(9, 9))}, tmp_path)
    assert PIL.open(first).size == (4, 4)


def test_undecodable_image_is_a_one_line_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"rows\[3\]\.image: image cell is not a decodable base64 image"):
        materialize_images({"index": 3, "image": "not-base64-" * 10}, tmp_path)


def test_dangling_image_reference_is_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "x.tsv", ["index", "image", "question"], [["1", "42", "q"]])
    with pytest.raises(InputError, match="image reference names no row"):
        load_vlmeval_tsv(path)


def test_missing_file_and_missing_index_column(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="dataset file not found"):
        load_vlmeval_tsv(tmp_path / "absent.tsv")
    with pytest.raises(InputError, match="index: missing column"):
        load_vlmeval_tsv(_write(tmp_path / "y.tsv", ["id", "question"], [["1", "q"]]))


def test_a_tsv_over_the_localisation_threshold_serves_upstreams_jpeg_files(tmp_path: Path, monkeypatch) -> None:
    """Over 1 GiB, VLMEvalKit's localize_df decodes every image once to <index>.jpg (references share the file,
    several images become <index>_<i>.jpg) and serves those JPEG bytes; trace-repro names and writes the same."""
    from PIL import Image

    import trace_lib.data.vlmeval_tsv as vlmeval_tsv

    monkeypatch.setattr(vlmeval_tsv, "LOCALIZE_THRESHOLD_BYTES", 10)
    one, two = _b64("RGBA", (5, 4)), _b64("RGB", (3, 3))
    path = _write(tmp_path / "big.tsv", ["index", "image", "question"],
                  [["1", one, "q1"], ["2", "1", "q2"], ["3", str([one, two]), "q3"]])
    rows = load_vlmeval_tsv(path)
    assert [r["image_path"] for r in rows] == ["1.jpg", "1.jpg", ["3_0.jpg", "3_1.jpg"]]
    images = tmp_path / "images"
    assert materialize_images(rows[1], images) == [str(images / "1.jpg")]
    assert materialize_images(rows[2], images) == [str(images / "3_0.jpg"), str(images / "3_1.jpg")]

    def upstream_bytes(encoded: str) -> bytes:  # decode_base64_to_image_file(b64, "<x>.jpg")
        image = Image.open(io.BytesIO(base64.b64decode(encoded)))
        image = image.convert("RGB") if image.mode in ("RGBA", "P", "LA") else image
        out = io.BytesIO()
        image.save(out, format="JPEG")
        return out.getvalue()

    assert (images / "1.jpg").read_bytes() == upstream_bytes(one)
    assert (images / "3_1.jpg").read_bytes() == upstream_bytes(two)
    with Image.open(images / "3_0.jpg") as image:
        assert image.format == "JPEG"


def test_a_fifo_where_the_dataset_belongs_is_named_not_missing(tmp_path):
    import os

    from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv
    from trace_lib.errors import InputError

    os.mkfifo(tmp_path / "MMStar.tsv")  # never opened: it would block
    with pytest.raises(InputError, match="dataset file is a FIFO, not a regular file"):
        load_vlmeval_tsv(tmp_path / "MMStar.tsv")


def test_native_makes_none_nan_and_numpy_scalars_python() -> None:
    import numpy as np

    from trace_lib.data.vlmeval_tsv import _native

    assert math.isnan(_native(None)) and math.isnan(_native(np.float64("nan")))
    assert type(_native(np.int64(3))) is int and _native("7") == "7"


def test_an_unreadable_tsv_names_the_exception(tmp_path: Path) -> None:
    path = tmp_path / "x.tsv"
    path.write_bytes(b"index\timage\n1\t\xff\xfe\n")
    with pytest.raises(InputError, match=rf"^{path}: not a readable TSV \(UnicodeDecodeError: '"):
        load_vlmeval_tsv(path)


@pytest.mark.parametrize(("row", "count"), [({"image": ["a", "b"]}, 2), ({"image": "a"}, 1),
                                            ({"image_path": "p.png"}, 1), ({"index": 1}, 0)],
                         ids=["list", "one", "path", "none"])
def test_image_count(row: dict, count: int) -> None:
    from trace_lib.data.vlmeval_tsv import image_count

    assert image_count(row) == count


def test_dropped_noimg_indices_only_reads_an_existing_tsv(tsv: Path) -> None:
    from trace_lib.data.vlmeval_tsv import dropped_noimg_indices

    assert dropped_noimg_indices(tsv) == frozenset({"3"})
    assert dropped_noimg_indices(tsv.rename(tsv.with_suffix(".csv"))) == frozenset()
    assert dropped_noimg_indices(tsv) == frozenset()  # no such file any more


def test_a_row_with_neither_image_nor_image_path_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"^rows\[3\]: row has neither image nor image_path$"):
        materialize_images({"index": 3, "question": "q"}, tmp_path)


def test_one_image_with_several_image_path_names_is_refused(tmp_path: Path) -> None:
    row = {"index": 4, "image": _b64(), "image_path": ["a.png", "b.png"]}
    with pytest.raises(InputError, match=r"^rows\[4\]\.image_path: one image but several image_path names$"):
        materialize_images(row, tmp_path)


def test_an_image_path_row_resolves_under_image_dir_or_names_the_missing_file(tmp_path: Path) -> None:
    PIL.new("RGB", (2, 2)).save(tmp_path / "here.png")
    assert materialize_images({"index": 1, "image_path": "here.png"}, tmp_path) == [str(tmp_path / "here.png")]
    with pytest.raises(InputError) as caught:
        materialize_images({"index": 1, "image_path": "['here.png', 'absent.png']"}, tmp_path)
    assert str(caught.value) == f"rows[1].image_path: image file not found (found '{tmp_path / 'absent.png'}')"


def test_an_image_path_column_is_a_name_or_a_list(tmp_path: Path) -> None:
    path = _write(tmp_path / "x.tsv", ["index", "image", "image_path", "question"],
                  [["1", _b64(), "a.jpg", "q"], ["2", _b64(), "['b.jpg', 'c.jpg']", "q"]])
    assert [r["image_path"] for r in load_vlmeval_tsv(path)] == ["a.jpg", ["b.jpg", "c.jpg"]]


def test_a_bad_list_literal_cell_shows_its_first_80_characters(tmp_path: Path) -> None:
    cell = "[" + "x " * 60 + "]"
    with pytest.raises(InputError, match=r"rows\[1\]\.image: list-valued cell is not a Python list literal") as caught:
        load_vlmeval_tsv(_write(tmp_path / "x.tsv", ["index", "image"], [["1", cell]]))
    assert caught.value.found == cell[:80]


def test_localised_names_use_a_64_character_reference_and_the_index_of_an_empty_cell(tmp_path: Path,
                                                                                      monkeypatch) -> None:
    import trace_lib.data.vlmeval_tsv as vlmeval_tsv

    monkeypatch.setattr(vlmeval_tsv, "LOCALIZE_THRESHOLD_BYTES", 10)
    key = "k" * 64  # the longest cell that is a reference
    path = _write(tmp_path / "big.tsv", ["index", "image", "question"],
                  [[key, _b64(), "q1"], ["2", key, "q2"], ["3", "", "q3"]])
    rows = load_vlmeval_tsv(path, skip_noimg=False)
    assert rows[1]["image"] == rows[0]["image"]
    assert [r["image_path"] for r in rows] == [f"{key}.jpg", f"{key}.jpg", "3.jpg"]


def test_images_are_written_without_fsync(tmp_path: Path, monkeypatch) -> None:
    import os

    def refuse(fd: int) -> None:
        raise AssertionError("fsync called for a re-derivable image")

    monkeypatch.setattr(os, "fsync", refuse)
    assert PIL.open(materialize_images({"index": 1, "image": _b64()}, tmp_path)[0]).size == (3, 2)


def test_an_unreadable_existing_file_is_decoded_again(tmp_path: Path) -> None:
    (tmp_path / "1.png").write_bytes(b"not an image")
    assert PIL.open(materialize_images({"index": 1, "image": _b64(size=(4, 4))}, tmp_path)[0]).size == (4, 4)


def test_a_one_pixel_existing_file_is_reused(tmp_path: Path) -> None:
    first = Path(materialize_images({"index": 1, "image": _b64(size=(1, 1))}, tmp_path)[0])
    materialize_images({"index": 1, "image": _b64(size=(9, 9))}, tmp_path)
    assert PIL.open(first).size == (1, 1)
