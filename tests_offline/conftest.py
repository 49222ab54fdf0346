from pathlib import Path

import pytest

#: Test modules that import verl, which monkeypatches transformers' Qwen2.5-VL classes process-wide when imported;
#: they run last so the patch cannot leak into the other tiny-model tests of the same session.
_PATCHES_TRANSFORMERS = ("test_training_verl_config_cpu.py",)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests_offline/ is in the offline lane unless it says otherwise (runs before -m selects)."""
    for item in items:
        if "tests_offline" in item.nodeid.split("/")[0] and not any(
            item.get_closest_marker(name) for name in ("cpu_model", "gpu", "slow", "ray_cluster")
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


@pytest.hookimpl(trylast=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """A test that leaves a release directly in its ``tmp_path`` fails: release discovery looks beside the working
    directory, so an in-process or child run of another test in a sibling directory would take it."""
    from trace_lib.release import identity

    tmp_path = getattr(item, "funcargs", {}).get("tmp_path")
    if isinstance(tmp_path, Path) and (tmp_path / identity.SUITE).is_file():
        pytest.fail(f"{item.nodeid}: left a release directly in tmp_path ({identity.SUITE}); put it in a "
                    "subdirectory, where no other test's release discovery reaches", pytrace=False)


def _is_loopback(address: object) -> bool:
    import ipaddress

    if not isinstance(address, tuple) or not address:
        return True  # AF_UNIX paths and the like never leave the machine
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False  # a host name: resolving and reaching it is network use


@pytest.fixture(autouse=True)
def _loopback_only(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline tests may talk to servers they start on loopback, and to nothing else (checked on every connect)."""
    if request.node.get_closest_marker("offline") is None:
        return
    import socket

    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def guard(address: object) -> None:
        if not _is_loopback(address):
            raise ConnectionRefusedError(f"{request.node.nodeid}: offline test tried to reach {address!r}")

    def connect(self: socket.socket, address: object) -> None:
        guard(address)
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: object) -> int:
        guard(address)
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)


@pytest.fixture
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """huggingface_hub's default cache (``HF_HUB_CACHE``, read at each call) moved under tmp_path, for code that
    downloads without a ``cache_dir``; yields the directory."""
    from huggingface_hub import constants

    cache = tmp_path / "hf-cache"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache
