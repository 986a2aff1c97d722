"""Writes that fail: a full disk during ``report`` (a 2 MiB tmpfs)
and a read-only folder for ``compare --html`` and ``export -o`` (a tmpfs mounted
read-only: root ignores mode bits). Each: one line naming what and where, exit 1, no
temporary file left, no file left half-written (0 bytes), the previous page intact.

The CLI runs as a subprocess, as a user types it. Needs root to mount; skipped (saying
so) where mounting is not permitted."""
import glob
import os
import shutil
import subprocess
import sys

import pytest
from conftest import FIXTURES, ROOT

RUNS = os.path.join(FIXTURES, "runs")


def _cli(argv):
    p = subprocess.run([sys.executable, "-m", "bufferbloat"] + argv, capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=ROOT), timeout=300)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture
def tmpfs(tmp_path):
    """mount(options) -> a tmpfs mounted on a new folder under tmp_path; all unmounted
    at the end."""
    mounted = []

    def mount(options):
        where = tmp_path / f"mnt{len(mounted)}"
        where.mkdir()
        res = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                             capture_output=True, text=True)
        if res.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN): "
                        f"{res.stderr.strip()}")
        mounted.append(where)
        return where
    yield mount
    for where in reversed(mounted):
        subprocess.run(["umount", str(where)], check=False)


def _temporaries(root):
    return (glob.glob(os.path.join(str(root), "**", "*.tmp*"), recursive=True)
            + glob.glob(os.path.join(str(root), "**", ".*.tmp"), recursive=True))


def _empty_files(root):
    return {p for p in glob.glob(os.path.join(str(root), "**", "*"), recursive=True)
            if os.path.isfile(p) and os.path.getsize(p) == 0}


def _fill(folder):
    """Fill the file system of ``folder`` up to its last byte."""
    fd = os.open(os.path.join(folder, "filler"), os.O_WRONLY | os.O_CREAT)
    try:
        for size in (65536, 4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)


def test_report_onto_a_full_disk_says_so_and_leaves_nothing_half_written(tmpfs):
    disk = tmpfs("size=4m")     # the fixture (0.4 MB) and its first report (1.8 MB)
    tree = disk / "sweep"
    shutil.copytree(os.path.join(RUNS, "sweep_fifo_buffer"), tree)
    rc, out, err = _cli(["report", str(tree)])
    assert rc == 0, err                        # room enough for the first report
    page = (tree / "report.html").read_bytes()
    assert _empty_files(tree / "report-tables") == set()
    _fill(disk)
    empty_before = _empty_files(disk)          # the fixture's own empty logs, the filler
    for attempt in range(3):                   # retries pile nothing up
        rc, out, err = _cli(["report", str(tree)])
        assert rc == 1, err
        lines = [line for line in err.splitlines() if line.startswith("bufferbloat:")]
        assert len(lines) == 1 and lines[0].startswith("bufferbloat: error: disk full: "), err
        assert str(disk) in lines[0]
        assert "Traceback" not in err
        assert _temporaries(disk) == []
        assert _empty_files(disk) == empty_before
        assert (tree / "report.html").read_bytes() == page     # the previous page intact
    for table in glob.glob(str(tree / "report-tables" / "*")):
        assert os.path.getsize(table) > 0


def test_a_first_report_onto_a_small_disk_fails_cleanly(tmpfs):
    disk = tmpfs("size=2m")
    tree = disk / "a5"
    shutil.copytree(os.path.join(RUNS, "sweep_a5_video"), tree)   # 1.1 MB of runs
    empty_before = _empty_files(disk)
    rc, out, err = _cli(["report", str(tree)])
    assert rc == 1, err
    assert "bufferbloat: error: disk full: " in err and "Traceback" not in err
    assert _temporaries(disk) == []
    assert _empty_files(disk) == empty_before
    assert not (tree / "report.html").exists()


@pytest.mark.parametrize("argv", [
    ["compare", os.path.join(RUNS, "a1_fifo"), os.path.join(RUNS, "a2_pie"), "--html",
     "{ro}/c.html"],
    ["export", "--flent", os.path.join(RUNS, "a1_fifo"), "-o", "{ro}/x.flent.gz"],
], ids=["compare --html", "export -o"])
def test_writing_into_a_read_only_folder_is_one_line(tmpfs, argv):
    ro = tmpfs("size=1m,ro")
    rc, out, err = _cli([a.format(ro=ro) for a in argv])
    assert rc == 1, err
    assert err.strip().splitlines() == [
        f"bufferbloat: error: {argv[-1].format(ro=ro)}: Read-only file system"]
    assert os.listdir(ro) == []
