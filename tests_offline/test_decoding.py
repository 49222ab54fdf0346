"""The one input-decoding policy (trace_lib.decoding): invalid UTF-8 or a BOM in any text input is one line naming
the file and the byte offset, for response files (store and plain), pids.txt, release files and markers."""

from __future__ import annotations

import codecs
import shutil

import pytest

from trace_lib.decoding import ascii_digits, decode, iter_lines, read_text
from trace_lib.errors import InputError, ReleaseFileError
from trace_lib.generation.store import load_header, load_responses
from trace_lib.release import identity
from trace_lib.release.load import load_json
from trace_lib.scoring.plain_responses import indexed_records
from trace_lib.testing.cli_runner import run_cli

pytestmark = pytest.mark.offline

HEADER = (b'{"kind":"header","schema_version":"trace-repro-responses-v1","slice":"m-seed42-b","model":"m",'
          b'"model_revision":"r","seed":42,"benchmark":"b","contract_hash":"0","contract":{}}\n')


def test_decode_names_the_file_and_the_byte_offset():
    with pytest.raises(InputError, match=r"^f.txt: not UTF-8 text at byte offset 13 \(bytes e9\)"):
        decode(b"abc\xe9", file="f.txt", offset=10)
    for bom in (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff"):
        with pytest.raises(InputError, match="byte-order mark \\(byte offset 0\\)"):
            decode(bom + b"x", file="f.txt")
    assert decode("é".encode(), file="f.txt") == "é"


@pytest.mark.parametrize(("data", "offset"), [
    (HEADER + b'{"kind":"row","text":"caf\xe9"}\n', len(HEADER) + 25),
    (b'\xef\xbb\xbf' + HEADER, 0),
    (b'{"kind":"header","x":"\xc3"}\n', 22),
])
def test_a_response_store_file_with_bad_bytes_is_one_line_with_the_offset(tmp_path, data, offset):
    path = tmp_path / "responses.jsonl"
    path.write_bytes(data)
    reader = load_header if offset < len(HEADER) else load_responses
    with pytest.raises(InputError, match=f"byte offset {offset}") as info:
        reader(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_a_plain_response_file_with_bad_bytes_names_the_offset(tmp_path):
    path = tmp_path / "plain.jsonl"
    first = b'{"index": 1, "response": "a"}\n'
    path.write_bytes(first + b'{"index": 2, "response": "\xff"}\n')
    with pytest.raises(InputError, match=f"plain.jsonl: not UTF-8 text at byte offset {len(first) + 26}"):
        list(indexed_records(path))


def test_release_json_and_requirement_files_are_release_errors_with_the_offset(tmp_path, release):
    (tmp_path / "r.json").write_bytes(b'\xef\xbb\xbf{"a": 1}')
    with pytest.raises(ReleaseFileError, match="byte-order mark"):
        load_json(tmp_path / "r.json", name="rlvr/x.json")
    copy = tmp_path / "release"
    shutil.copytree(release.file("rlvr"), copy / "rlvr")
    requirements = copy / identity.EVAL_REQUIREMENTS_RUNTIME
    requirements.write_bytes(requirements.read_bytes() + b"caf\xe9==1.0\n")
    result = run_cli(["env", "constraints", "--trace-root", str(copy)])
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1
    assert identity.EVAL_REQUIREMENTS_RUNTIME in result.stderr and "byte offset" in result.stderr


def test_read_text_keeps_good_text_exact(tmp_path):
    (tmp_path / "t").write_bytes("a\r\nü\n".encode())
    assert read_text(tmp_path / "t") == "a\r\nü\n"


def test_a_path_given_as_text_is_read_and_checked_as_a_path(tmp_path):
    """Both readers take a ``str`` as well as a ``Path``; the check hands back a ``Path``."""
    from trace_lib.decoding import check_input_file

    (tmp_path / "t").write_bytes(b"x\n")
    assert check_input_file(str(tmp_path / "t")) == tmp_path / "t"
    assert (read_text(str(tmp_path / "t")), list(iter_lines(str(tmp_path / "t")))) == ("x\n", [(1, "x\n")])


def test_an_input_that_is_a_fifo_is_refused_instead_of_blocking(tmp_path):
    import os

    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(InputError, match="is a FIFO, not a regular file"):
        read_text(tmp_path / "fifo")
    result = run_cli(["receipt", str(tmp_path / "fifo")])  # used to block forever on open()
    assert result.returncode == 2 and "a FIFO" in result.stderr


def test_ascii_digits_takes_only_plain_ascii_numbers():
    """One or more ASCII digits: not empty, not letters, not the superscript digits ``str.isdigit`` also takes."""
    assert ascii_digits("0042") is True
    assert [ascii_digits(text) for text in ("", "a", "4a", "²", "٣")] == [False] * 5


def test_a_bom_is_refused_only_at_the_start_of_a_file_and_the_hint_says_how_to_save():
    """A byte-order mark is a BOM only at byte offset 0 (later it is text to decode); each refusal ends with
    what to do."""
    assert decode(codecs.BOM_UTF8 + b"x", file="f.txt", offset=7) == "\ufeffx"
    with pytest.raises(InputError) as bom:
        decode(codecs.BOM_UTF8 + b"x", file="f.txt")
    assert str(bom.value).endswith("; trace-repro reads UTF-8 without a BOM; save it as UTF-8 without BOM")
    with pytest.raises(InputError) as bad:
        decode(b"\xff", file="f.txt")
    assert str(bad.value) == "f.txt: not UTF-8 text at byte offset 0 (bytes ff); save it as UTF-8"


def test_the_error_class_the_caller_names_is_raised(tmp_path):
    """``error=``: bad bytes and a FIFO are each raised as the caller's error class, named by ``name``."""
    import os

    (tmp_path / "t").write_bytes(b"\xff")
    os.mkfifo(tmp_path / "fifo")
    for path, what in ((tmp_path / "t", "not UTF-8 text"), (tmp_path / "fifo", "is a FIFO, not a regular file")):
        with pytest.raises(ReleaseFileError) as info:
            read_text(path, name="rlvr/x.json", error=ReleaseFileError)
        assert str(info.value).startswith(f"rlvr/x.json: {what}"), str(info.value)


def test_iter_lines_numbers_lines_from_one_and_gives_each_line_its_file_offset(tmp_path):
    """Lines keep their newline and are numbered from 1; a bad byte's offset counts every line before it; a BOM
    inside the file is not refused."""
    import os

    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"ab\n" + codecs.BOM_UTF8 + b"c\n")
    assert list(iter_lines(path)) == [(1, "ab\n"), (2, "\ufeffc\n")]
    path.write_bytes(b"ab\ncd\n\xff\n")
    with pytest.raises(InputError, match=r"lines\.jsonl: not UTF-8 text at byte offset 6 \(bytes ff\)"):
        list(iter_lines(path))
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(InputError, match="is a FIFO, not a regular file"):
        next(iter_lines(tmp_path / "fifo"))
