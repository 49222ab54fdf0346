"""Test files are named after what they test: ``test_<package>_<module>[_<aspect>].py`` for a trace_lib module.

A newcomer looking for the tests of ``trace_lib/campaign/estimate.py`` opens ``test_campaign_estimate.py``. The few
files that test something other than one trace_lib module start with a prefix of ``OTHER_SUBJECTS``.
"""

from __future__ import annotations

from pathlib import Path

import trace_lib

ROOT = Path(trace_lib.__file__).resolve().parent
TESTS = Path(__file__).resolve().parent

#: Prefix -> what such a file tests instead of one trace_lib module.
OTHER_SUBJECTS = {
    "import_graph": "the package import graph of trace_lib",
    "layout_names": "this naming rule",
    "offline_guards": "the offline lane's own conftest guarantees",
    "packaging": "what the wheel ships",
    "reproduction": "tests_reproduction as a user runs it",
    "script": "a script under benchmarks/ (test_script_<script>.py)",
    "support": "the offline tests' own support modules",
}


def module_names(root: Path) -> set[str]:
    """Every trace_lib module and package as ``a_b_c`` (``trace_lib/a/b/c.py`` gives ``a``, ``a_b`` and ``a_b_c``)."""
    names = set()
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[0] == "testing" or parts[-1].startswith("__") and len(parts) == 1:
            continue
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        names.update("_".join(parts[: i + 1]) for i in range(len(parts)))
    return names


def subject_of(stem: str, modules: set[str]) -> str | None:
    """The longest trace_lib module name (or ``OTHER_SUBJECTS`` prefix) that ``test_<stem>`` starts with."""
    candidates = [m for m in modules | set(OTHER_SUBJECTS) if stem == m or stem.startswith(m + "_")]
    return max(candidates, key=len, default=None)


def test_every_test_file_names_its_subject():
    modules = module_names(ROOT)
    stray = [p.name for p in sorted(TESTS.glob("test_*.py")) if subject_of(p.stem[len("test_"):], modules) is None]
    assert stray == [], f"name these after the module they test (test_<package>_<module>.py): {stray}"


def test_a_package_alone_is_not_a_subject_where_it_has_modules():
    """``test_campaign.py`` would say nothing: a package name counts only together with one of its modules."""
    modules = module_names(ROOT)
    vague = []
    for p in sorted(TESTS.glob("test_*.py")):
        subject = subject_of(p.stem[len("test_"):], modules)
        if subject in modules and (ROOT / subject.replace("_", "/")).is_dir():
            vague.append(p.name)
    assert vague == [], f"name the module, not only its package: {vague}"


def test_the_rule_rejects_a_name_that_tests_nothing():
    modules = module_names(ROOT)
    assert subject_of("campaign_estimate", modules) == "campaign_estimate"
    assert subject_of("engine_plan", modules) is None
    assert subject_of("bench_blink", modules) is None
