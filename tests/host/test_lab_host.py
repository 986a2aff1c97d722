"""A lab of machines on this one (tests/lab.py): a scheduler, a driver and two workers,
each in its own network namespace with its own address and hostname, joined by a
switch; started with docs/guide/cluster.md's scheduler line and systemd unit. A
host-kernel sweep of 6 points (HTB and pfifo, ``--set delay_ms=0``).

* gate: pc1's cable pulled mid-point (its switch port down, no process killed), put
  back once its point was given to pc2: every point recorded once, ok, the cut point
  by pc2 (its run started after the cut); pc1's old worker and its point's process
  ended, pc1 back and clean; nothing left in any namespace;
* acceptance: the cable left out until the sweep ends, pc2's way out slow (HTB at
  1 Mbit/s) while the runs travel back; the tree identical in layout to a serial
  run's; pc1 back clean once restored.;
* acceptance: the scheduler restarted mid-point: the lost points sent again, every
  point ok once, both workers restarted clean.
"""
import glob
import json
import os
import time

import pytest

from bufferbloat.core.signals import same_process
from bufferbloat.net import isolation
from tests.host.test_cluster_host import _index
from tests.host.test_cluster_host import _sweep_argv as _cluster_argv
from tests.lab import Lab

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIZES = (20, 30, 40, 50, 60, 70)

pytest.importorskip("distributed", reason="python3-distributed (scripts/host-packages.txt) "
                                          "is not installed: run ./scripts/install-deps.sh")


def _sweep_argv(out, time_s, extra=()):
    return _cluster_argv(out, SIZES, time_s, extra)


def _tree(root):
    """The layout: run directories and their files' names (degraded attempts aside)."""
    base = os.path.join(str(root), "a1_fifo", "sweep")
    out = set()
    for d, _, files in os.walk(base):
        if ".degraded-" not in d:
            out |= {os.path.relpath(os.path.join(d, f), base) for f in files
                    if f != "index.json"}
    return out


@pytest.fixture
def lab(tmp_path, net_guard):
    wd = tmp_path / "workers"
    lab = Lab(tmp_path / "lab", workers=2, ttl_s=3.0,
              worker_env={"BUFFERBLOAT_WORKER_DIR": str(wd)})
    lab.worker_dir = wd
    try:
        lab.start_scheduler()
        for name in ("pc1", "pc2"):
            lab.start_worker(name)
        for name in ("pc1", "pc2"):
            lab.wait_joined(name)
        yield lab
    finally:
        stray = lab.close()
    assert stray == {}, f"processes left in the lab's namespaces: {stray}"


def _driver(lab, out, time_s, extra_env=None):
    # what each machine's worker does in its initial namespace (docs/guide/cluster.md:
    # the congestion controls allowed): the lab's machines share this kernel's, which
    # only the initial namespace can set (kept, as a worker keeps it, not restored:
    # another run on this kernel may be restoring its own)
    isolation.prepare_ccas()
    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONUNBUFFERED="1",
               BUFFERBLOAT_WORKER_DIR=str(lab.worker_dir), **(extra_env or {}))
    return lab.driver(_sweep_argv(out, time_s, ["--cluster", lab.doc["address"]]), env)


def _cut_mid_point(lab, name, driver, into_s):
    """Pull ``name``'s cable ``into_s`` into its first point: (its point's run key,
    its child {pid, start}, the cut's wall time)."""
    slot = lab.worker_dir / name
    deadline = time.monotonic() + 120
    while not (slot / "child.json").exists():
        assert driver.poll() is None, lab.machines["drv"].log_text()
        assert time.monotonic() < deadline, f"{name} never started a point"
        time.sleep(0.05)
    time.sleep(into_s)
    child = json.loads((slot / "child.json").read_text())
    (spec,) = glob.glob(str(slot / "runs" / "*" / "spec.json"))
    with open(spec) as f:
        key = json.load(f)["run_key"]
    t_cut = time.time()
    lab.cut(name)
    return key, child, t_cut


def _wait_dropped(lab, timeout_s=60):
    """Until the scheduler drops a worker for its silence; the wall time it did."""
    m = lab.machines["lab0"]
    deadline = time.monotonic() + timeout_s
    while "failed to heartbeat" not in m.log_text():
        assert time.monotonic() < deadline, m.log_text()[-3000:]
        time.sleep(0.1)
    return time.time()


def _check_recorded(lab, out, key, t_cut, rc):
    log = lab.machines["drv"].log_text()
    assert rc in (0, 5), log[-4000:]
    entries = _index(out)
    assert [e["status"] for e in entries] == ["ok"] * len(SIZES), log[-4000:]
    assert len({e["run_dir"] for e in entries}) == len({e["run_key"] for e in entries}) \
        == len(SIZES)
    degraded = [e["run_dir"] for e in entries if e["health"] != "healthy"]
    assert not degraded or rc == 5
    (cut,) = [e for e in entries if e["run_key"] == key]
    with open(os.path.join(cut["run_dir"], "result.json")) as f:
        rec = json.load(f)
    # the recorded run of the cut point is a rerun begun after the cut, never the
    # attempt the cut interrupted: on pc2, or, on a loaded machine where pc2's rerun
    # came out degraded and ran again, on pc1's restarted worker once its cable was
    # back (the copy that ended second is refused as a late copy)
    assert rec["t0_realtime"] > t_cut, (cut, rec["started"])
    assert cut["machine"] == rec["machine"]["hostname"] \
        and cut["worker"] == f"worker {cut['machine']}", cut
    if cut["machine"] == "pc1":
        return entries, rec
    assert cut["machine"] == "pc2", cut
    assert all(e["sent_bytes"] > 10_000 for e in entries), entries
    assert not glob.glob(os.path.join(str(out), "**", "*.incoming-*"), recursive=True)
    assert "late copy" not in log
    return entries, rec


def _check_clean(lab, child):
    deadline = time.monotonic() + 60      # the cut point's process ended, by PID
    while same_process(child["pid"], child["start"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not same_process(child["pid"], child["start"]), "the cut point outlived it"
    for name in ("pc1", "pc2"):
        left = lab.leftovers(name, lab.worker_dir)
        assert left == {"processes": [], "old workers": [], "links": [], "files": []}, \
            (name, left)


def test_a_machine_cut_off_mid_point_then_back(tmp_path, lab):
    out = tmp_path / "out"
    t0 = time.monotonic()
    driver = _driver(lab, out, 4, {"BUFFERBLOAT_SEND_LIMIT_BYTES": "1000"})
    key, child, t_cut = _cut_mid_point(lab, "pc1", driver, 2.0)
    t_drop = _wait_dropped(lab)
    first = lab.machines["pc1"].procs[0]
    deadline = time.monotonic() + 60       # the point given to pc2: it runs there
    while True:
        specs = glob.glob(str(lab.worker_dir / "pc2" / "runs" / "*" / "spec.json"))
        keys = []
        for spec in specs:
            try:
                keys.append(json.load(open(spec))["run_key"])
            except (OSError, ValueError):
                pass
        if key in keys:
            break
        assert time.monotonic() < deadline, lab.machines["drv"].log_text()[-3000:]
        time.sleep(0.1)
    t_rerun = time.time()
    lab.restore("pc1")
    lab.wait_joined("pc1", times=2)         # the old worker ended, the unit restarted it
    t_back = time.time()
    assert first.poll() is not None
    rc = driver.wait(timeout=600)
    wall = time.monotonic() - t0
    entries, rec = _check_recorded(lab, out, key, t_cut, rc)
    log = lab.machines["drv"].log_text()
    assert log.count("warning: its run was") == len(SIZES), log[-3000:]
    assert all(e["warnings"] for e in entries)
    assert {e["worker"] for e in entries} == {"worker pc1", "worker pc2"}
    files = {frozenset(os.path.relpath(p, e["run_dir"]) for p in
                       glob.glob(os.path.join(e["run_dir"], "**"), recursive=True))
             for e in entries}
    assert len(files) == 1                   # every run directory whole, the same files
    old_log = lab.machines["pc1"].log_text(0)
    _check_clean(lab, child)
    print(f"cut at {t_cut:.1f}: dropped after {t_drop - t_cut:.1f} s, its point running "
          f"on pc2 after {t_rerun - t_cut:.1f} s, its run there started "
          f"{rec['t0_realtime'] - t_cut:.1f} s after the cut; pc1 back {t_back - t_cut:.1f} s "
          f"after; bytes back per point {[e['sent_bytes'] for e in entries]}; "
          f"sweep {wall:.1f} s")
    print("old pc1 worker's log tail:", old_log[-600:])


@pytest.mark.acceptance
def test_a_machine_cut_off_for_good_and_a_slow_way_back(tmp_path, lab):
    out = tmp_path / "out"
    lab.slow("pc2", "1mbit")
    t0 = time.monotonic()
    driver = _driver(lab, out, 4)
    key, child, t_cut = _cut_mid_point(lab, "pc1", driver, 2.0)
    t_drop = _wait_dropped(lab)
    rc = driver.wait(timeout=900)
    wall = time.monotonic() - t0
    entries, _ = _check_recorded(lab, out, key, t_cut, rc)
    assert {e["worker"] for e in entries if e["run_key"] == key} == {"worker pc2"}
    lab.unslow("pc2")
    lab.restore("pc1")
    lab.wait_joined("pc1", times=2)
    _check_clean(lab, child)
    serial = tmp_path / "serial"
    import subprocess  # noqa: PLC0415
    proc = subprocess.run(_sweep_argv(serial, 4), cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=ROOT), timeout=900)
    assert proc.returncode in (0, 5), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert _tree(out) == _tree(serial)
    slow = [e["sent_bytes"] for e in entries if e["worker"] == "worker pc2"]
    print(f"dropped {t_drop - t_cut:.1f} s after the cut; sweep {wall:.1f} s; pc2's "
          f"runs back at 1 Mbit/s (bytes): {slow}")


@pytest.mark.acceptance
def test_the_scheduler_restarted_mid_point(tmp_path, lab):
    """The scheduler's machine restarts it (SIGTERM by PID, the doc's line again) while
    both workers run a point: the driver sends the lost points again once it is back;
    the workers end their points, exit and are restarted clean."""
    out = tmp_path / "out"
    driver = _driver(lab, out, 4)
    slot = lab.worker_dir / "pc1"
    deadline = time.monotonic() + 120
    while not (slot / "child.json").exists():
        assert driver.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(2.0)
    child = json.loads((slot / "child.json").read_text())
    scheduler = lab.machines["lab0"].procs[-1]
    scheduler.terminate()
    scheduler.wait(timeout=60)
    lab.start_scheduler()
    rc = driver.wait(timeout=600)
    log = lab.machines["drv"].log_text()
    assert rc in (0, 5), log[-4000:]
    entries = _index(out)
    assert [e["status"] for e in entries] == ["ok"] * len(SIZES), log[-4000:]
    assert "was lost with" in log
    for name in ("pc1", "pc2"):
        assert len(lab.machines[name].procs) >= 2, name     # ended, restarted
    _check_clean(lab, child)
