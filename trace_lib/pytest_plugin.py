"""The pytest plugin: shared options, the session's release, receipt properties on every test.

Options come from :mod:`trace_lib.options` (same spellings as the CLI). An ``OSError`` escaping the setup or call
of a lane test (one not marked ``offline``: disk full, an unwritable campaign root) fails it with the CLI's one
line, the path and the errno text (:func:`~trace_lib.errors.os_error_line`; ``TRACE_REPRO_DEBUG=1`` keeps the
traceback). Every test's JUnit entry carries the environment and release identity (properties are appended to
``item.user_properties`` directly, which JUnit writes under every ``junit_family``). Tests record their own facts
with the ``receipt`` fixture.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, NoReturn

import pytest

from trace_lib import options
from trace_lib.errors import TraceReproError, os_error_line
from trace_lib.exitcodes import ExitCode, exit_code_for
from trace_lib.receipts.junit import MARKERS_PROPERTY
from trace_lib.receipts.properties import environment_properties, release_properties
from trace_lib.release.locate import ReleaseRoot, locate_release

_RELEASE_KEY = pytest.StashKey["ReleaseRoot | TraceReproError"]()

# -- judge pool and phases (--judge-serve, --phase): their own plugin module ------------------------------------
pytest_plugins = ["trace_lib.pytest_judge"]


def pytest_addoption(parser: pytest.Parser) -> None:
    from trace_lib.campaign.plan import add_plan_options

    group = parser.getgroup("trace-repro")
    for opt in (*options.COMMON, *options.REPRODUCTION):
        options.add_option(group.addoption, opt)
    add_plan_options(group.addoption)  # --model, --model-id, --model-root, --seeds, --benchmark, --gpu-groups, ...


def pytest_configure(config: pytest.Config) -> None:
    """Check every trace-repro option once, before collection: a bad value (flag or environment) is one
    ``ERROR:`` line and exit 4, never a stack per test file nor a session that skips everything."""
    if getattr(config.option, "help", False) or getattr(config.option, "version", False):
        return
    check_options(config)


def check_options(config: pytest.Config) -> None:
    """:func:`trace_lib.options.validate`, then the plan the flags describe (``--gpu-groups``, ``--seeds``,
    ``--benchmark``, ``--model-id`` ...) built once against the release, when a release is given or found.

    Raises:
        pytest.UsageError: the first bad option, as one line.
    """
    from trace_lib.campaign.plan import plan_from_options

    try:
        given_root = options.resolve(config.option, options.TRACE_ROOT)
        from trace_lib.generation.backends.base import BACKENDS

        options.validate(config.option, backends=list(BACKENDS))
        located = _located(config)
        if isinstance(located, TraceReproError):
            if given_root:  # --trace-root/TRACE_ROOT names no release: nothing here can run
                raise located
            return
        plan_from_options(located, config.option, with_judge=False)
    except TraceReproError as exc:
        raise pytest.UsageError(exc.render()) from None
    except OSError as exc:  # a release file that cannot be read (a FIFO, no permission, an I/O error)
        raise pytest.UsageError(os_error_line(exc)) from None


def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """``--print-config``: print the resolved plan (as ``trace-repro plan`` does) and exit 0 before collection."""
    if not options.resolve(config.option, options.PRINT_CONFIG):
        return None
    from trace_lib.campaign.plan import plan_from_options

    try:
        release = locate_release(options.given(config.option, options.TRACE_ROOT))
        options.reject_tolerance_z(config.option)
        plan = plan_from_options(release, config.option)
        text = plan.render(plan.power(release))
    except TraceReproError as exc:
        print(f"ERROR: {exc.render()}")
        return int(pytest.ExitCode.USAGE_ERROR)
    except OSError as exc:
        print(f"ERROR: {os_error_line(exc)}")
        return int(pytest.ExitCode.USAGE_ERROR)
    print(text)
    return int(pytest.ExitCode.OK)


#: How ``--inconclusive`` reports an inconclusive verdict; "fail" (the default) keeps it from ever passing.
INCONCLUSIVE_MODES = ("fail", "skip", "xfail")


def inconclusive_mode(config: pytest.Config) -> str:
    """``--inconclusive`` (``$TRACE_INCONCLUSIVE``): fail, skip or xfail.

    Raises:
        pytest.UsageError: another value.
    """
    mode = options.resolve(config.option, options.INCONCLUSIVE)
    if mode not in INCONCLUSIVE_MODES:
        raise pytest.UsageError(f"--inconclusive: must be one of {', '.join(INCONCLUSIVE_MODES)} (found {mode!r})")
    return mode


def assert_verdict(verdict, mode: str) -> None:  # noqa: ANN001 - trace_lib.aggregation.verdict.Verdict
    """Report a verdict as the test's outcome: reproduced passes, differs fails, inconclusive follows ``mode``
    (fail, skip or xfail; its message always starts with ``INCONCLUSIVE``)."""
    if verdict.outcome == "reproduced":
        return
    if verdict.outcome == "differs":
        pytest.fail(f"DIFFERS {verdict.explain()}", pytrace=False)
    message = f"INCONCLUSIVE (the data cannot tell; not a pass) {verdict.explain()}"
    if mode == "skip":
        pytest.skip(message)
    if mode == "xfail":
        pytest.xfail(message)
    pytest.fail(message, pytrace=False)


def reproduction_time_limit(config: pytest.Config) -> float:
    """Seconds a ``reproduction`` item may run (``--slice-timeout`` / ``$TRACE_SLICE_TIMEOUT``; 0 = no limit)."""
    try:
        return float(options.resolve(config.option, options.SLICE_TIMEOUT))
    except TraceReproError as exc:
        raise pytest.UsageError(exc.render()) from None


#: pytest-timeout's registered names: its entry point's (autoloaded), its module's (``-p pytest_timeout``).
TIMEOUT_PLUGIN_NAMES = ("timeout", "pytest_timeout")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every ``reproduction`` item the slice time limit instead of pytest.ini's per-test ``timeout``.

    A ``timeout`` marker the test sets itself wins; other lanes keep the ini's limit.
    """
    if not any(config.pluginmanager.hasplugin(name) for name in TIMEOUT_PLUGIN_NAMES):
        return
    limit = None
    for item in items:
        if item.get_closest_marker("reproduction") is None or item.get_closest_marker("timeout") is not None:
            continue
        if limit is None:
            limit = reproduction_time_limit(config)
        item.add_marker(pytest.mark.timeout(limit))


def _located(config: pytest.Config) -> ReleaseRoot | TraceReproError:
    cached = config.stash.get(_RELEASE_KEY, None)
    if cached is None:
        try:  # the flag alone: the locator reads TRACE_ROOT itself, so the release's source is named right
            cached = locate_release(getattr(config.option, options.TRACE_ROOT.dest, None))
        except TraceReproError as exc:
            cached = exc
        config.stash[_RELEASE_KEY] = cached
    return cached


def pytest_report_header(config: pytest.Config) -> str:
    """Name the release under test in the session header (the bundled snapshot says so)."""
    located = _located(config)
    if isinstance(located, TraceReproError):
        return f"trace-repro release: none ({located.render()})"
    return f"trace-repro release: {located.label} [{located.source}]"


def _session_release(config: pytest.Config) -> ReleaseRoot:
    cached = _located(config)
    if isinstance(cached, TraceReproError):
        pytest.fail(cached.render(), pytrace=False)
    return cached


@pytest.fixture(scope="session")
def release(pytestconfig: pytest.Config) -> ReleaseRoot:
    """The TRACE release under test (``--trace-root`` / ``TRACE_ROOT`` / discovery); fails with how to point."""
    return _session_release(pytestconfig)


@pytest.fixture
def receipt(request: pytest.FixtureRequest) -> Callable[[str, object], None]:
    """Record one ``name=value`` property of this test into the JUnit receipt."""

    def record(name: str, value: object) -> None:
        request.node.user_properties.append((name, str(value)))

    return record


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """Record the test's lane markers (those declared in the ini) before setup, so skipped tests carry them too."""
    declared = {line.split(":", 1)[0].strip() for line in item.config.getini("markers")}
    names = sorted({m.name for m in item.iter_markers()} & declared)
    item.user_properties.append((MARKERS_PROPERTY, ",".join(names)))
    with _os_errors_in_one_line(item):
        return (yield)


def _one_line_os_errors(item: pytest.Item) -> bool:
    return item.get_closest_marker("offline") is None and not options.DEBUG_ENV.enabled()


@contextmanager
def _os_errors_in_one_line(item: pytest.Item) -> Iterator[None]:
    """An OSError of a lane test (not an offline unit test, not under TRACE_REPRO_DEBUG) fails it with one line."""
    try:
        yield
    except OSError as exc:
        if not _one_line_os_errors(item):
            raise
        try:
            fail_os_error(exc)
        except pytest.fail.Exception as failure:
            raise failure from None  # no "during handling" chain in the report


def fail_os_error(exc: OSError) -> NoReturn:
    """Fail the running test with the CLI's one line for ``exc`` (which exit class it is, the path, the errno)."""
    what = "" if exit_code_for(exc) == ExitCode.USAGE else "the machine failed: "
    pytest.fail(f"{what}{os_error_line(exc)}", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    try:
        with _os_errors_in_one_line(item):
            return (yield)
    finally:
        item.user_properties.extend(environment_properties())
        cached = item.config.stash.get(_RELEASE_KEY, None)
        if isinstance(cached, ReleaseRoot):
            item.user_properties.extend(release_properties(cached))
