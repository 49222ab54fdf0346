"""Generation backends: ``vllm`` (offline ``vllm.LLM``), ``openai`` (any OpenAI-compatible endpoint), ``hf``
(transformers, the CPU reference). Use :func:`trace_lib.generation.backends.base.create_backend`."""
