"""Benchmark data: pinned downloads (``prepare``), the content-bound manifest (``manifest``), row and media
identity hashes (``rowhash``), a row's prompt with a bad cell named by its data file (``prompts``) and model
snapshots (``model_dirs``)."""
