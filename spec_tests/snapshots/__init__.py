"""Snapshot data for ``spec_tests/test_snapshots.py``; regenerate with
``python -m spec_tests.snapshots.regenerate`` (see that module)."""
