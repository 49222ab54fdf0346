"""Benchmark data: pinned downloads (``prepare``), the content-bound manifest (``manifest``), row and media
identity hashes (``rowhash``) and model snapshots (``model_dirs``)."""
