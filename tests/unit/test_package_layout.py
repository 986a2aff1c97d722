"""The two layouts of the code (bufferbloat/core/paths.py): a checkout and an installed
package; what the project VM shares for each (bufferbloat/run/where.py); what a broken
install says (bufferbloat/commands/errors.py). The wheel itself: tests/host/test_package.py."""
import os
from pathlib import Path

import pytest

from bufferbloat.cli import main
from bufferbloat.commands.errors import missing_module_text
from bufferbloat.core import paths
from bufferbloat.run import where

ROOT = Path(__file__).resolve().parents[2]


def test_this_is_a_checkout_and_an_installed_tree_is_not(tmp_path):
    assert paths.is_checkout() and paths.SOURCE_ROOT == ROOT
    assert paths.VM_DIR == ROOT / "vm" and paths.BUILD_DIR == ROOT / ".build" \
        or os.environ.get(paths.BUILD_DIR_ENV)
    site = tmp_path / "site-packages"
    for sub in ("scenarios", "plots", "webserver", "vm/files/guest"):
        (site / "bufferbloat" / sub).mkdir(parents=True)
    assert not paths.is_checkout(site / "bufferbloat")
    # a checkout's layout beside a package that holds its folders: still installed
    (site / "vm" / "guest").mkdir(parents=True)
    (site / "scenarios").mkdir()
    assert not paths.is_checkout(site / "bufferbloat")
    (site / "bufferbloat" / "scenarios").rmdir()
    assert paths.is_checkout(site / "bufferbloat")


def test_an_installed_package_builds_outside_itself():
    home = "/home/u"
    assert paths.default_build_dir(None, env={}, euid=0) == Path("/var/cache/bufferbloat/build")
    assert paths.default_build_dir(None, env={}, euid=1000, home=home) \
        == Path("/home/u/.cache/bufferbloat/build")
    assert paths.default_build_dir(None, env={"XDG_CACHE_HOME": "/c"}, euid=1000) \
        == Path("/c/bufferbloat/build")
    assert paths.default_build_dir(ROOT, env={}, euid=0) == ROOT / ".build"
    assert paths.default_build_dir(ROOT, env={paths.BUILD_DIR_ENV: "/x/b"}, euid=0) \
        == Path("/x/b")


def test_version_names_the_code(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    from bufferbloat import __version__
    assert out.startswith(f"bufferbloat {__version__} (checkout {ROOT}")
    assert "git " in out or "not a git repository" in out


def test_a_missing_module_of_the_project_is_a_broken_install(monkeypatch):
    text = missing_module_text("list", "bufferbloat.traffic")
    assert "apt-get" not in text and "python3-bufferbloat" not in text
    assert "incomplete" in text
    monkeypatch.setattr(paths, "SOURCE_ROOT", None)
    text = missing_module_text("list", "bufferbloat.traffic")
    assert "reinstall" in text and "apt-get" not in text
    assert "apt-get install python3-numpy" in missing_module_text("list", "numpy")


def test_an_installed_package_shares_its_results_directory(monkeypatch, tmp_path):
    monkeypatch.setattr(paths, "SOURCE_ROOT", None)
    out = tmp_path / "res"
    assert where.guest_out(str(out)) == "/bb" and out.is_dir()
    assert where.host_path("/bb/a1_fifo/r1", str(out)) == str(out / "a1_fifo" / "r1")
    assert where.host_path("/elsewhere", str(out)) == "/elsewhere"
    with where.runs_file(str(out)) as (guest, host):
        assert guest.startswith("/bb/.vm-run/runs-") and host.startswith(str(out))
        with open(host, "w") as f:
            f.write("/bb/a1_fifo/r1\n")
        assert where.recorded_runs(host, str(out)) == [str(out / "a1_fifo" / "r1")]
    assert not os.path.exists(host)
    binary = tmp_path / "bb-qdisc-sampler"
    binary.write_text("x")
    with where.staged_package(str(out), {"binary": str(binary)}) as env:
        stage = Path(str(out) + env["PYTHONPATH"][len("/bb"):])
        assert env["PYTHONPATH"].startswith("/bb/.vm-run/pkg-")
        assert env[paths.BUILD_DIR_ENV] == env["PYTHONPATH"] + "/build"
        assert (stage / "bufferbloat" / "cli.py").is_file()
        assert (stage / "bufferbloat" / "measure" / "csampler" / "Makefile").is_file()
        assert (stage / "build" / "bb-qdisc-sampler").read_text() == "x"
        assert not list(stage.rglob("__pycache__"))
    assert not stage.exists()


def test_a_checkout_shares_itself(tmp_path):
    with where.staged_package(str(tmp_path)) as env:
        assert env == {}
    assert where.share_root(str(tmp_path)) == os.path.realpath(ROOT)
    with pytest.raises(Exception, match="sees only the checkout"):
        where.guest_out(str(tmp_path))
