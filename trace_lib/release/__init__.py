"""The TRACE release under test: where it is, what it must be, and strict readers for its files."""

from trace_lib.release.locate import ReleaseRoot, locate_release

__all__ = ["ReleaseRoot", "locate_release"]
