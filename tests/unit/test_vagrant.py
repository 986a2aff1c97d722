"""The top-level Vagrantfile parses and is valid, with either box (`vagrant validate`,
about 2 s each): the course VM a student starts with `vagrant up` (docs/guide/vm.md).
The boot itself is the acceptance tier's (tests/host/test_vagrant_box.py)."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VAGRANT = shutil.which("vagrant")

pytestmark = pytest.mark.skipif(
    VAGRANT is None, reason="vagrant is not installed (Debian package vagrant: "
                            "scripts/install-deps.sh installs it from scripts/host-packages.txt)")


@pytest.mark.parametrize("box", ["", "bufferbloat/vm", "/nonexistent/bufferbloat-vm-0123-b1.box"])
def test_the_vagrantfile_validates(box, tmp_path):
    """Default box (debian/bookworm64), a box added by name, a box file (vm/box's)."""
    env = dict(os.environ, BUFFERBLOAT_BOX=box, VAGRANT_CWD=ROOT,
               VAGRANT_DOTFILE_PATH=str(tmp_path / "dot"),
               VAGRANT_HOME=str(tmp_path / "home"), VAGRANT_CHECKPOINT_DISABLE="1")
    proc = subprocess.run([VAGRANT, "validate"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "validated successfully" in proc.stdout
