"""The VM phase: the degraded ledger and the test record are the session's, reported by
tests/conftest.py for every phase (tests/retries.py, tests/record.py)."""
