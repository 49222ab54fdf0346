import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests_offline/ is in the offline lane unless it says otherwise."""
    for item in items:
        if not any(item.iter_markers(name) for name in ("cpu_model", "gpu", "slow")):
            item.add_marker(pytest.mark.offline)
