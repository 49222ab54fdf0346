"""MME-Reasoning's official deterministic answer checkers, reimplemented with the pinned semantics.

Mirrors ``VLMEvalKit@a8b12bf1:vlmeval/dataset/utils/mme_reasoning.py`` (``mme_reasoning_eval_functions``). Each
checker keeps upstream's outcome for every input: ``True``/``False`` where upstream returns them, and an exception
where upstream raises (the caller turns that into a failed slice, as TRACE does). Check order is preserved wherever
it decides between returning ``False`` and raising.

Deliberate deviations (also in ``deviations.py``): answers that only Python ``eval`` can read (not literals) and
24-point formulas using anything beyond numbers, arithmetic/bitwise operators, lists and the numeric builtins
abs/round/min/max/pow/int/float/sum are treated as unreadable (``choice_function`` keeps the text;
``judge_24points_function`` returns False, as it does for any error); a 24-point power with an exponent above
1,000 is refused instead of being computed (upstream's ``eval`` could run for hours).
"""

from __future__ import annotations

import ast
import operator
import re
from collections import defaultdict
from typing import Any, Callable, Iterable, Sequence

from trace_lib.benchmarks._mme_extraction import literal_eval_quietly


def _require_keys(response: Any, keys: Iterable[str]) -> bool:
    present = response.keys()  # a non-mapping response raises, as upstream's `response_dict.keys()` does
    return all(key in present for key in keys)


def _lines_sum_to(response: Any, lines: Sequence[Sequence[str]], target: Any) -> bool:
    for line in lines:
        total = 0
        for key in line:
            total += response[key]
        if total != target:
            return False
    return True


def _letters(last: str) -> list[str]:
    return [chr(c) for c in range(ord("A"), ord(last) + 1)]


def calculate_answer_function_1(response: Any, answer: Any = None) -> bool:
    try:
        if not _require_keys(response, "ABC"):
            return False
        return bool(response["A"] / response["B"] == 3 and response["C"] / response["B"] == 2)
    except Exception:  # noqa: BLE001 - upstream's bare except
        return False


def calculate_answer_function_2(response: Any, answer: Any = None) -> bool:
    try:
        if not _require_keys(response, "ABCDEF"):
            return False
        if response["A"] + response["B"] + response["C"] != 25:
            return False
        if response["C"] + response["E"] + response["F"] != 25:
            return False
        return not response["A"] + response["D"] + response["F"] != 25
    except Exception:  # noqa: BLE001 - upstream's bare except
        return False


def _distinct_grid(response: Any, last_key: str, values: set[int], lines: Sequence[str], target: int) -> bool:
    if not _require_keys(response, _letters(last_key)):
        return False
    if set(response.values()) != values:
        return False
    return _lines_sum_to(response, [list(line) for line in lines], target)


def calculate_answer_function_3(response: Any, answer: Any = None) -> bool:
    return _distinct_grid(response, "O", set(range(1, 16)),
                          ("ADEH", "CEGH", "IGJH", "NMJH", "OMHL", "KLHF", "BFHD"), 30)


def calculate_answer_function_4(response: Any, answer: Any = None) -> bool:
    return _distinct_grid(response, "I", set(range(1, 10)), ("ABED", "BCEF", "DEGH", "EFHI", "BDHF", "ACIG"), 20)


def calculate_answer_function_5(response: Any, answer: Any = None) -> bool:
    if not _require_keys(response, _letters("Q")):
        return False
    values = list(response.values())
    if any(v not in [20, 15, 10, 5] for v in values):
        return False
    counts: dict[Any, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    if counts.get(20, 0) > 5 or counts.get(15, 0) > 3 or counts.get(10, 0) > 3 or counts.get(5, 0) > 6:
        return False
    return _lines_sum_to(response, ["ABC", "AGO", "OPQ", "CKQ", "ADINQ", "CFILO", "BEIMP", "GHIJK"], 55)


def calculate_answer_function_6(response: Any, answer: Any = None) -> bool:
    return _distinct_grid(response, "S", set(range(1, 20)),
                          ("AJS", "CJQ", "EJO", "GJM", "IJK", "LJH", "NJF", "PJD", "RJB"), 30)


def calculate_answer_function_7(response: Any, answer: Any = None) -> bool:
    return _distinct_grid(response, "L", set(range(1, 13)), ("ACFH", "ADGK", "BCDE", "HIJK", "BFIL", "EGJL"), 26)


def calculate_answer_function_8(response: Any, answer: Any = None) -> bool:
    if not _require_keys(response, _letters("M")):
        return False
    values = list(response.values())
    if any(v < 1 or v > 15 for v in values):
        return False
    if len(values) != len(set(values)):
        return False
    return _lines_sum_to(response, ["ABC", "AFK", "BDE", "BEH", "CHM", "DGJ", "EGI", "FIL", "HJI", "KLM"], 20)


def calculate_answer_function_9(response: Any, answer: Any = None) -> bool:
    return _distinct_grid(response, "S", set(range(1, 20)),
                          ("ABC", "ADH", "AEJ", "CFJ", "CGL", "HIJ", "HMQ", "JKL", "JNQ", "JOS", "LPS", "QRS"), 22)


def calculate_answer_function_10(response: Any, answer: Any = None) -> bool:
    if not _require_keys(response, "ABCDEF"):
        return False
    if set(response.values()) != set(range(1, 7)):
        return False
    first = response["A"] + response["B"] + response["D"]
    second = response["D"] + response["E"] + response["F"]
    third = response["A"] + response["C"] + response["F"]
    return first == second == third


def calculate_answer_function_11(response: Any, answer: Any = None) -> bool:
    if not _require_keys(response, "ABCDEFG"):
        return False
    if set(response.values()) != {1, 2, 3, 5, 7, 8}:
        return False
    if response["A"] + response["C"] + 9 != 19:
        return False
    if response["B"] + response["C"] + response["D"] != 19:
        return False
    if response["F"] + response["E"] + response["D"] != 19:
        return False
    return not response["E"] + response["G"] + 6 != 19


def calculate_answer_function_12(response: Any, answer: Any = None) -> bool:
    if not _require_keys(response, ["A", "C", "T", "D", "O", "G", "P", "E", "T", "S"]):
        return False
    cat = response["C"] * 100 + response["A"] * 10 + response["T"]
    dog = response["D"] * 100 + response["O"] * 10 + response["G"]
    pets = response["P"] * 1000 + response["E"] * 100 + response["T"] * 10 + response["S"]
    return cat + dog == pets


def match_answer_function(response: Any, answer: Any) -> bool:
    for key, value in answer.items():
        got = response.get(key, None)
        if isinstance(got, list):
            got = set(got)
        if isinstance(value, list):
            value = set(value)
        if got != value:
            return False
    return True


def match_coordinate_function(response: Any, answer: Any) -> bool:
    got = [str(cell["row"]) + str(cell["column"]) for cell in response]
    if isinstance(answer, dict):
        answer = [answer]
    return got == [str(cell["row"]) + str(cell["column"]) for cell in answer]


def multiple_match_function(response: Any, answer: Any) -> bool:
    if len(response) != 1:
        raise AssertionError("multiple_match_function expects one key")  # upstream `assert`
    value = list(response.values())[0]
    if isinstance(value, list):
        return set(value) in [set(item) for item in answer]
    return value in answer


def compare_expression_function(response: Any, answers: Any) -> bool:
    import sympy  # noqa: PLC0415 - only MME's formula rows need sympy

    extracted = sympy.parse_expr(response["equation"].split("=")[0], evaluate=False)
    same = False
    for equation in answers:
        if same is True:
            return True
        expected = sympy.parse_expr(equation.split("=")[0], evaluate=False)
        if extracted.func != expected.func:
            continue
        if extracted.func in (sympy.Add, sympy.Mul):
            if len(extracted.args) != len(expected.args):
                continue
            current = {str(a) for a in extracted.args} == {str(a) for a in expected.args}
        else:
            current = extracted == expected
        same = current
    return same


def read_choice_answer(answer: Any) -> Any:
    """``eval(answer)`` as ``choice_function`` uses it: a literal is read, anything else is kept as is."""
    if not isinstance(answer, str):
        return answer  # upstream: eval(non-str) raises TypeError, caught, answer kept
    try:
        return literal_eval_quietly(answer)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return answer


def choice_function(response: str, answer: Any) -> bool:
    answer = read_choice_answer(answer)
    answer = ",".join(answer) if isinstance(answer, list) else str(answer)
    return {item.strip() for item in response.split(",")} == {item.strip() for item in answer.split(",")}


def _coordinate(cord: Any) -> tuple[int, int]:
    return ord(cord[0]) - ord("a"), int(cord[1:])


def calculate_answer_function_hashi(response: Any, answer: Any = None, special_info: Any = None) -> bool:
    if response is None or special_info is None or len(response) == 0:
        return False
    islands = special_info["init_islands"]
    for bridge in response:
        if bridge["start"] == bridge["end"]:
            return False
    requirements = {island["cord"]: island["requirement"] for island in islands}
    existing = set(requirements)
    degree: defaultdict[Any, Any] = defaultdict(int)
    pair_count: defaultdict[Any, Any] = defaultdict(int)
    for bridge in response:
        start, end, number = bridge["start"], bridge["end"], bridge["number"]
        if start not in existing or end not in existing:
            return False
        start_x, start_y = _coordinate(start)
        end_x, end_y = _coordinate(end)
        if start_x != end_x and start_y != end_y:
            return False
        pair = tuple(sorted([start, end]))
        pair_count[pair] += number
        if pair_count[pair] > 2:
            return False
        degree[start] += number
        degree[end] += number
    for island, requirement in requirements.items():
        if degree[island] != requirement:
            return False
    occupied: set[tuple[int, int]] = set()
    for bridge in response:
        start_x, start_y = _coordinate(bridge["start"])
        end_x, end_y = _coordinate(bridge["end"])
        if start_x == end_x:
            low, high = sorted([start_y, end_y])
            cells = [(start_x, y) for y in range(low + 1, high)]
        elif start_y == end_y:
            low, high = sorted([start_x, end_x])
            cells = [(x, start_y) for x in range(low + 1, high)]
        else:
            cells = []
        for cell in cells:
            if cell in occupied:
                return False
            occupied.add(cell)
    return True


def _visible_count_is(line: Sequence[Any], target: Any) -> bool:
    count, tallest = 1, line[0]
    for height in line[1:]:
        if height > tallest:
            count += 1
            tallest = height
    return count == target


def _keeps_givens_latin(grid: Any, base: Any, size: int) -> bool:
    """Whether ``grid`` keeps every given (non-None) cell of ``base`` and repeats no value in a row or column."""
    for i in range(size):
        for j in range(size):
            if base[i][j] is not None and base[i][j] != grid[i][j]:
                return False
    for i in range(size):
        if len(set(grid[i])) != size or len({row[i] for row in grid}) != size:
            return False
    return True


def calculate_answer_function_skyscraper(response: Any, answer: Any = None, special_info: Any = None) -> bool:
    if response is None or special_info is None or len(response) == 0:
        return False
    grid = response
    visible = special_info["visible_skyscrapers"]
    base = special_info["base_matrix"]
    size = len(base)
    if not _keeps_givens_latin(grid, base, size):
        return False
    rows = grid
    columns = [[grid[j][i] for j in range(len(grid))] for i in range(len(grid[0]))]
    for lines, hints, reverse in ((columns, visible[0], False), (rows, visible[1], False),
                                  (rows, visible[2], True), (columns, visible[3], True)):
        for index, hint in enumerate(hints):
            if hint is None:
                continue
            line = lines[index][::-1] if reverse else lines[index]
            if not _visible_count_is(line, hint):
                return False
    return True


def _sudoku(response: Any, special_info: Any, size: int, box_rows: int, box_cols: int) -> bool:
    if response is None or special_info is None or len(response) == 0:
        return False
    try:
        grid = response
        if not isinstance(grid, list) or len(grid) != size or not all(len(row) == size for row in grid):
            return False
        base = special_info["base_matrix"]
        if not _keeps_givens_latin(grid, base, size):
            return False
        for top in range(0, size, box_rows):
            for left in range(0, size, box_cols):
                box = [grid[r][c] for r in range(top, top + box_rows) for c in range(left, left + box_cols)]
                if len(set(box)) != size:
                    return False
        return True
    except (ValueError, SyntaxError):  # upstream catches only these two
        return False


def calculate_answer_function_sudoku_4(response: Any, answer: Any = None, special_info: Any = None) -> bool:
    return _sudoku(response, special_info, 4, 2, 2)


def calculate_answer_function_sudoku_6(response: Any, answer: Any = None, special_info: Any = None) -> bool:
    return _sudoku(response, special_info, 6, 2, 3)


def _connected(matrix: Any, value: Any) -> bool:
    rows, cols = len(matrix), len(matrix[0])
    seen = [[False] * cols for _ in range(rows)]
    start = next(((r, c) for r in range(rows) for c in range(cols) if matrix[r][c] == value), None)
    stack = [start] if start is not None else []
    while stack:
        r, c = stack.pop()
        if r < 0 or r >= rows or c < 0 or c >= cols or seen[r][c] or matrix[r][c] != value:
            continue
        seen[r][c] = True
        stack.extend([(r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)])
    return not any(matrix[r][c] == value and not seen[r][c] for r in range(rows) for c in range(cols))


def _has_square(matrix: Any, value: Any) -> bool:
    rows, cols = len(matrix), len(matrix[0])
    return any(
        matrix[r][c] == value and matrix[r][c + 1] == value and matrix[r + 1][c] == value
        and matrix[r + 1][c + 1] == value
        for r in range(rows - 1)
        for c in range(cols - 1)
    )


def calculate_answer_function_yinyang(response: Any, answer: Any = None, special_info: Any = None) -> bool:
    if response is None or special_info is None or len(response) == 0:
        return False
    if not isinstance(response, list) or len(response) != 6 or any(len(row) != 6 for row in response):
        return False
    base = special_info["base_matrix"]
    for i in range(6):
        for j in range(6):
            if base[i][j] is not None and base[i][j] != response[i][j]:
                return False
    if not _connected(response, 0) or not _connected(response, 1):
        return False
    return not (_has_square(response, 0) or _has_square(response, 1))


_BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.BitXor: operator.xor,
    ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg, ast.Invert: operator.invert}
#: Numeric builtins a formula may call (upstream's ``eval`` sees every builtin; these are the arithmetic ones).
_BUILTINS: dict[str, Callable[..., Any]] = {
    "abs": abs, "round": round, "min": min, "max": max, "int": int, "float": float, "sum": sum,
    "pow": lambda base, exp, *mod: _bounded_pow(base, exp, *mod),
}
MAX_EXPONENT = 1000


def _bounded_pow(base: Any, exp: Any, *mod: Any) -> Any:
    if isinstance(exp, (int, float)) and abs(exp) > MAX_EXPONENT:
        raise ValueError("exponent too large")
    return pow(base, exp, *mod)


def _arithmetic(node: ast.AST) -> Any:
    if isinstance(node, ast.Expression):
        return _arithmetic(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, complex)):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_arithmetic(node.operand))
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_arithmetic(item) for item in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _BUILTINS
            and not node.keywords):
        return _BUILTINS[node.func.id](*(_arithmetic(arg) for arg in node.args))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _arithmetic(node.left), _arithmetic(node.right)
        if isinstance(node.op, (ast.Pow, ast.LShift)) and isinstance(right, (int, float)) and abs(right) > MAX_EXPONENT:
            raise ValueError("exponent too large")
        return _BINARY[type(node.op)](left, right)
    raise ValueError(f"not arithmetic: {type(node).__name__}")


def judge_24points_function(response: str, answer: Any = None, special_info: Any = None) -> bool:
    left = response.replace(" ", "").split("=")[0]
    try:
        if _arithmetic(ast.parse(left, mode="eval")) != 24:
            return False
        numbers = sorted(int(n) for n in re.findall(r"\d+", left))
        cards = special_info["init_cards"]
        cards.sort()
        return numbers == cards
    except Exception:  # noqa: BLE001 - upstream's bare except around eval
        return False


#: ``mme_reasoning_eval_functions`` by ``function_id``.
FUNCTIONS: dict[str, Callable[..., Any]] = {
    **{f"calculate_answer_function_{i}": globals()[f"calculate_answer_function_{i}"] for i in range(1, 13)},
    "match_answer_function": match_answer_function,
    "multiple_match_function": multiple_match_function,
    "compare_expression_function": compare_expression_function,
    "match_coordinate_function": match_coordinate_function,
    "choice_function": choice_function,
    "calculate_answer_function_hashi": calculate_answer_function_hashi,
    "calculate_answer_function_skyscraper": calculate_answer_function_skyscraper,
    "calculate_answer_function_sudoku_4": calculate_answer_function_sudoku_4,
    "calculate_answer_function_sudoku_6": calculate_answer_function_sudoku_6,
    "calculate_answer_function_yinyang": calculate_answer_function_yinyang,
    "judge_24points_function": judge_24points_function,
}
#: Checkers that also receive the row's literal-evaluated ``special_info``.
NEEDS_SPECIAL_INFO = frozenset({
    "calculate_answer_function_hashi", "calculate_answer_function_skyscraper", "calculate_answer_function_sudoku_4",
    "calculate_answer_function_sudoku_6", "calculate_answer_function_yinyang", "judge_24points_function",
})
