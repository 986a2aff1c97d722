"""``bufferbloat run a1_fifo --quick`` typed on this host, whose kernel lacks netem:
the command moves into the project VM by itself (on a kernel with netem, ``--vm`` sends
it there), the run is recorded in the checkout
(shared with the VM), and the summary, figures and report are made here, with paths
that exist on this host. Boots the VM (minutes under TCG; one VM at a time)."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from bufferbloat import where

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def out():
    path = os.path.join(ROOT, ".scratch", f"through-vm-{os.getpid()}")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_run_started_here_finishes_through_the_vm(out):
    a1 = __import__("scenarios").catalogue()["a1_fifo"]
    # on a kernel with netem the run would stay here: there --vm sends it
    moves = bool(where.missing_kernel_pieces([a1.build()[0]]))
    proc = subprocess.run([sys.executable, "-m", "bufferbloat", "run", "a1_fifo", "--quick",
                           "--out", os.path.relpath(out, ROOT)] + ([] if moves else ["--vm"]),
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
                          capture_output=True, text=True, timeout=3600)
    print(proc.stdout[-4000:], proc.stderr[-3000:])
    assert not moves or "running inside the project VM" in proc.stderr
    assert proc.returncode == 0, proc.returncode
    lines = proc.stdout.splitlines()
    assert any(line.startswith("recorded in the VM: /bb/") for line in lines)
    start = next(i for i, line in enumerate(lines) if line.startswith("result: "))
    run_dir = lines[start].split(": ", 1)[1]    # the host's summary names the host path
    assert os.path.isabs(run_dir) and run_dir.startswith(out)
    with open(os.path.join(run_dir, "result.json")) as f:
        rec = json.load(f)
    assert rec["status"] == "ok" and rec["machine"]["in_project_vm"] is True
    # the summary: headline with theory, health, figures and report that exist here
    summary = "\n".join(lines[start:])
    assert "health: healthy" in summary and "theory" in summary
    figures = [line.strip() for line in lines if line.strip().endswith(".png")]
    assert figures and all(os.path.isfile(p) and p.startswith(run_dir) for p in figures)
    report = next(line.split(": ", 1)[1] for line in lines if line.startswith("report: "))
    assert os.path.isfile(report)
