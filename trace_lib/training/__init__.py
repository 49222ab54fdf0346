"""TRACE RLVR training on verl 0.9.1: profiles, verl mapping, data conversion, reward, launch, merge (docs/training.md).

Importing this package (or any module here except where a function needs it) imports no torch, ray, vllm,
transformers or verl.
"""
