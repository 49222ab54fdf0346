"""A row's cell that the protocol cannot use (an image that does not decode) is one line naming the data file, the
benchmark and the row's column, on every path that builds prompts (``generate``, ``prepare-data``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest

from trace_lib.benchmarks.registry import get_protocol
from trace_lib.data.manifest import build_dataset_entry
from trace_lib.data.prepare import ArtifactSource
from trace_lib.data.prompts import build_row_prompt
from trace_lib.errors import InputError
from trace_lib.release.suite import Benchmark, Suite
from trace_lib.testing.cli_runner import run_cli
from trace_lib.testing.openai_server import OpenAIStubServer
from trace_lib.testing.tiny_bench import build_tiny_tsv, tiny_tsv_protocol

pytestmark = pytest.mark.offline

BAD_CELL = "not-base64-" * 10
LINE = "mmstar.rows[1].image: image cell is not a decodable base64 image (Error)"


def _mmstar_with_a_bad_image(path: Path, rows: int = 3) -> Path:
    """A tiny MMStar-format TSV whose row of index 1 holds an image cell that is not base64."""
    import pandas as pd

    build_tiny_tsv(path, style="mcq", rows=rows)
    frame = pd.read_csv(path, sep="\t")
    frame.loc[frame["index"] == 1, "image"] = BAD_CELL
    frame.to_csv(path, sep="\t", index=False)
    return path


def _generate_mmstar(release, tmp_path: Path):  # noqa: ANN001, ANN202
    """``generate`` of MMStar seed 43 from ``tmp_path/data`` against a stub server: the run and the server."""
    with OpenAIStubServer(lambda route, body: "B", model="tiny") as server:
        done = run_cli(["generate", "--trace-root", str(release.path), "--model", "tiny", str(tmp_path / "model"),
                        f"sha256set:{'1' * 64}", f"org/tiny@{'0' * 40}", "Tiny", "--seeds", "43",
                        "--benchmark", "mmstar", "--campaign-root", str(tmp_path / "campaign"),
                        "--data-root", str(tmp_path / "data"), "--backend", "openai", "--base-url", server.url,
                        "--unprepared-data", "--no-progress"])
    return done, server


def test_generate_names_the_tsv_of_an_image_cell_that_does_not_decode(release, tmp_path):
    tsv = _mmstar_with_a_bad_image(tmp_path / "data" / "MMStar.tsv")
    done, server = _generate_mmstar(release, tmp_path)
    assert done.returncode == 1, done.stderr  # the slice failed
    assert f"tiny-seed43-mmstar: error: {tsv}: {LINE}\n" in done.stderr
    assert server.requests == []  # nothing was sent for a dataset that cannot be read whole


def test_prepare_data_names_the_tsv_of_an_image_cell_that_does_not_decode(tmp_path):
    data_root = tmp_path / "data"
    tsv = _mmstar_with_a_bad_image(data_root / "MMStar.tsv")
    bench = Benchmark("mmstar", "MMStar", "MMStar", "Cat", "official_vlmevalkit", 3, "a", "s")
    suite = Suite("trace_eval_v1", (bench,), MappingProxyType({"Cat": ("mmstar",)}),
                  MappingProxyType({"official_vlmevalkit": ("mmstar",)}), MappingProxyType({}), "f" * 40, "e" * 64)
    source = ArtifactSource("mmstar", "MMStar", "url", url="http://unused/MMStar.tsv")
    with pytest.raises(InputError) as refused:
        build_dataset_entry(source, data_root, get_protocol("mmstar"), suite, workers=1)
    assert refused.value.render() == f"{tsv}: {LINE}"


def test_an_error_that_names_its_own_file_is_kept(tmp_path):
    """A cell error already naming a file (an image the row points at) is not renamed to the data file."""
    def points_at_a_file(row, image_dir):
        raise InputError("unreadable image", file="pic.png", field=f"rows[{row['index']}].image_path")

    protocol = replace(tiny_tsv_protocol("tinya"), build_prompt=points_at_a_file)
    with pytest.raises(InputError) as refused:
        build_row_prompt(protocol, {"index": 5}, tmp_path, source=tmp_path / "tinya.tsv")
    assert refused.value.render() == "pic.png: rows[5].image_path: unreadable image"


def _mmstar_without(path: Path, column: str, rows: int = 3) -> Path:
    """A tiny MMStar-format TSV lacking ``column``."""
    import pandas as pd

    build_tiny_tsv(path, style="mcq", rows=rows)
    pd.read_csv(path, sep="\t").drop(columns=[column]).to_csv(path, sep="\t", index=False)
    return path


MISSING = ("column is missing from the data file (the benchmark reads it); use the benchmark's own data file "
           "('trace-repro prepare-data')")


def test_generate_names_a_column_the_data_file_lacks(release, tmp_path):
    """A TSV without the ``question`` column MMStar's prompt reads was a ``KeyError`` traceback that ended the whole
    run (exit 1): now the slice fails with one line naming the file, the benchmark, the row and the column."""
    tsv = _mmstar_without(tmp_path / "data" / "MMStar.tsv", "question")
    done, server = _generate_mmstar(release, tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"tiny-seed43-mmstar: error: {tsv}: mmstar.rows[0].question: {MISSING}\n" in done.stderr
    assert server.requests == []


def test_score_names_a_column_the_data_file_lacks(release, tmp_path):
    """``score --dataset`` of a TSV without the ``answer`` column MMStar's scorer reads: one line, exit 2, nothing
    written (it was a ``KeyError`` traceback, exit 1)."""
    import json

    tsv = _mmstar_without(tmp_path / "MMStar.tsv", "answer")
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps({"index": i, "response": "The answer is B."}) + "\n" for i in range(3)))
    with OpenAIStubServer(lambda route, body: "B", model="qwen3-32b-judge") as judge:
        done = run_cli(["score", "--trace-root", str(release.path), "--benchmark", "mmstar", "--dataset", str(tsv),
                        "--responses", str(responses), "--seed", "42", "--out", str(tmp_path / "out"),
                        "--judge-url", judge.url])
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr == f"error: {tsv}: mmstar.rows[0].answer: {MISSING}\n"
    assert not (tmp_path / "out").exists()


def test_a_missing_column_is_still_a_key_error_for_code_that_handles_one():
    from trace_lib.errors import MissingColumn
    from trace_lib.protocol import DataRow

    row = DataRow({"index": 7, "question": "q"})
    assert row.get("hint", "none") == "none" and "hint" not in row
    with pytest.raises(KeyError) as missing:
        row["hint"]
    assert isinstance(missing.value, MissingColumn) and str(missing.value) == (
        "rows[7].hint: column is missing from the data file (the benchmark reads it); use the benchmark's own data "
        "file ('trace-repro prepare-data')")


@pytest.mark.parametrize(("field", "named"), [
    ("rows[5].image", "tinya.rows[5].image"),
    ("tinya.rows[5].image", "tinya.rows[5].image"),  # already named by its benchmark: not twice
    ("tinya[5]", "tinya[5]"),
    ("tinya", "tinya"),
    (None, "tinya"),  # no field: the benchmark alone
    ("tinyab.options", "tinya.tinyab.options"),  # another key that only starts like this one's
])
def test_a_cell_error_is_named_once_by_benchmark_and_keeps_its_details(tmp_path, field, named):
    def refuses(row, image_dir):
        raise InputError("cell is not a list literal", field=field, expected="a list", found="[1,", hint="fix it")

    protocol = replace(tiny_tsv_protocol("tinya"), build_prompt=refuses)
    with pytest.raises(InputError) as refused:
        build_row_prompt(protocol, {"index": 5}, tmp_path, source=tmp_path / "tinya.tsv")
    assert refused.value.render() == (f"{tmp_path / 'tinya.tsv'}: {named}: cell is not a list literal (expected "
                                      "'a list', found '[1,'); fix it")
