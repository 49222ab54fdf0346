"""The wake for a vLLM engine core that died without a word: vLLM's client parts (its dead flag, its output
queue) modelled on plain objects; once the flag is set, one error is queued behind the outputs already queued,
and nothing is queued once the block has left or for a client without those parts."""

from __future__ import annotations

import queue
import time
import types

from trace_lib.generation.backends.vllm_liveness import waking_a_dead_engine


def _engine() -> types.SimpleNamespace:
    client = types.SimpleNamespace(resources=types.SimpleNamespace(engine_dead=False), outputs_queue=queue.Queue())
    return types.SimpleNamespace(engine_core=client)


def test_a_dead_flag_queues_one_error_behind_the_outputs_already_queued():
    engine = _engine()
    client = engine.engine_core
    client.outputs_queue.put("outputs of the last step")
    with waking_a_dead_engine(engine, poll_s=0.01):
        client.resources.engine_dead = True
        assert client.outputs_queue.get(timeout=5) == "outputs of the last step"
        error = client.outputs_queue.get(timeout=5)
        time.sleep(0.05)
    assert isinstance(error, Exception) and "engine core" in str(error)
    assert client.outputs_queue.empty()  # once at most


def test_a_live_engine_gets_nothing_and_nothing_comes_after_the_block():
    engine = _engine()
    with waking_a_dead_engine(engine, poll_s=0.01):
        time.sleep(0.05)
    engine.engine_core.resources.engine_dead = True  # a normal shutdown sets the flag too
    time.sleep(0.05)
    assert engine.engine_core.outputs_queue.empty()


def test_a_client_without_those_parts_is_left_alone():
    for engine in (types.SimpleNamespace(), types.SimpleNamespace(engine_core=types.SimpleNamespace(resources=None))):
        with waking_a_dead_engine(engine, poll_s=0.01):
            time.sleep(0.02)
