"""A worker whose kernel lacks what the points need runs them in its project VM, booted
once for all of them: ``sweep a1_fifo`` (netem) on a local cluster of one
worker, on this host whose kernel has no netem. Two points, one VM boot, every point
ok and recorded in the driver's tree under its key, the VM gone at the end. Boots the VM
(minutes under TCG; one VM at a time)."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from bufferbloat.run import where
from bufferbloat.scenarios import catalogue
from bufferbloat.vm.common import cache_dir

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytest.importorskip("distributed", reason="python3-distributed (scripts/host-packages.txt) "
                                          "is not installed: run ./scripts/install-deps.sh")


def _boot_lines():
    path = cache_dir() / "boots.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_one_worker_runs_two_points_in_one_boot_of_its_vm(tmp_path):
    a1 = catalogue()["a1_fifo"]
    if not where.missing_kernel_pieces([a1.build()[0]]):
        pytest.skip("this kernel has netem: a worker runs a1_fifo here, not in its VM "
                    "(the test is for a kernel that lacks it, as CI's)")
    out = tmp_path / "out"
    before = len(_boot_lines())
    proc = subprocess.run(
        [sys.executable, "-m", "bufferbloat", "sweep", "a1_fifo", "--vary",
         "buffer_pkts=20,100", "--time", "5", "--repeat", "1", "--no-figures",
         "--workers", "1", "--out", str(out)],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT, PYTHONUNBUFFERED="1"),
        capture_output=True, text=True, timeout=3600)
    print(proc.stdout[-5000:], proc.stderr[-3000:])
    assert proc.returncode in (0, 5), proc.returncode
    assert "runs the points in its project VM, booted once" in proc.stdout
    with open(out / "a1_fifo" / "sweep" / "index.json") as f:
        entries = json.load(f)["done"]
    assert [e["status"] for e in entries] == ["ok"] * 2
    assert {e["worker"] for e in entries} == {"worker 0"}
    assert all("project VM (this kernel lacks sch_netem" in e["where"] for e in entries)
    assert {e["where"].rsplit("its boot ", 1)[1] for e in entries} == {"1"}
    for e in entries:
        with open(os.path.join(e["run_dir"], "result.json")) as f:
            rec = json.load(f)
        assert rec["run_key"] == e["run_key"]
        assert rec["machine"]["in_project_vm"] is True
    runs = _boot_lines()[before:]
    assert len(runs) == 1, runs                     # one VM command for the 2 points
    assert runs[0]["rc"] == 0 and len(runs[0]["boots"]) >= 1, runs[0]   # quit, not killed
    spool = os.path.join(ROOT, ".scratch", "workers", "0")   # the worker's spool: gone
    assert not os.path.exists(spool), os.listdir(spool)
    shutil.rmtree(os.path.dirname(spool), ignore_errors=True)
