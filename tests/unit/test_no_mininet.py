"""The commands that need no network work with a Python that has no Mininet.

The interpreter is a real venv without the system site-packages (``python3 -m venv
--without-pip``, ``include-system-site-packages = false``) that sees only numpy,
matplotlib and what they import, linked from Debian's dist-packages: Mininet is not
importable in it (asserted first). ``BUFFERBLOAT_TEST_PYTHON`` names another
interpreter to use instead (e.g. a venv with numpy and matplotlib from PyPI). Where
no venv can be made (no python3-venv), the same commands run under /usr/bin/python3
with a ``sitecustomize`` that refuses ``import mininet`` (the test id says which).

Each command must give its output and no traceback; a command that needs Mininet must
say which interpreter or package to use, with exit code 2.
"""
import json
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "runs")
SYSTEM_PYTHON = "/usr/bin/python3"

# what numpy and matplotlib (Agg) import from outside the standard library
_IMPORTED = """
import json, os, sys, sysconfig
import numpy, matplotlib
matplotlib.use("Agg")
import matplotlib.figure, matplotlib.backends.backend_agg, matplotlib.patches
std = os.path.realpath(sysconfig.get_paths()["stdlib"])
tops = set()
for mod in list(sys.modules.values()):
    f = getattr(mod, "__file__", None)
    if not f:
        continue
    f = os.path.realpath(f)
    for d in sys.path:
        d = os.path.realpath(d) if d else ""
        if d and d != std and ("site-packages" in d or "dist-packages" in d):
            if f.startswith(d + os.sep):
                tops.add(os.path.join(d, os.path.relpath(f, d).split(os.sep)[0]))
print(json.dumps(sorted(tops)))
"""

_BLOCKER = """
import importlib.abc, sys
class _NoMininet(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "mininet" or name.startswith("mininet."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _NoMininet())
"""


def _slim_venv(where):
    """A venv of /usr/bin/python3 without system site-packages, seeing numpy and
    matplotlib only; its python, or None when no venv can be made here."""
    venv = os.path.join(where, "venv")
    made = subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", venv],
                          capture_output=True, text=True)
    if made.returncode != 0:
        return None
    found = subprocess.run([SYSTEM_PYTHON, "-c", _IMPORTED], capture_output=True,
                           text=True, check=True)
    python = os.path.join(venv, "bin", "python3")
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True,
                          check=True).stdout.strip()
    for top in json.loads(found.stdout):
        if os.path.basename(top).split(".")[0] != "mininet":
            os.symlink(top, os.path.join(site, os.path.basename(top)))
    return python


@pytest.fixture(scope="module")
def interpreter(tmp_path_factory):
    """(argv prefix, env, how) of a Python that cannot import mininet."""
    where = tmp_path_factory.mktemp("nomininet")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONHOME", "PYTHONPATH")}
    env.update(PYTHONPATH=ROOT, MPLBACKEND="Agg", MPLCONFIGDIR=str(where / "mpl"))
    given = os.environ.get("BUFFERBLOAT_TEST_PYTHON")
    if given:
        python, how = given, f"given interpreter {given}"
    else:
        python, how = _slim_venv(str(where)), "venv without system site-packages"
    if python is None:   # no venv here: Debian's Python with mininet refused on import
        blocker = where / "blocker"
        blocker.mkdir()
        (blocker / "sitecustomize.py").write_text(_BLOCKER)
        env["PYTHONPATH"] = f"{blocker}:{ROOT}"
        python, how = SYSTEM_PYTHON, "sitecustomize import blocker"
    probe = subprocess.run([python, "-c", "import mininet"], env=env, capture_output=True,
                           text=True)
    assert probe.returncode != 0 and "mininet" in probe.stderr, how
    print(f"interpreter without mininet: {python} ({how})")
    return [python, "-m", "bufferbloat"], env, how


def _run(interpreter, *args, cwd=ROOT):
    argv, env, _ = interpreter
    proc = subprocess.run(argv + list(args), env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=300)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    return proc


@pytest.fixture
def runs(tmp_path):
    """A writable copy of the recorded runs."""
    dst = tmp_path / "runs"
    shutil.copytree(FIXTURES, dst)
    return dst


def test_list_names_every_scenario(interpreter):
    from bufferbloat.scenarios import catalogue
    proc = _run(interpreter, "list")
    assert proc.returncode == 0
    for name in catalogue():
        assert name in proc.stdout


def test_describe_prints_keys_and_headline(interpreter):
    proc = _run(interpreter, "describe", "c1_red_vs_pie")
    assert proc.returncode == 0, proc.stderr
    assert "qdisc.min_bytes" in proc.stdout and "headline" in proc.stdout


def test_show_prints_health_and_metrics(interpreter):
    proc = _run(interpreter, "show", os.path.join(FIXTURES, "a1_fifo"))
    assert proc.returncode == 0, proc.stderr
    assert "health:" in proc.stdout and "rtt_mean_ms" in proc.stdout


def test_plot_writes_figures(interpreter, runs):
    proc = _run(interpreter, "plot", str(runs / "a1_fifo"))
    assert proc.returncode == 0, proc.stderr
    paths = proc.stdout.split()
    assert any(p.endswith("rtt.png") for p in paths)
    assert all(os.path.getsize(p) > 1000 for p in paths)


def test_report_writes_the_page(interpreter, runs):
    proc = _run(interpreter, "report", str(runs / "sweep_fifo_buffer"))
    assert proc.returncode == 0, proc.stderr
    page = proc.stdout.strip().splitlines()[-1]
    assert page.endswith("report.html") and "<img" in open(page).read()


def test_compare_prints_the_table_and_writes_the_page(interpreter, tmp_path):
    page = tmp_path / "cmp.html"
    proc = _run(interpreter, "compare", os.path.join(FIXTURES, "a1_fifo"),
                os.path.join(FIXTURES, "a2_pie"), "--html", str(page))
    assert proc.returncode == 0, proc.stderr
    assert "ping RTT, mean" in proc.stdout and page.read_text().count("<img") == 3


def test_check_runs(interpreter):
    proc = _run(interpreter, "check")
    assert proc.returncode == 0 and "mininet" in proc.stdout
    assert "/usr/bin/python3" in proc.stdout


def test_run_on_the_host_says_which_interpreter(interpreter, tmp_path):
    # delay 0: no netem, so the kernel is not what stops it; the interpreter is
    proc = _run(interpreter, "run", "a1_fifo", "--set", "delay_ms=0", "--time", "5",
                "--host", "--out", str(tmp_path))
    assert proc.returncode == 2
    assert "mininet" in proc.stderr and "/usr/bin/python3" in proc.stderr
    assert list(tmp_path.iterdir()) == []
