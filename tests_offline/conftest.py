import pytest

#: Test modules that import verl, which monkeypatches transformers' Qwen2.5-VL classes process-wide when imported;
#: they run last so the patch cannot leak into the other tiny-model tests of the same session.
_PATCHES_TRANSFORMERS = ("test_train_verl_cpu.py",)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests_offline/ is in the offline lane unless it says otherwise (runs before -m selects)."""
    for item in items:
        if "tests_offline" in item.nodeid.split("/")[0] and not any(
            item.get_closest_marker(name) for name in ("cpu_model", "gpu", "slow")
        ):
            item.add_marker(pytest.mark.offline)
    items.sort(key=lambda item: item.nodeid.split("::")[0].endswith(_PATCHES_TRANSFORMERS))
