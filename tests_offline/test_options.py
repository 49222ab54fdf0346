"""Every ``TRACE_*`` environment variable is defined once, in trace_lib/options.py, with its default."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from trace_lib import options

REPO = Path(__file__).resolve().parents[1]
_NAME = re.compile(r"TRACE_[A-Z0-9_]*[A-Z0-9]")  # a name; a prefix such as "TRACE_JUDGE_" is not one


def _spelled_out(root: Path) -> list[str]:
    """``file:line NAME`` for every string literal that is exactly a ``TRACE_*`` name."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path == REPO / "trace_lib" / "options.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _NAME.fullmatch(node.value):
                found.append(f"{path.relative_to(REPO)}:{node.lineno} {node.value}")
    return found


def test_no_module_spells_out_a_trace_variable():
    """A variable read anywhere is named through options (``options.X.name`` / ``.env``), never as a literal."""
    assert _spelled_out(REPO / "trace_lib") + _spelled_out(REPO / "tests_reproduction") == []


def test_every_variable_is_listed_once_with_its_default():
    assert all(_NAME.fullmatch(name) for name in options.ENVIRONMENT)
    assert options.ENVIRONMENT["TRACE_GPU_GROUPS"].default == "0"
    assert options.ENVIRONMENT["TRACE_JUDGE_CONCURRENCY"].default == "192"
    assert options.ENVIRONMENT["TRACE_MODEL_ROOT"].default == options.DEFAULT_WORK_DIR / "models"
    assert options.VALIDATION_BACKEND_ENV.read({}) == "vllm"
    assert options.VALIDATION_BACKEND_ENV.read({"TRACE_VALIDATION_BACKEND": "openai"}) == "openai"
    assert options.DEBUG_ENV.enabled({"TRACE_REPRO_DEBUG": "1"}) and not options.DEBUG_ENV.enabled({})


def test_every_variable_read_through_options_is_listed():
    """A new Option with ``env`` or a new EnvVar joins ENVIRONMENT without a second list to keep in step."""
    names = {v.env for v in vars(options).values() if isinstance(v, options.Option) and v.env}
    names |= {v.name for v in vars(options).values() if isinstance(v, options.EnvVar)}
    assert set(options.ENVIRONMENT) == names and "TRACE_SLICE_TIMEOUT" in names


def test_a_url_option_is_an_http_url_the_client_can_open(capsys):
    import pytest as _pytest

    from trace_lib.cli.main import main

    assert options.http_urls("http://a:1/v1, https://b/v1") == "http://a:1/v1, https://b/v1"
    for bad, words in (("http://[::1", "Invalid IPv6 URL"), ("ftp://x", "http(s) URL with a host"),
                       ("http://h:99999/v1", "Port out of range"), (",", "must be an http(s) URL")):
        with _pytest.raises(options.BadValue, match=re.escape(words)):
            options.http_urls(bad)
    with _pytest.raises(SystemExit) as exit_:  # the validation judge's client once raised httpx.InvalidURL
        main(["validation", "judge", "--judge-url", "http://[::1"])
    assert exit_.value.code == 2 and "--judge-url: not a URL" in capsys.readouterr().err


def test_url_problem_takes_only_the_schemes_asked_for_and_a_file_url_needs_no_host():
    assert options.url_problem("https://huggingface.co") is None and options.url_problem("http://[::1]:8/v1") is None
    assert options.url_problem("file:///srv/raw") == "must be an http(s) URL with a host"
    assert options.url_problem("file:///srv/raw", schemes=("http", "https", "file")) is None
    assert options.url_problem("HTTPS://Host/x") is None  # a scheme is case-insensitive
    for bad, reason in (("notaurl", "must be an http(s) URL with a host"), ("http://", "must be"),
                        ("http://[::1", "not a URL: Invalid IPv6 URL"), ("http://h:x/", "not a URL: Port"),
                        ("http://h:65536/", "not a URL: Port out of range")):
        assert (options.url_problem(bad) or "").startswith(reason), bad
    assert options.url_problem("ftp://h", what="a raw-file host") == "must be a raw-file host"


def test_a_backend_option_that_is_not_a_finite_number_is_refused():
    import argparse

    import pytest as _pytest

    from trace_lib.cli.validation import _backend_options
    from trace_lib.errors import UsageError

    assert _backend_options(argparse.Namespace(backend_option=["temperature=0.6", "name=x"])) == {
        "temperature": 0.6, "name": "x"}
    for bad in ("temperature=NaN", "timeout=1e400", "top_p=-Infinity", "x=nan"):
        with _pytest.raises(UsageError, match="not a finite number"):  # a run's metadata cannot record it
            _backend_options(argparse.Namespace(backend_option=[bad]))


def test_an_option_reads_the_flag_then_a_non_empty_variable_then_its_default():
    import pytest as _pytest

    from trace_lib.errors import UsageError

    assert options.MARGIN.resolve(None, env={"TRACE_MARGIN": ""}) == 2.0  # set but empty: as unset
    assert options.MARGIN.resolve(3.0, env={"TRACE_MARGIN": "5"}) == 3.0
    for word in ("1", "true", "YES", "on"):
        assert options.UNPINNED.resolve(None, env={"TRACE_UNPINNED": word}) is True
    assert options.UNPINNED.resolve(None, env={"TRACE_UNPINNED": "0"}) is False
    with _pytest.raises(UsageError) as bad:  # the range the flag would state, naming the variable
        options.MARGIN.resolve(None, env={"TRACE_MARGIN": "-1"})
    assert bad.value.render() == "TRACE_MARGIN: must be a finite number > 0 (found '-1')"
    assert options.VALIDATION_BACKEND_ENV.read({"TRACE_VALIDATION_BACKEND": ""}) == "vllm"
    assert not options.DEBUG_ENV.enabled({"TRACE_REPRO_DEBUG": "0"})


def test_each_range_type_takes_its_bounds_and_no_more():
    import pytest as _pytest

    assert options.non_negative_seconds("0") == 0.0  # --slice-timeout 0: none
    assert options.non_negative_int("0") == 0  # seed 0
    assert options.unit_fraction("1") == 1.0  # all of a GPU's memory
    assert options.engines_per_group("auto") == "auto" and options.engines_per_group("2") == 2
    assert options.output_tokens("1000000") == 1_000_000
    for parse, text in ((options.open_unit_number, "1"), (options.open_unit_number, "0"),
                        (options.engines_per_group, "AUTO"), (options.output_tokens, "1000001"),
                        (options.unit_fraction, "0")):
        with _pytest.raises(options.BadValue, match=re.escape(f"(found {text!r})")):
            parse(text)


def test_gpu_groups_are_ascii_digits_and_at_least_one_group():
    import pytest as _pytest

    from trace_lib.errors import UsageError

    with _pytest.raises(UsageError, match="--gpu-groups: no GPU group"):
        options.parse_gpu_groups("   ")
    with _pytest.raises(UsageError, match="--gpu-groups: invalid GPU group"):
        options.parse_gpu_groups("\u00b2")  # a digit to str.isdigit, not to int()


def test_a_directory_option_under_a_file_or_empty_in_the_environment(tmp_path, monkeypatch):
    import pytest as _pytest

    from trace_lib.errors import UsageError

    (tmp_path / "file").write_text("x")
    with _pytest.raises(UsageError) as refused:
        options.check_directory(tmp_path / "file" / "campaign", field="--campaign-root")
    assert refused.value.render() == (f"--campaign-root: runs under a file, not a directory (found "
                                      f"'{tmp_path / 'file' / 'campaign'}')")
    monkeypatch.setenv(options.MODEL_ROOT_ENV.name, "")
    assert options.work_root(None, options.MODEL_ROOT_ENV.name, "models") == options.DEFAULT_WORK_DIR / "models"


def test_tolerance_z_is_refused_where_evaluation_verdicts_are_made(release, capsys):
    from trace_lib.cli.main import main

    assert main(["plan", "--trace-root", str(release.path), "--tolerance-z", "2"]) == 2
    assert "--tolerance-z: --tolerance-z no longer applies to evaluation verdicts" in capsys.readouterr().err
