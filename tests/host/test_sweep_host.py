"""A real sweep (three FIFO sizes on the host kernel) interrupted with SIGINT during its
second point, then rerun with the same command: the rerun runs only the two missing
points, leaves the first point's record exactly as it was, and ends with all three ok."""
import json
import os
import signal
import subprocess
import sys
import time

from bufferbloat.core.errors import EXIT_DEGRADED
from bufferbloat.net.cleanup import STATE_PATH
from bufferbloat.run.identity import run_config, run_key
from bufferbloat.run.plan import point_dir
from bufferbloat.scenarios import catalogue

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIZES = ("20", "50", "100")


def _sweep(out, log_path):
    argv = [sys.executable, "-m", "bufferbloat", "sweep", "a1_fifo",
            "--vary", "buffer_pkts=" + ",".join(SIZES), "--set", "delay_ms=0",
            "--time", "3", "--out", str(out)]
    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONUNBUFFERED="1")
    log = open(log_path, "w")
    try:
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        log.close()


def _record(path):
    with open(os.path.join(path, "result.json")) as f:
        return json.load(f)


def test_an_interrupted_sweep_reruns_only_the_missing_points(tmp_path, net_guard):
    out = tmp_path / "out"
    root = os.path.join(str(out), "a1_fifo", "sweep")
    configs = [run_config(catalogue()["a1_fifo"], {"delay_ms": "0", "buffer_pkts": s},
                          duration_s=3, rep=1) for s in SIZES]
    dirs = [point_dir(root, {"buffer_pkts": s}, 1, c) for s, c in zip(SIZES, configs)]

    proc = _sweep(out, tmp_path / "first.log")
    deadline = time.monotonic() + 300
    while not os.path.exists(dirs[1]) and proc.poll() is None:
        assert time.monotonic() < deadline, "the second point never started"
        time.sleep(0.1)
    time.sleep(2.0)                                   # inside the second point's run
    assert proc.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
    os.kill(proc.pid, signal.SIGINT)
    rc = proc.wait(timeout=120)
    first_log = (tmp_path / "first.log").read_text()
    assert rc == 130, first_log[-3000:]
    assert not os.path.exists(STATE_PATH)
    first = _record(dirs[0])
    assert first["status"] == "ok"
    with open(os.path.join(dirs[0], "result.json"), "rb") as f:
        first_bytes = f.read()
    assert _record(dirs[1])["status"] == "interrupted"
    assert not os.path.exists(dirs[2])
    with open(os.path.join(root, "index.json")) as f:
        index = json.load(f)
    assert [p["status"] for p in index["done"]] == ["ok", "interrupted"]

    proc = _sweep(out, tmp_path / "second.log")
    rc = proc.wait(timeout=300)
    second_log = (tmp_path / "second.log").read_text()
    assert rc in (0, EXIT_DEGRADED), second_log[-3000:]    # a slow emulator's: complete
    assert "[1/3] a1_fifo buffer_pkts=20 rep 1: already recorded" in second_log
    assert "[2/3] a1_fifo buffer_pkts=50 rep 1 (elapsed" in second_log
    assert "[3/3] a1_fifo buffer_pkts=100 rep 1 (elapsed" in second_log
    with open(os.path.join(dirs[0], "result.json"), "rb") as f:
        assert f.read() == first_bytes, "the recorded point was touched"
    recs = [_record(d) for d in dirs]
    assert [r["status"] for r in recs] == ["ok", "ok", "ok"]
    assert [r["params"]["buffer_pkts"] for r in recs] == [20, 50, 100]
    # the engine recorded the identity the sweep keyed the points with
    assert [r["run_key"] for r in recs] == [run_key(c) for c in configs]
    assert all(r["run_config"]["profile"] == "full" and r["run_config"]["duration_s"] == 3
               for r in recs)
    # each point is a run of its own: three distinct start times
    assert len({r["started"] for r in recs}) == 3
    with open(os.path.join(root, "index.json")) as f:
        index = json.load(f)
    assert [(p["status"], p.get("resumed", False)) for p in index["done"]] == \
        [("ok", True), ("ok", False), ("ok", False)]
