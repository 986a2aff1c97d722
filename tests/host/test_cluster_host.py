"""Sweeps on Dask workers on this kernel: HTB and pfifo only (``--set
delay_ms=0``: no netem), which every Linux kernel has.

* a local cluster of 2 workers runs a sweep two points at a time, each in its own
  network namespace: every point ok, the index naming both workers, the same tree as
  the serial run of the same sweep, nothing left behind;
* a worker SIGKILLed (by PID) mid-point: its point runs again and completes; the
  killed point's process is gone and the restarted worker's slot is clean;
* Ctrl-C of the driver in a real terminal (tmux), then the same command: only the
  missing points run, the recorded ones are left as they were;
* a worker running other code refuses the point, naming both identities.
"""
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from bufferbloat.core.signals import same_process
from tests.retries import note_sweep_reruns

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

pytest.importorskip("distributed", reason="python3-distributed (scripts/host-packages.txt) "
                                          "is not installed: run ./scripts/install-deps.sh")


def _env(worker_dir, root=ROOT):
    return dict(os.environ, PYTHONPATH=root, PYTHONUNBUFFERED="1",
                BUFFERBLOAT_WORKER_DIR=str(worker_dir))


def _sweep_argv(out, sizes, time_s=3, extra=()):
    return [PY, "-m", "bufferbloat", "sweep", "a1_fifo", "--vary",
            "buffer_pkts=" + ",".join(str(s) for s in sizes), "--set", "delay_ms=0",
            "--time", str(time_s), "--repeat", "1", "--host", "--no-figures",
            "--retry-degraded", "1", "--out", str(out), *extra]


def _index(out):
    with open(os.path.join(str(out), "a1_fifo", "sweep", "index.json")) as f:
        return json.load(f)["done"]


def _tree(root):
    """The relative paths of a results tree's run directories and their files' names
    (no timings: the layout; degraded attempts set aside depend on the machine's load,
    they are counted against the session's budget instead)."""
    base = os.path.join(str(root), "a1_fifo", "sweep")
    out = set()
    for d, _, files in os.walk(base):
        if ".degraded-" in d:
            continue
        for f in files:
            if f in ("result.json", "metrics.json", "series.csv"):
                out.add(os.path.relpath(os.path.join(d, f), base))
    return out


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _leftovers(worker_dir):
    return (glob.glob(os.path.join(str(worker_dir), "*", "network.json"))
            + glob.glob(os.path.join(str(worker_dir), "*", "child.json"))
            + glob.glob("/run/bufferbloat/netns-*/network.json"))


class _Procs:
    """Processes a test starts, ended by PID at the end."""

    def __init__(self):
        self.procs = []

    def start(self, argv, log, env, cwd=ROOT):
        f = open(log, "w")
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
        f.close()
        self.procs.append(proc)
        return proc

    def end(self):
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


@pytest.fixture
def procs():
    p = _Procs()
    yield p
    p.end()


def _scheduler(procs, tmp_path):
    port = _free_port()
    procs.start([PY, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                 "--port", str(port), "--no-dashboard"], tmp_path / "scheduler.log",
                dict(os.environ))
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return f"tcp://127.0.0.1:{port}"
        except OSError:
            assert time.monotonic() < deadline, (tmp_path / "scheduler.log").read_text()
            time.sleep(0.3)


def _worker(procs, tmp_path, address, name, worker_dir, root=ROOT):
    log = tmp_path / f"worker-{name}-{len(procs.procs)}.log"
    proc = procs.start([PY, "-m", "bufferbloat", "worker", address, "--name", name], log,
                       _env(worker_dir, root), cwd=root)    # -m puts the cwd first
    deadline = time.monotonic() + 60
    while "joined" not in log.read_text():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.3)
    return proc


def test_two_local_workers_run_a_sweep_as_the_serial_run_does(tmp_path, net_guard):
    sizes = (20, 40, 60, 80)
    wd = tmp_path / "workers"
    t0 = time.monotonic()
    proc = subprocess.run(_sweep_argv(tmp_path / "cluster", sizes, extra=["--workers", "2"]),
                          cwd=ROOT, env=_env(wd), capture_output=True, text=True,
                          timeout=900)
    cluster_wall = time.monotonic() - t0
    assert proc.returncode in (0, 5), proc.stdout[-3000:] + proc.stderr[-3000:]
    entries = _index(tmp_path / "cluster")
    note_sweep_reruns(entries)
    assert [e["status"] for e in entries] == ["ok"] * 4, entries
    assert {e["worker"] for e in entries} == {"worker 0", "worker 1"}
    assert all(e["machine"] == socket.gethostname() for e in entries)
    degraded = [e["run_dir"] for e in entries if e["health"] != "healthy"]
    assert not degraded or proc.returncode == 5
    assert "dask (a local cluster of 2 workers)" in json.dumps(
        json.load(open(tmp_path / "cluster" / "a1_fifo" / "sweep" / "index.json")))
    for e in entries:        # each run is whole, under its key, in the driver's tree
        with open(os.path.join(e["run_dir"], "result.json")) as f:
            rec = json.load(f)
        assert rec["run_key"] == e["run_key"] and rec["status"] == "ok"
        assert os.path.exists(os.path.join(e["run_dir"], "metrics.json"))
        assert str(tmp_path / "cluster") in e["run_dir"]
    t0 = time.monotonic()
    serial = subprocess.run(_sweep_argv(tmp_path / "serial", sizes), cwd=ROOT,
                            env=_env(wd), capture_output=True, text=True, timeout=900)
    serial_wall = time.monotonic() - t0
    assert serial.returncode in (0, 5), serial.stdout[-3000:] + serial.stderr[-3000:]
    note_sweep_reruns(_index(tmp_path / "serial"))
    assert _tree(tmp_path / "cluster") == _tree(tmp_path / "serial")
    assert len(_tree(tmp_path / "serial")) >= 8
    print(f"4 points: serial {serial_wall:.1f} s, 2 workers {cluster_wall:.1f} s")
    assert _leftovers(wd) == []


def test_a_killed_worker_s_point_runs_again_and_nothing_is_left(tmp_path, net_guard, procs):
    sizes = (20, 40, 60, 80)
    wd = tmp_path / "workers"
    address = _scheduler(procs, tmp_path)
    w1 = _worker(procs, tmp_path, address, "w1", wd)
    _worker(procs, tmp_path, address, "w2", wd)
    driver = procs.start(_sweep_argv(tmp_path / "out", sizes, time_s=6,
                                     extra=["--cluster", address]),
                         tmp_path / "driver.log", _env(wd))
    child_file = wd / "w1" / "child.json"
    deadline = time.monotonic() + 300
    while not child_file.exists():
        assert driver.poll() is None, (tmp_path / "driver.log").read_text()
        assert time.monotonic() < deadline, "w1 never started a point"
        time.sleep(0.1)
    time.sleep(3.0)                                    # inside the point's traffic
    child = json.loads(child_file.read_text())
    os.kill(w1.pid, signal.SIGKILL)
    w1.wait(timeout=30)
    _worker(procs, tmp_path, address, "w1", wd)        # restarted, as systemd would
    rc = driver.wait(timeout=900)
    log = (tmp_path / "driver.log").read_text()
    assert rc in (0, 5), log[-4000:]
    entries = _index(tmp_path / "out")
    assert [e["status"] for e in entries] == ["ok"] * 4, log[-4000:]
    deadline = time.monotonic() + 90                   # the killed point's child ended
    while same_process(child["pid"], child["start"]) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not same_process(child["pid"], child["start"]), "the killed point outlived it"
    assert _leftovers(wd) == []


def _tmux(*args):
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=30)


def test_ctrl_c_in_a_terminal_then_the_same_command_runs_only_what_is_missing(
        tmp_path, net_guard):
    if shutil.which("tmux") is None:
        pytest.fail("tmux is missing: ./scripts/install-deps.sh installs it")
    sizes = (20, 30, 40, 50, 60, 70)
    wd = tmp_path / "workers"
    argv = _sweep_argv(tmp_path / "out", sizes, time_s=5, extra=["--workers", "2"])
    session = f"bbcl{os.getpid()}"
    # bash, not sh: bash goes on after a child that handled SIGINT and exited 130 (dash
    # would end the script with it, before writing the exit status)
    script = tmp_path / "drive.sh"
    script.write_text("#!/bin/bash\ncd " + ROOT + "\n"
                      + " ".join(f"'{a}'" for a in argv)
                      + f" > {tmp_path}/first.log 2>&1\necho $? > {tmp_path}/rc\n"
                      + "sleep 600\n")
    script.chmod(0o755)
    env_args = []
    for k, v in _env(wd).items():
        if k in ("PYTHONPATH", "BUFFERBLOAT_WORKER_DIR", "PYTHONUNBUFFERED"):
            env_args += ["-e", f"{k}={v}"]
    assert _tmux("new-session", "-d", "-s", session, *env_args, str(script)).returncode == 0
    try:
        index = tmp_path / "out" / "a1_fifo" / "sweep" / "index.json"
        deadline = time.monotonic() + 600
        while True:
            done = []
            if index.exists():
                done = [e for e in json.loads(index.read_text())["done"]
                        if e.get("status") == "ok"]
            if len(done) >= 2:
                break
            assert not (tmp_path / "rc").exists(), (tmp_path / "first.log").read_text()
            assert time.monotonic() < deadline, "no point finished"
            time.sleep(0.2)
        time.sleep(2.0)                               # the next points are in flight
        _tmux("send-keys", "-t", session, "C-c")
        deadline = time.monotonic() + 240
        while not (tmp_path / "rc").exists():
            assert time.monotonic() < deadline, (tmp_path / "first.log").read_text()
            time.sleep(0.3)
    finally:
        _tmux("kill-session", "-t", session)
    first_log = (tmp_path / "first.log").read_text()
    assert (tmp_path / "rc").read_text().strip() == "130", first_log[-3000:]
    first = json.loads(index.read_text())["done"]
    ok_first = {e["run_dir"]: open(os.path.join(e["run_dir"], "result.json"), "rb").read()
                for e in first if e["status"] == "ok"}
    assert 2 <= len(ok_first) < len(sizes), first_log[-3000:]
    assert any(e["status"] == "interrupted" for e in first), first
    assert _leftovers(wd) == [], first_log[-3000:]
    again = subprocess.run(argv, cwd=ROOT, env=_env(wd), capture_output=True, text=True,
                           timeout=900)
    assert again.returncode in (0, 5), again.stdout[-3000:] + again.stderr[-3000:]
    assert again.stdout.count("already recorded") == len(ok_first), again.stdout
    entries = _index(tmp_path / "out")
    assert [e["status"] for e in entries] == ["ok"] * len(sizes)
    assert sum(1 for e in entries if e.get("resumed")) == len(ok_first)
    for run_dir, data in ok_first.items():            # left exactly as they were
        assert open(os.path.join(run_dir, "result.json"), "rb").read() == data
    assert _leftovers(wd) == []


def test_a_worker_running_other_code_refuses_naming_both(tmp_path, net_guard, procs):
    copy = tmp_path / "other"
    for d in ("bufferbloat", "scenarios", "webserver", "plots", "vm"):
        shutil.copytree(os.path.join(ROOT, d), copy / d, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.ext4", ".build"))
    scn = copy / "scenarios" / "__init__.py"
    scn.write_text(scn.read_text() + "\n# another version of the catalogue\n")
    wd = tmp_path / "workers"
    address = _scheduler(procs, tmp_path)
    _worker(procs, tmp_path, address, "other", wd, root=str(copy))
    proc = subprocess.run(_sweep_argv(tmp_path / "out", (20,), extra=["--cluster", address]),
                          cwd=ROOT, env=_env(wd), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (entry,) = _index(tmp_path / "out")
    assert entry["status"] == "failed"
    assert "runs other code than the driver" in entry["error"]
    assert str(copy) in entry["error"] and ROOT in entry["error"]
    assert entry["error"].count("code hash") == 2
    assert glob.glob(str(tmp_path / "out" / "**" / "result.json"), recursive=True) == []
    assert _leftovers(wd) == []
