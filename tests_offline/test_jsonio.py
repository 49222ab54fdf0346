"""trace_lib.jsonio: the one strict reader, ``required`` and the two canonical byte forms that feed hashes."""

from __future__ import annotations

import json

import pytest

from trace_lib.errors import InputError, ReleaseFileError
from trace_lib.jsonio import (
    DuplicateKey,
    NonFinite,
    canonical_json_ascii,
    canonical_json_utf8,
    json_object,
    loads_strict,
    required,
)


def test_the_two_canonical_forms_differ_only_in_non_ascii_text():
    value = {"b": [1, 2.5, None], "a": "Résumé 数"}
    assert canonical_json_ascii(value) == '{"a":"R\\u00e9sum\\u00e9 \\u6570","b":[1,2.5,null]}'
    assert canonical_json_utf8(value) == '{"a":"Résumé 数","b":[1,2.5,null]}'
    plain = {"z": {"y": 1}, "x": "ascii"}
    assert canonical_json_ascii(plain) == canonical_json_utf8(plain) == '{"x":"ascii","z":{"y":1}}'
    for write in (canonical_json_ascii, canonical_json_utf8):
        with pytest.raises(ValueError):
            write({"x": float("nan")})


@pytest.mark.parametrize("text, error, detail", [
    ('{"a": 1, "b": {"c": 1, "c": 2}}', DuplicateKey, "c"),
    ('{"a": NaN}', NonFinite, "NaN"),
    ('[-Infinity]', NonFinite, "-Infinity"),
])
def test_the_strict_reader_refuses_duplicates_and_constants(text, error, detail):
    with pytest.raises(error) as raised:
        loads_strict(text)
    assert raised.value.args[0] == detail
    assert json.loads(text) is not None  # the stock reader would have accepted it


def test_required_names_the_file_and_the_field():
    assert required({"a": 0}, "a", file="f.json") == 0
    with pytest.raises(ReleaseFileError, match=r"f\.json: models\[2\]\.slug: required field is missing"):
        required({}, "slug", file="f.json", where="models[2].")
    with pytest.raises(InputError, match="required field is missing"):
        required([], "slug", file="m.json", error=InputError)
    for not_an_object in (None, "a slug", 5):  # a document of another shape: its field is missing, no TypeError
        with pytest.raises(ReleaseFileError, match="slug: required field is missing"):
            required(not_an_object, "slug", file="f.json")


def test_an_integer_python_cannot_read_is_named_as_such():
    from trace_lib.jsonio import HugeInteger, strict_error

    with pytest.raises(HugeInteger) as caught:
        loads_strict('{"rows_per_s": 1' + "0" * 5000 + "}")
    assert strict_error(caught.value) == (
        "holds an integer of more than 4,300 digits (no figure of trace-repro's is one)")
    assert loads_strict("1" + "0" * 4000) == 10 ** 4000  # under the limit: read as before


@pytest.mark.parametrize("value, found", [([1], "array"), (None, "null"), ("x", "string"), (1.5, "number"),
                                          (True, "boolean")])
def test_json_object_names_the_type_found(value, found):
    with pytest.raises(InputError) as refused:
        json_object(value, file="run_metadata.json", field="engine")
    assert refused.value.render() == f"run_metadata.json: engine: not a JSON object (found {found})"
    assert json_object({"a": 1}, file="f") == {"a": 1}
    with pytest.raises(ReleaseFileError):
        json_object([], file="f", error=ReleaseFileError)


def test_outside_strings_follows_json_string_state_through_escapes():
    """Quotes open and close strings (both are inside), a backslash escapes the next character inside one, and a
    brace in a string is not structure."""
    from trace_lib.jsonio import outside_strings

    text = '{"a": "x\\"}{", "b": "c\\\\", "d": 1}'  # {"a": "x\"}{", "b": "c\\", "d": 1}
    outside = "".join(char for _, char, out in outside_strings(text) if out)
    assert outside == "{: , : , : 1}"
    assert [i for i, char, out in outside_strings('"q"x') if out] == [3]
