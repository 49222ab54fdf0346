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


#: What the offline lane must never import (it runs where none of them is installed, and must stay fast).
HEAVY_MODULES = ("torch", "vllm", "ray", "transformers", "verl")
_LOADED_BEFORE = pytest.StashKey[frozenset]()


def _heavy_loaded() -> frozenset:
    import sys

    return frozenset(m for m in HEAVY_MODULES if m in sys.modules)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_LOADED_BEFORE] = _heavy_loaded()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """An offline test that imports a heavy framework fails, naming the module (checked around every test)."""
    if item.get_closest_marker("offline") is None or _LOADED_BEFORE not in item.stash:
        return
    new = sorted(_heavy_loaded() - item.stash[_LOADED_BEFORE])
    if new:
        pytest.fail(f"{item.nodeid}: offline test imported {', '.join(new)}", pytrace=False)
