"""The release preflight as tests: one test per check group (ids = group names), so a JUnit report shows which
part of the release holds. Each failure message is the group's own finding lines."""

from __future__ import annotations

import pytest
from preflight_support import copy_data_files

from trace_lib import options
from trace_lib.preflight import registry
from trace_lib.preflight.context import CheckContext, Status
from trace_lib.preflight.report import check_release
from trace_lib.release.locate import ReleaseRoot

GROUPS = registry.groups()


@pytest.mark.parametrize("group", GROUPS, ids=[g.name for g in GROUPS])
def test_group_holds_on_the_release(release, group, pytestconfig, receipt):
    pinned = not options.resolve(pytestconfig.option, options.UNPINNED)
    outcome = registry.run_group(group, CheckContext(release, pinned=pinned))
    for name, value in outcome.counts.items():
        receipt(f"{group.name}.{name}", value)
    assert outcome.status is not Status.FAILED, "\n".join(f.line() for f in outcome.failures)


def test_registry_names_are_unique_and_documented():
    names = [g.name for g in GROUPS]
    assert len(names) == len(set(names))
    assert all(g.summary for g in GROUPS)


def test_unknown_group_is_a_usage_error_listing_the_groups(release):
    with pytest.raises(Exception, match="unknown check group 'nope'.*choose one of: suite, provenance") as refused:
        check_release(release, only=["nope"])
    assert str(refused.value).startswith("--group: unknown check group")


def test_data_only_copy_passes_pinned_with_source_checks_not_checked(reference_copy):
    report = check_release(reference_copy, pinned=True)
    assert report.ok, "\n".join(f.line() for f in report.failures)
    assert not report.source_present
    assert report.unchecked and all("not checked: source files absent" in f.line() for f in report.unchecked)


def test_require_source_fails_a_data_only_copy(reference_copy):
    report = check_release(reference_copy, require_source=True)
    assert not report.ok
    assert all("source files absent (data-only copy)" in f.line() for f in report.failures)


def test_unpinned_skips_only_the_identity_group(reference_copy):
    report = check_release(reference_copy, pinned=False)
    assert report.ok
    assert report.outcome("identity").status is Status.NOT_CHECKED
    assert report.outcome("recompute").counts["values_recomputed"] > 0


@pytest.fixture
def reference_copy(release, tmp_path):
    """A data-only copy of the release under test (its canonical data files only)."""
    return ReleaseRoot(copy_data_files(release, tmp_path / "release"))
