"""Run pytest in a child interpreter the way the suite's own tests need it: with the plugins they name, no others.

pytest would otherwise load every installed entry-point plugin in each child (hypothesis, anyio, hydra's ...): about
2 s of imports per child on a 2-core CI machine, for plugins no child uses. A child gets ``pytest-timeout`` (the
repository's pytest.ini sets ``timeout`` under ``--strict-config``) and whatever ``-p`` its test adds.
"""

from __future__ import annotations

import sys
from typing import Mapping

#: The plugins every child loads (by module name).
CHILD_PLUGINS = ("pytest_timeout",)


def child_pytest_argv(*args: str) -> list[str]:
    """``python -m pytest -p PLUGIN ... ARGS`` for a child run with :func:`child_pytest_env`'s environment."""
    return [sys.executable, "-m", "pytest", *(x for plugin in CHILD_PLUGINS for x in ("-p", plugin)), *args]


def child_pytest_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with entry-point plugin autoloading off."""
    return {**env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
