"""The offline lane's own guarantees (tests_offline/conftest.py): loopback-only network, checked on every test."""

from __future__ import annotations

import json
import socket
import urllib.request

import pytest

from trace_lib.testing.openai_server import OpenAIStubServer


def test_a_connection_off_this_machine_is_refused():
    with pytest.raises(ConnectionRefusedError, match="offline test tried to reach"):
        socket.create_connection(("192.0.2.1", 80), timeout=1)  # TEST-NET-1: never routed


def test_servers_the_test_starts_on_loopback_are_reachable():
    with OpenAIStubServer(lambda route, body: "ok") as server:
        with urllib.request.urlopen(f"{server.url}/models", timeout=5) as response:
            assert json.loads(response.read())["data"][0]["id"] == "stub"
