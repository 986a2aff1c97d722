"""run_tests.sh's VM phase after a guest lockup (vm/run exit 6): only the tests that had
not ended run again, and one that had failed keeps the phase failed. Run against a fake
vm/run (no VM): the first call writes two outcomes to the ledger it is given and exits
6; the second prints its arguments and exits with FAKE_RC. Needs root (run_tests.sh)."""
import os
import shutil
import subprocess

import pytest

from tests.conftest import ROOT

FAKE_VM_RUN = r"""#!/bin/bash
ledger=${2#BUFFERBLOAT_TEST_LEDGER=/bb/}
if [ ! -e .second ]; then
  touch .second
  printf '%s\n' "$FAKE_LEDGER_1" "$FAKE_LEDGER_2" > "$ledger"
  exit 6
fi
printf 'ARG<%s>\n' "$@"
exit ${FAKE_RC:-0}
"""


def _tree(tmp_path):
    shutil.copy(os.path.join(ROOT, "run_tests.sh"), tmp_path / "run_tests.sh")
    for d in ("scripts", "vm"):
        (tmp_path / d).mkdir()
    for stub in ("scripts/install-deps.sh", "scripts/build-csampler.sh", "vm/build"):
        (tmp_path / stub).write_text("#!/bin/bash\nexit 0\n")
    (tmp_path / "vm" / "run").write_text(FAKE_VM_RUN)
    for f in ("run_tests.sh", "scripts/install-deps.sh", "scripts/build-csampler.sh",
              "vm/run", "vm/build"):
        os.chmod(tmp_path / f, 0o755)


@pytest.mark.parametrize("second, rc_second, want", [
    ("passed", 0, 0),       # the rest pass: the phase passes
    ("passed", 5, 0),       # every test had ended: pytest's "no tests ran" is a pass
    ("passed", 1, 1),       # one of the rest fails
    ("failed", 0, 1),       # one had failed before the lockup: it stays failed
])
def test_after_a_lockup_only_the_tests_not_ended_run_again(tmp_path, second, rc_second,
                                                           want):
    assert os.geteuid() == 0, "run_tests.sh needs root: run through ./run_tests.sh"
    _tree(tmp_path)
    env = dict(os.environ, FAKE_RC=str(rc_second),
               FAKE_LEDGER_1="passed tests/vm/test_a.py::test_one",
               FAKE_LEDGER_2=f"{second} tests/vm/test_a.py::test_two[x y]")
    proc = subprocess.run(["./run_tests.sh", "--vm"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == want, proc.stdout + proc.stderr
    assert "locked up (exit 6): 2 tests had ended" in proc.stdout
    assert "vm image: ready in" in proc.stdout        # the image, its own step, first
    args = [line[4:-1] for line in proc.stdout.splitlines() if line.startswith("ARG<")]
    assert args[args.index("tests/vm") + 1:] == [
        "--deselect", "tests/vm/test_a.py::test_one",
        "--deselect", "tests/vm/test_a.py::test_two[x y]"]
