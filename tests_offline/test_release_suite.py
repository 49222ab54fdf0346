"""trace_lib.release.suite: a suite file whose fields are of another type is one line naming the field."""

from __future__ import annotations

import json

import pytest
from preflight_support import copy_data_files

from trace_lib.errors import ReleaseFileError
from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot
from trace_lib.release.suite import load_suite

pytestmark = pytest.mark.offline


@pytest.mark.parametrize(("damage", "field", "words"), [
    (lambda doc: doc["benchmarks"][0].update(key="../../evil"), "benchmarks[0].key", "not a benchmark key"),
    (lambda doc: doc["benchmarks"][0].update(rows="many"), "benchmarks[0].rows", "not a row count"),
    (lambda doc: doc["benchmarks"][0].update(rows=-5), "benchmarks[0].rows", "not a row count"),
    (lambda doc: doc["benchmarks"][1].update(display=3), "benchmarks[1].display", "not a string"),
    (lambda doc: doc["generation"].update(temperature="hot"), "generation.temperature", "not a number"),
    (lambda doc: doc.update(generation=[]), "generation", "not an object"),
    (lambda doc: doc["routes"].update(direct_score="mathvista"), "routes.direct_score", "not a list"),
])
def test_a_mistyped_suite_field_is_one_line(release, tmp_path, damage, field, words):
    root = copy_data_files(release, tmp_path / "release")
    path = root / identity.SUITE
    doc = json.loads(path.read_text(encoding="utf-8"))
    damage(doc)
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ReleaseFileError) as refused:
        load_suite(ReleaseRoot(root))
    assert refused.value.field == field and words in str(refused.value)
    assert load_suite(release).benchmarks  # the bundled one reads as before
