"""Fault injection on the host kernel: the CLI run as a subprocess, signalled or with one
of its tools killed at random points, must leave nothing behind and keep its record.

Every check is against what the run itself recorded in its state file
(/run/bufferbloat-network.json: its processes with their start times, its root-namespace
links with their ifindex) and, with the machine's network lock held so that no other
network exists at that moment, against the links and sysctls of the whole machine.
Unrelated processes (an ``iperf3 -s``, a ``sleep``, a ``cat``) and an unrelated veth pair,
started before, must survive every run and the SIGKILL recovery.

Seeds: BUFFERBLOAT_FAULT_SEED fixes the random points (printed on failure).
"""
import contextlib
import fcntl
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, _links, run_attempts

from bufferbloat.core.errors import EXIT_DEGRADED
from bufferbloat.core.signals import proc_start_time, same_process
from bufferbloat.net.cleanup import STATE_PATH
from bufferbloat.net.network import LOCK_PATH

#: contracts in both tiers: on the host in each, in the VM (with Open vSwitch) in the
#: acceptance tier (run_tests.sh)
pytestmark = pytest.mark.bands
PY = "/usr/bin/python3"
SEED = int(os.environ.get("BUFFERBLOAT_FAULT_SEED") or time.time())
RNG = random.Random(SEED)
TRAFFIC_S = 6
SYSCTLS = ("net/ipv4/tcp_allowed_congestion_control", "net/bridge/bridge-nf-call-iptables",
           "net/bridge/bridge-nf-call-arptables", "net/bridge/bridge-nf-call-ip6tables")


def _sysctls():
    out = {}
    for path in SYSCTLS:
        try:
            with open(f"/proc/sys/{path}") as f:
                out[path] = f.read().strip()
        except OSError:
            pass
    return out


@contextlib.contextmanager
def quiet_machine(timeout_s=1800):
    """Hold the network lock: no bufferbloat network exists while the block runs."""
    lock = open(LOCK_PATH, "a+")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            assert time.monotonic() < deadline, "the network lock stayed taken"
            time.sleep(0.2)
    try:
        yield
    finally:
        lock.close()


def start_run(out, time_s=TRAFFIC_S, extra=()):
    env = dict(os.environ, PYTHONPATH=ROOT, BUFFERBLOAT_NETWORK_WAIT_S="1800")
    argv = [PY, "-m", "bufferbloat", "run", "a1_fifo", "--time", str(time_s),
            "--set", "delay_ms=0", "--out", str(out), *extra]
    log = open(os.path.join(str(out) + ".log"), "w")
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    proc.log_path = log.name
    log.close()
    return proc


def read_state(owner):
    """The state file if ``owner`` (a Popen) wrote it, else None."""
    try:
        with open(STATE_PATH) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if data.get("owner", {}).get("pid") == owner.pid else None


class Watcher:
    """Follows a run's state file; keeps the last (most complete) copy."""

    def __init__(self, proc):
        self.proc, self.state = proc, None

    def poll(self):
        st = read_state(self.proc)
        if st is not None:
            self.state = st
        return st

    def wait_for(self, pred, timeout_s=1800):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            st = self.poll()
            if st is not None and pred(st):
                return st
            if self.proc.poll() is not None:
                return None
            time.sleep(0.05)
        raise AssertionError("timed out waiting for the run")

    def procs(self, word):
        return [(int(p), v["start"]) for p, v in (self.state or {}).get("procs", {}).items()
                if word in v["what"]]


def has(word):
    return lambda st: any(word in v["what"] for v in st.get("procs", {}).values())


def finish(proc, timeout_s=120):
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise AssertionError(f"the run did not end in {timeout_s} s after the fault")


def attempts(out):
    """The run's attempts in ``out``, oldest first, as (directory, record)
    (conftest.run_attempts: all but the last degraded)."""
    return run_attempts(os.path.join(dp, "result.json") for dp, _, fs in os.walk(out)
                        if "result.json" in fs)


def result(out):
    """The run's last attempt: (directory, record)."""
    return attempts(out)[-1]


def csv_rows(run_dir, name):
    path = os.path.join(run_dir, "series", f"{name}.csv")
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        return max(0, sum(1 for _ in f) - 1)


def assert_nothing_left(watcher, links_before, sysctls_before):
    """Everything the run recorded is gone; with the lock held: no new link anywhere,
    the sysctls as they were, no state file."""
    st = watcher.state
    assert st is not None, "the run never recorded its network"
    deadline = time.monotonic() + 10
    alive = []
    while time.monotonic() < deadline:
        alive = [(p, v["what"]) for p, v in st["procs"].items()
                 if same_process(p, v["start"]) and not _zombie(p)]
        if not alive:
            break
        time.sleep(0.1)
    assert not alive, f"processes left behind: {alive}"
    with quiet_machine():
        for name, idx in st["links"].items():
            if idx is not None:
                assert _ifindex(name) != idx, f"link {name} left behind"
        assert _links() - links_before == set(), f"links left: {_links() - links_before}"
        assert _sysctls() == sysctls_before
        assert not os.path.exists(STATE_PATH), "state file left behind"


def _zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _ifindex(name):
    try:
        with open(f"/sys/class/net/{name}/ifindex") as f:
            return int(f.read())
    except OSError:
        return None


@pytest.fixture(scope="module")
def bystanders():
    """Unrelated processes and a veth pair that the suite must never touch."""
    assert os.geteuid() == 0, "fault tests need root"
    procs = [subprocess.Popen(["iperf3", "-s", "-p", "5299"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL),
             subprocess.Popen(["sleep", "3600"]),
             subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)]
    subprocess.run(["ip", "link", "add", "bbx-veth0", "type", "veth", "peer", "name",
                    "bbx-veth1"], check=True)
    ids = {n: _ifindex(n) for n in ("bbx-veth0", "bbx-veth1")}
    starts = {p.pid: proc_start_time(p.pid) for p in procs}

    def check():
        for p in procs:
            assert p.poll() is None and proc_start_time(p.pid) == starts[p.pid], \
                f"an unrelated process was touched: {p.args}"
        for n, i in ids.items():
            assert _ifindex(n) == i, f"an unrelated link was touched: {n}"
    yield check
    for p in procs:
        p.kill()
        p.wait()
    subprocess.run(["ip", "link", "del", "bbx-veth0"], check=False)


@pytest.fixture
def baseline(bystanders):
    with quiet_machine():
        assert not os.path.exists(STATE_PATH), "a state file is there before the test"
        state = (_links(), _sysctls())
    yield state
    bystanders()


# ------------------------------------------------------------------ SIGINT / SIGTERM
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("phase", ["setup", "traffic", "teardown"])
def test_signal_at_a_random_point_leaves_nothing_and_keeps_the_record(
        tmp_path, baseline, sig, phase):
    out = tmp_path / "out"
    proc = start_run(out)
    w = Watcher(proc)
    if phase == "setup":          # while Mininet builds, or just after
        w.wait_for(lambda st: True)
        time.sleep(RNG.uniform(0.0, 1.5))
    elif phase == "traffic":
        w.wait_for(has("iperf3 -c"))
        time.sleep(RNG.uniform(1.0, TRAFFIC_S - 1.0))
    else:                         # the flow has ended: waits, stops, teardown
        w.wait_for(has("iperf3 -c"))
        client = w.procs("iperf3 -c")[0]
        while same_process(*client) and proc.poll() is None:
            w.poll()
            time.sleep(0.02)
        time.sleep(RNG.uniform(0.0, 1.5))
    w.poll()
    signalled = proc.poll() is None
    if signalled:
        os.kill(proc.pid, sig)
    rc = finish(proc)
    with open(proc.log_path) as f:
        log = f.read()
    info = f"seed {SEED}, phase {phase}, rc {rc}:\n{log[-3000:]}"
    assert "Traceback" not in log, info
    assert_nothing_left(w, *baseline)
    run_dir, rec = result(out)
    assert rec["status"] in ("ok", "interrupted"), info
    want_rc = 143 if sig == signal.SIGTERM else 130     # 128 + the signal
    if rec["status"] == "interrupted":
        assert rc == want_rc, info
        assert rec["error"].startswith("interrupted"), rec["error"]
    else:
        assert phase == "teardown", info       # only a run that measured everything
        assert rc in (0, want_rc), info
    if any(w.procs("bufferbloat.measure.sampler")) and phase != "setup":
        # the run got past its start: the series so far are on disk
        assert csv_rows(run_dir, "qdisc") > 0, info
        assert csv_rows(run_dir, "ping") > 0, info
        assert os.path.exists(os.path.join(run_dir, "raw", "sampler.log"))


# ------------------------------------------------------------------ SIGKILL + recovery
def test_sigkill_then_a_new_run_removes_the_leftovers(tmp_path, baseline, bystanders):
    proc = start_run(tmp_path / "killed")
    w = Watcher(proc)
    w.wait_for(has("iperf3 -c"))
    time.sleep(RNG.uniform(0.5, 3.0))
    w.poll()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    st = w.state
    left = [p for p, v in st["procs"].items() if same_process(p, v["start"])]
    assert left, "nothing was left to recover (the test proves nothing)"
    assert os.path.exists(STATE_PATH)
    bystanders()

    proc2 = start_run(tmp_path / "next", time_s=3)
    w2 = Watcher(proc2)
    w2.wait_for(lambda s: True)
    rc = finish(proc2)
    with open(proc2.log_path) as f:
        log = f.read()
    # ok, healthy or not: a run the emulator fell behind on exits EXIT_DEGRADED after
    # its reruns, a complete record all the same (the gate judges no emulator speed)
    assert rc in (0, EXIT_DEGRADED), log[-3000:]
    assert f"killed run (pid {proc.pid})" in log
    run_dir, rec = result(tmp_path / "next")
    assert rec["status"] == "ok"
    _, first = attempts(tmp_path / "next")[0]      # the attempt that found the leftovers
    assert first["recovered"]["owner"] == proc.pid
    assert first["recovered"]["processes"], "the recovery ended none of the leftovers"
    for p in left:
        assert not same_process(p, st["procs"][p]["start"]), f"pid {p} survived recovery"
    # the killed run's record says what happened to it, its series so far are kept
    killed_dir, killed = result(tmp_path / "killed")
    assert killed["status"] == "interrupted" and "killed" in killed["error"]
    assert csv_rows(killed_dir, "qdisc") > 0
    assert_nothing_left(w2, *baseline)
    bystanders()


# ------------------------------------------------------------------ a tool dies mid-run
@pytest.mark.parametrize("tool,word,reason", [
    ("iperf3 server", "iperf3 -s", "iperf3"),
    ("web server", "-m bufferbloat.webserver", "web server"),
    ("sampler", "bufferbloat.measure.sampler", "sampler"),
])
def test_a_tool_killed_mid_run_fails_the_run_with_the_reason(tmp_path, baseline, tool,
                                                             word, reason):
    out = tmp_path / "out"
    proc = start_run(out)
    w = Watcher(proc)
    w.wait_for(has("iperf3 -c"))
    time.sleep(RNG.uniform(1.0, 3.0))
    w.poll()
    [(pid, start)] = w.procs(word)
    assert same_process(pid, start)
    os.kill(pid, signal.SIGKILL)        # by the PID the run recorded, never by name
    rc = finish(proc)
    with open(proc.log_path) as f:
        log = f.read()
    assert rc == 1, log[-3000:]
    run_dir, rec = result(out)
    assert rec["status"] == "failed", rec["error"]
    assert reason in rec["error"] and "killed by signal 9" in rec["error"] \
        or (tool == "sampler" and "sampler died" in rec["error"]), rec["error"]
    assert rec["raw"], "the tools' output is kept"
    for kept in ("long.client.json", "long.server.json", "sampler.log", "web-server.server.txt"):
        assert kept in rec["raw"], (kept, rec["raw"])
    for name in rec["raw"]:
        assert os.path.exists(os.path.join(run_dir, "raw", name))
    assert_nothing_left(w, *baseline)


def test_the_next_run_after_failures_works_normally(tmp_path, baseline):
    proc = start_run(tmp_path / "out", time_s=4)
    w = Watcher(proc)
    w.wait_for(lambda s: True)
    rc = finish(proc)
    with open(proc.log_path) as f:
        log = f.read()
    # ok, healthy or not: a run the emulator fell behind on exits EXIT_DEGRADED after
    # its reruns, a complete record all the same (the gate judges no emulator speed)
    assert rc in (0, EXIT_DEGRADED), log[-3000:]
    run_dir, rec = result(tmp_path / "out")
    assert rec["status"] == "ok" and "recovered" not in rec
    assert csv_rows(run_dir, "qdisc") > 0 and csv_rows(run_dir, "iperf") > 0
    assert_nothing_left(w, *baseline)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-v"]))
