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


def test_generate_names_the_tsv_of_an_image_cell_that_does_not_decode(release, tmp_path):
    tsv = _mmstar_with_a_bad_image(tmp_path / "data" / "MMStar.tsv")
    with OpenAIStubServer(lambda route, body: "B", model="tiny") as server:
        done = run_cli(["generate", "--trace-root", str(release.path), "--model", "tiny", str(tmp_path / "model"),
                        f"sha256set:{'1' * 64}", f"org/tiny@{'0' * 40}", "Tiny", "--seeds", "43",
                        "--benchmark", "mmstar", "--campaign-root", str(tmp_path / "campaign"),
                        "--data-root", str(tmp_path / "data"), "--backend", "openai", "--base-url", server.url,
                        "--unprepared-data", "--no-progress"])
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
