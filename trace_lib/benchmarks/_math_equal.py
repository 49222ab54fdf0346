"""MathVision's answer equality ``is_equal`` and the Python ``eval`` it leans on, without running ``eval``.

Mirrors ``VLMEvalKit@a8b12bf1:vlmeval/dataset/utils/mathv.py:is_equal``: lower-case and strip both sides; equal
strings match; else ``eval`` both and compare ``abs(a - b) < 1e-6``; else parse both with ``latex2sympy``
(``latex2sympy2_extended==1.11.0``) and compare ``abs(eval(str(a)) - eval(str(b))) < 1e-6``, then (same ``try``)
``abs(a - b) < 1e-6``; any exception means "not equal".

Upstream calls Python's ``eval`` on model text. :func:`evaluate` gives the same value (or raises) for the
expressions a comparison can use: literals, arithmetic (Python semantics: ``^`` is XOR, ``1/2`` is 0.5, ``1_000``
is 1000), comparisons, boolean operators, conditional expressions, containers, subscripts and a few pure
built-ins. Names other than those built-ins raise ``NameError`` (``pi``, ``sqrt``, ``x`` do upstream too);
constructs outside this subset (attributes, lambdas, comprehensions) count as "not equal", and so do values past
the size bounds (:data:`_MAX_BITS`, :data:`_MAX_LENGTH`): upstream computes them or its 30-second timeout fires,
and no ground truth equals one. See ``deviations.py``.
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
import sys
import operator
import warnings
from typing import Any, Callable

from trace_lib.errors import InputError
from trace_lib.scoring.deadline import DeadlineWorker

#: ``is_equal``'s tolerance and time limit (``timeout_decorator.timeout(30)``).
TOLERANCE = 1e-6
TIME_LIMIT_S = 30

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.BitXor: operator.xor,
    ast.BitOr: operator.or_, ast.BitAnd: operator.and_, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
    ast.MatMult: operator.matmul,
}
_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert, ast.Not: operator.not_,
}
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
#: Built-ins that are pure functions of their arguments (any other name is NameError, as in upstream's module).
_BUILTINS: dict[str, Any] = {
    name: getattr(builtins, name)
    for name in ("abs", "min", "max", "round", "pow", "int", "float", "complex", "bool", "len", "sum", "divmod",
                 "str", "list", "tuple", "set", "dict", "sorted", "hex", "oct", "bin", "ord", "chr", "all", "any")
}
#: Bounds on computed values (past one the step fails): far above any ground truth, and quick to compute.
_MAX_BITS = 1 << 16
_MAX_LENGTH = 1 << 20


class Unsupported(Exception):
    """An expression outside the evaluated subset; treated as a failed comparison."""


def _check_size(value: Any) -> Any:
    if isinstance(value, int) and value.bit_length() > _MAX_BITS:
        raise Unsupported("integer too large")
    if isinstance(value, (str, bytes, list, tuple)) and len(value) > _MAX_LENGTH:
        raise Unsupported("sequence too large")
    return value


def _power(base: Any, exponent: Any) -> Any:
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        if exponent * max(1, abs(base).bit_length()) > _MAX_BITS:
            raise Unsupported("power too large")  # upstream: the 30 s timeout fires
    return pow(base, exponent)


def _multiply(left: Any, right: Any) -> Any:
    for seq, count in ((left, right), (right, left)):
        sized = isinstance(seq, (str, bytes, list, tuple)) and isinstance(count, int)
        if sized and len(seq) * max(count, 0) > _MAX_LENGTH:
            raise Unsupported("repetition too large")
    return left * right


def _shift(left: Any, right: Any) -> Any:
    if isinstance(right, int) and right > _MAX_BITS:
        raise Unsupported("shift too large")
    return left << right


#: Lower-case names of ``mathv.py``'s module globals: ``eval`` finds them (modules, functions, a logger), and
#: any arithmetic on them raises TypeError. ``FAIL_MSG``/``MATH_V_*`` are unreachable from lower-cased text.
_MODULE_GLOBALS = frozenset({
    "pd", "timeout_decorator", "get_logger", "load", "can_infer", "logger", "latex2sympy", "is_equal",
    "get_gpt4_ice", "build_mathv_gpt4_prompt", "list_to_dict", "post_check", "defaultdict",
})


class _Opaque:
    """A module global seen through ``eval``: it exists, but no arithmetic works on it."""


def _eval(node: ast.AST, names: dict[str, Any]) -> Any:
    if isinstance(node, ast.Expression):
        return _eval(node.body, names)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp):
        return _check_size(_UNARY[type(node.op)](_eval(node.operand, names)))
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, names), _eval(node.right, names)
        if isinstance(node.op, ast.Pow):
            return _check_size(_power(left, right))
        if isinstance(node.op, ast.Mult):
            return _check_size(_multiply(left, right))
        if isinstance(node.op, ast.LShift):
            return _check_size(_shift(left, right))
        return _check_size(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.BoolOp):
        value: Any = None
        for operand in node.values:
            value = _eval(operand, names)
            if isinstance(node.op, ast.And) and not value:
                return value
            if isinstance(node.op, ast.Or) and value:
                return value
        return value
    if isinstance(node, ast.Compare):
        left = _eval(node.left, names)
        for op, comparator in zip(node.ops, node.comparators):
            right = _eval(comparator, names)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _eval(node.body, names) if _eval(node.test, names) else _eval(node.orelse, names)
    if isinstance(node, ast.Tuple):
        return tuple(_eval(e, names) for e in node.elts)
    if isinstance(node, ast.List):
        return [_eval(e, names) for e in node.elts]
    if isinstance(node, ast.Set):
        return {_eval(e, names) for e in node.elts}
    if isinstance(node, ast.Dict):
        return {_eval(k, names) if k is not None else None: _eval(v, names) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.Subscript):
        container, key = _eval(node.value, names), _eval(node.slice, names)
        return container[key]
    if isinstance(node, ast.Slice):
        return slice(*(None if p is None else _eval(p, names) for p in (node.lower, node.upper, node.step)))
    if isinstance(node, ast.Name):
        if node.id in names:
            return names[node.id]
        if node.id in _MODULE_GLOBALS:
            return _Opaque()
        if node.id in _BUILTINS:
            return _BUILTINS[node.id]
        raise NameError(f"name {node.id!r} is not defined")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _BUILTINS:
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise Unsupported("star arguments")
        args = [_eval(a, names) for a in node.args]
        kwargs = {k.arg: _eval(k.value, names) for k in node.keywords}
        return _check_size(_BUILTINS[node.func.id](*args, **kwargs))
    raise Unsupported(type(node).__name__)


def evaluate(text: str, names: dict[str, Any] | None = None) -> Any:
    """The value of Python's ``eval(text)`` inside ``is_equal`` for the supported subset; ``names`` are the
    caller's local variables at that point (``eval`` sees them). Raises where ``eval`` would raise (or
    :class:`Unsupported`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # e.g. "invalid decimal literal" for "1e3x"
        tree = ast.parse(text.strip(" \t"), mode="eval")  # eval() ignores leading spaces and tabs
    return _eval(tree, names or {})


def _close(a: Any, b: Any) -> bool:
    return bool(abs(a - b) < TOLERANCE)


_latex_cache: dict[str, Any] = {}


def latex_to_sympy(text: str) -> Any:
    """``latex2sympy2_extended.latex2sympy(text)`` (cached; raises what it raises).

    Raises:
        InputError: ``latex2sympy2_extended`` is not installed (install the ``math`` extra).
    """
    if text in _latex_cache:
        cached = _latex_cache[text]
        if isinstance(cached, BaseException):
            raise cached
        return cached
    try:
        from latex2sympy2_extended import latex2sympy  # noqa: PLC0415 - heavy, optional
    except ImportError:
        raise InputError(
            "MathVision's answer comparison needs latex2sympy2_extended==1.11.0",
            hint="pip install 'latex2sympy2_extended==1.11.0' (trace-repro's 'math' extra)",
        ) from None
    try:
        value = latex2sympy(text)
    except Exception as exc:  # noqa: BLE001 - any parser failure means "not equal" upstream
        _latex_cache[text] = exc
        raise
    _latex_cache[text] = value
    return value


def _require_latex2sympy() -> None:
    """Fail here, in the caller's process, when the worker's ``latex2sympy2_extended`` import would fail."""
    name = "latex2sympy2_extended"
    if name in sys.modules and sys.modules[name] is not None:
        return
    if name in sys.modules or importlib.util.find_spec(name) is None:
        raise InputError(
            "MathVision's answer comparison needs latex2sympy2_extended==1.11.0",
            hint="pip install 'latex2sympy2_extended==1.11.0' (trace-repro's 'math' extra)",
        )


def is_equal(answer: Any, gold: Any) -> bool:
    """MathVision's ``is_equal(answer, gold)``: string, then ``eval``, then ``latex2sympy`` equality.

    Past :data:`TIME_LIMIT_S` the comparison is cut and counts as "not equal", as upstream's ``post_check``
    scores the ``TimeoutError`` of its ``timeout_decorator``. The comparison runs in :data:`_WORKER`'s child
    process, so the limit holds under pytest, in threads and in the CLI alike.

    Raises:
        InputError: ``latex2sympy2_extended`` is not installed.
        DeadlineWorkerError: the comparison process died (never scored silently).
    """
    asw = str(answer).lower().strip()
    gt = str(gold).lower().strip()
    if gt == asw:
        return True
    _require_latex2sympy()
    try:
        return bool(_WORKER.call(asw, gt))
    except TimeoutError:
        return False


def _is_equal_slow(asw: str, gt: str) -> bool:
    """The comparison after the string test (runs in the worker's child; only InputError escapes)."""
    # quirk: eval() runs with is_equal's locals, so the text "a" is the gold value just evaluated, "b" (in the
    # latex step) the parsed answer, and "asw"/"gt_asw" the two strings
    local: dict[str, Any] = {"asw": asw, "gt_asw": gt}
    try:
        local["a"] = evaluate(gt, local)
        if _close(local["a"], evaluate(asw, local)):
            return True
    except InputError:
        raise
    except Exception:  # noqa: BLE001
        pass
    try:
        a = local["a"] = latex_to_sympy(gt)
        b = local["b"] = latex_to_sympy(asw)
        # quirk: eval(str(sympy)) raises NameError for sqrt/pi/most symbols, which ends the try (the abs(a - b)
        # test below runs only when this comparison evaluates and fails)
        if _close(evaluate(str(a), local), evaluate(str(b), local)):
            return True
        if abs(a - b) < TOLERANCE:
            return True
    except InputError:
        raise
    except Exception:  # noqa: BLE001
        pass
    return False


#: The long-lived comparison process (started on the first comparison that is not a string match).
_WORKER = DeadlineWorker("trace_lib.benchmarks._math_equal:_is_equal_slow", TIME_LIMIT_S)
