"""vm/guest/sch_pi/install.sh (run by vm/provision.sh while the image is built) refuses
clearly, exit 3, when the module cannot be built for the image's kernel: no headers for
it (linux-image-amd64 and linux-headers-amd64 out of step), or a failing compile. The
successful build is exercised by every image build and checked in the VM
(tests/vm/test_pi_vm.py)."""
import os
import subprocess

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "vm", "guest", "sch_pi",
                      "install.sh")


def _run(root):
    return subprocess.run(["bash", SCRIPT], env={**os.environ, "BB_MODULES_ROOT": str(root)},
                          capture_output=True, text=True, timeout=60)


def test_a_kernel_without_headers_is_named(tmp_path):
    k = tmp_path / "lib" / "modules" / "6.1.0-99-amd64"
    k.mkdir(parents=True)
    (k / "modules.order").write_text("")
    res = _run(tmp_path / "lib" / "modules")
    assert res.returncode == 3
    assert "6.1.0-99-amd64 has no headers" in res.stderr
    assert "linux-headers-6.1.0-99-amd64" in res.stderr


def test_a_failing_compile_shows_the_compiler_and_stops(tmp_path):
    k = tmp_path / "lib" / "modules" / "6.1.0-99-amd64"
    (k / "build").mkdir(parents=True)
    (k / "modules.order").write_text("")
    (k / "build" / "Makefile").write_text("modules:\n\t@echo 'sch_pi.c:1: error: boom' >&2; "
                                          "exit 1\n")
    res = _run(tmp_path / "lib" / "modules")
    assert res.returncode == 3
    assert "error: boom" in res.stderr and "does not build" in res.stderr


def test_no_kernel_at_all(tmp_path):
    (tmp_path / "m").mkdir()
    res = _run(tmp_path / "m")
    assert res.returncode == 3 and "no kernel" in res.stderr
