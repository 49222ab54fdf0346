"""Receipts: what every test records into the JUnit XML, and the ``trace-repro receipt`` summary."""
