"""The software environment: the paper's pinned engine (from the release's requirement files) and this one's."""
