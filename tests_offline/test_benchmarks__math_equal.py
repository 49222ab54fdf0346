"""MathVision's ``is_equal`` helpers: ``evaluate`` gives Python ``eval``'s value for the supported subset, its
size bounds (a documented deviation standing in for upstream's timeout), the names ``eval`` sees, the missing
``latex2sympy2_extended`` error, and the latex step's second ``abs(a - b) < 1e-6`` test
(``VLMEvalKit@a8b12bf1:vlmeval/dataset/utils/mathv.py:is_equal``)."""

from __future__ import annotations

import sys

import pytest

from trace_lib.benchmarks import _math_equal
from trace_lib.benchmarks._math_equal import Unsupported, evaluate
from trace_lib.errors import InputError

@pytest.mark.parametrize(
    ("text", "expected"),
    [("1 and 2", 2), ("0 and 1", 0), ("1 and 0", 0), ("3 or 0", 3), ("0 or 5", 5), ("0 or ''", ""),
     ("1 < 2", True), ("1 < 2 < 3", True), ("1 < 3 < 2", False), ("1 in [1, 2]", True), ("3 not in (1, 2)", True),
     ("(1, 2)", (1, 2)), ("{1, 2}", {1, 2}), ("'ab' * 3", "ababab"), ("2 * [0]", [0, 0]), ("1 << 3", 8),
     ("1 ** 100000", 1), ("(-1) ** 100001", -1), ("0 ** 100000", 0)],
    ids=["and-last", "and-short", "and-falsy", "or-first", "or-last", "or-falsy", "lt", "chain", "chain-false",
         "in", "not-in", "tuple", "set", "repeat", "repeat-left", "shift", "one-power", "minus-one-power",
         "zero-power"],
)
def test_evaluate_gives_python_eval_value(text, expected):
    value = evaluate(text)
    assert (value, type(value)) == (expected, type(expected))


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1 << 65535", 1 << 65535), ("0 << 65536", 0), ("2 ** 32768", 2 ** 32768), ("'ab' * 524288", "ab" * 524288),
     ("'" + "a" * (2 ** 20 + 1) + "' * 0", "")],
    ids=["bits-at-bound", "zero-shift-at-bound", "power-at-bound", "repeat-at-bound", "huge-literal-times-0"],
)
def test_evaluate_is_exact_up_to_the_size_bounds(text, expected):
    assert evaluate(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [("1 << 65536", "integer too large"), ("0 << 65537", "shift too large"), ("2 ** 32769", "power too large"),
     (f"{hex(1 << 65536)} ** 1", "power too large"), ("'a' * 1048577", "repetition too large"),
     ("'ab' * 524288 + 'c'", "sequence too large"), ("max(*[1, 2])", "star arguments")],
    ids=["bits", "shift", "power", "power-of-one", "repeat", "sequence", "star-args"],
)
def test_evaluate_refuses_past_the_bounds(text, message):
    with pytest.raises(Unsupported, match=f"^{message}$"):
        evaluate(text)


def test_names_eval_sees():
    with pytest.raises(NameError, match=r"^name 'pi' is not defined$"):
        evaluate("pi")
    assert isinstance(evaluate("pd"), _math_equal._Opaque)  # mathv.py's module global
    with pytest.raises(TypeError):
        evaluate("pd - 1")
    assert evaluate("a * 2", {"a": 7}) == 14


def test_latex_to_sympy_without_the_package_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "latex2sympy2_extended", None)
    monkeypatch.setattr(_math_equal, "_latex_cache", {})
    with pytest.raises(InputError, match=r"^MathVision's answer comparison needs latex2sympy2_extended==1\.11\.0"):
        _math_equal.latex_to_sympy("\\frac{1}{2}")


@pytest.mark.parametrize(
    ("answer", "gold", "equal"),
    [("10000000000000001.0000000001", "10000000000000001", True), ("0", "0.000001", False)],
    ids=["sympy-difference", "strict-tolerance"],
)
def test_latex_step_second_difference(answer, gold, equal):
    pytest.importorskip("latex2sympy2_extended", reason="latex2sympy2_extended==1.11.0 (the 'math' extra) is not "
                        "installed")
    # Python's floats differ by 2 (eval and eval(str(sympy)) fail), sympy's a - b is 1e-10; a difference of
    # exactly 1e-6 is not below the tolerance
    assert _math_equal._is_equal_slow(answer, gold) is equal
