"""The VM phase's ledger (tests/conftest.py): every test's outcome as it ends, so that a
phase stopped by a guest lockup runs again only what had not ended (run_tests.sh)."""
import os
import subprocess
import sys

from tests.conftest import LEDGER_ENV, ROOT

CASES = '''
import pytest

@pytest.fixture
def bad_teardown():
    yield
    raise RuntimeError("teardown fails")

def test_ok():
    pass

def test_fails():
    assert 1 == 2

def test_teardown_error(bad_teardown):
    pass

def test_skipped():
    pytest.skip("not here")
'''


def test_ledger_records_each_outcome_as_it_ends(tmp_path):
    (tmp_path / "test_cases.py").write_text(CASES)
    ledger = tmp_path / "ledger.txt"
    env = dict(os.environ, **{LEDGER_ENV: str(ledger)}, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           "-p", "tests.conftest", "--rootdir", str(tmp_path),
                           str(tmp_path / "test_cases.py")], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = dict(reversed(line.split(" ", 1)) for line in ledger.read_text().splitlines())
    assert lines == {"test_cases.py::test_ok": "passed",
                     "test_cases.py::test_fails": "failed",
                     "test_cases.py::test_teardown_error": "failed",
                     "test_cases.py::test_skipped": "passed"}

