"""Two emulated networks on one kernel at the same time, each in a network namespace of
its own (as the workers of a pool run them), on the host kernel: each has its own state
file and lock (/run/bufferbloat/netns-INODE/), neither touches the other nor the initial
namespace, and both leave nothing behind. Then a run SIGKILLed inside a namespace kept
alive by a holder process: the next run in that namespace removes what it left (its
processes by PID and start time, its bridge) and succeeds.

a1_fifo's senders use cubic: a namespace may only use a CCA of the global allowed list,
which the module fixture extends from the initial namespace (as a worker does at start,
isolation.prepare_ccas) and restores afterwards.
"""
import glob
import json
import os
import signal
import subprocess
import time

import pytest
from conftest import ROOT

from bufferbloat.core.signals import same_process
from bufferbloat.net import cleanup, isolation

PY = "/usr/bin/python3"
RUN = [PY, "-m", "bufferbloat", "run", "a1_fifo", "--host", "--quick", "--set",
       "delay_ms=0", "--no-figures"]
EXIT_DEGRADED = 5


@pytest.fixture(scope="module")
def cubic_allowed():
    assert os.geteuid() == 0, "network tests need root"
    assert isolation.in_initial_netns(), "the suite itself runs in the initial namespace"
    before = isolation.read_sysctl(isolation.ALLOWED_CCAS)
    got = isolation.prepare_ccas(["cubic"])
    assert got["unavailable"] == [], got
    after = isolation.read_sysctl(isolation.ALLOWED_CCAS)
    assert "cubic" in after.split()
    yield
    if got["added"] and isolation.read_sysctl(isolation.ALLOWED_CCAS) == after:
        isolation.write_sysctl(isolation.ALLOWED_CCAS, before)


def start(out, prefix, time_s=3):
    """``bufferbloat run`` (argv lists, never a shell) under ``prefix`` (unshare or
    nsenter, which exec it: its PID is the runner's); its own session, so that a kill of
    its group reaches nothing else."""
    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONUNBUFFERED="1")
    log = open(f"{out}.log", "w")
    try:
        proc = subprocess.Popen([*prefix, *RUN, "--time", str(time_s), "--out", str(out)],
                                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    finally:
        log.close()
    proc.log_path = f"{out}.log"
    return proc


def finish(proc, timeout_s=600):
    try:
        rc = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise AssertionError(f"the run did not end in {timeout_s} s") from None
    with open(proc.log_path) as f:
        return rc, f.read()


def records(out):
    """Every result.json under ``out``, oldest first (a degraded run is run again)."""
    paths = sorted(glob.glob(os.path.join(str(out), "a1_fifo", "*", "result.json")))
    assert paths, f"no run recorded under {out}"
    out = []
    for p in paths:
        with open(p) as f:
            out.append(json.load(f))
    return out


def assert_run_ok(rc, log, recs):
    """Exit 0; or 5 when the emulator fell behind (two networks share two cores): every
    run still measured everything (status ok), and the last one is marked degraded."""
    assert rc in (0, EXIT_DEGRADED), log[-3000:]
    assert [r["status"] for r in recs] == ["ok"] * len(recs), log[-3000:]
    if rc == EXIT_DEGRADED:
        assert recs[-1]["health"]["verdict"] == "degraded", \
            "exit 5 must mean the emulator fell behind, and the record say so: " + \
            str(recs[-1]["health"].get("problems"))
    else:
        assert recs[-1]["health"]["verdict"] == "healthy", recs[-1]["health"]["problems"]


def state_files():
    """{path: owner pid} of the state files of every other namespace now."""
    out = {}
    for path in glob.glob(os.path.join(cleanup.NETNS_DIR, "netns-*", "network.json")):
        try:
            with open(path) as f:
                out[path] = json.load(f)["owner"]["pid"]
        except (OSError, ValueError, KeyError):
            pass
    return out


def initial_state_owner():
    try:
        with open(cleanup.STATE_PATH) as f:
            return json.load(f)["owner"]["pid"]
    except (OSError, ValueError, KeyError):
        return None


def links_in(pid):
    """Link names of the network namespace of process ``pid``."""
    out = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", "--", "ip", "-o", "link",
                          "show"], capture_output=True, text=True, check=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def test_two_networks_run_at_once_in_their_own_namespaces(tmp_path, net_guard,
                                                          cubic_allowed):
    dirs_before = set(glob.glob(os.path.join(cleanup.NETNS_DIR, "netns-*")))
    procs = [start(tmp_path / f"out{i}", ["unshare", "--net", "--"]) for i in (1, 2)]
    ours = {p.pid for p in procs}
    together, seen, foreign = False, set(), set()
    while any(p.poll() is None for p in procs):
        now = state_files()
        owners = {pid for pid in now.values() if pid in ours}
        seen |= {path for path, pid in now.items() if pid in ours}
        together |= owners == ours
        if initial_state_owner() in ours:
            foreign.add(cleanup.STATE_PATH)
        time.sleep(0.05)
    results = [finish(p) for p in procs]
    assert not foreign, "a run in its own namespace wrote the initial namespace's record"
    assert together, f"the two networks never existed at the same time (state files: {seen})"
    inodes = set()
    for (rc, log), i in zip(results, (1, 2)):
        recs = records(tmp_path / f"out{i}")
        assert_run_ok(rc, log, recs)
        for rec in recs:                   # each recorded the namespace it was built in
            ns = rec["network"]["netns"]
            assert ns["initial"] is False
            assert ns["state_file"] == f"{cleanup.NETNS_DIR}/netns-{ns['inode']}/network.json"
            assert ns["state_file"] in seen
            inodes.add(ns["inode"])
        assert "recovered" not in recs[-1]
    assert len(inodes) == 2, f"both runs were in one namespace: {inodes}"
    left = set(glob.glob(os.path.join(cleanup.NETNS_DIR, "netns-*"))) - dirs_before
    assert left == set(), f"state files or locks left behind: {left}"
    for inode in inodes:
        assert not os.path.exists(f"{cleanup.NETNS_DIR}/netns-{inode}")


def test_a_killed_run_is_recovered_by_the_next_in_its_namespace(tmp_path, net_guard,
                                                                cubic_allowed):
    holder = subprocess.Popen(["unshare", "--net", "--", "sleep", "600"])
    first = None
    try:
        mine = os.stat("/proc/self/ns/net").st_ino
        deadline = time.monotonic() + 10
        while os.stat(f"/proc/{holder.pid}/ns/net").st_ino == mine:
            assert time.monotonic() < deadline, "the holder never entered its namespace"
            time.sleep(0.02)
        inode = os.stat(f"/proc/{holder.pid}/ns/net").st_ino
        ns_dir = f"{cleanup.NETNS_DIR}/netns-{inode}"
        prefix = ["nsenter", f"--net=/proc/{holder.pid}/ns/net", "--"]

        first = start(tmp_path / "killed", prefix, time_s=8)
        state, deadline = None, time.monotonic() + 300
        while first.poll() is None and time.monotonic() < deadline:
            got = state_files().get(f"{ns_dir}/network.json")
            if got == first.pid:
                with open(f"{ns_dir}/network.json") as f:
                    state = json.load(f)
                if any("iperf3 -c" in v["what"] for v in state["procs"].values()):
                    break
            time.sleep(0.05)
        assert first.poll() is None, finish(first)[1][-3000:]
        time.sleep(1.5)                                # mid-traffic
        with open(f"{ns_dir}/network.json") as f:
            state = json.load(f)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        left = [int(p) for p, v in state["procs"].items() if same_process(p, v["start"])]
        assert left, "nothing was left to recover (the test would prove nothing)"
        assert "s0" in links_in(holder.pid), "the killed run's bridge is not there"
        assert os.path.exists(f"{ns_dir}/network.json")

        second = start(tmp_path / "next", prefix)
        rc, log = finish(second)
        recs = records(tmp_path / "next")
        assert_run_ok(rc, log, recs)
        assert f"killed run (pid {first.pid})" in log, log[-3000:]
        recovered = recs[0]["recovered"]
        assert recovered["owner"] == first.pid
        assert "s0" in recovered["links"], recovered
        # the recovery ended recorded processes only, and some (iperf3 outlives its
        # killed parent); others left alive at the kill may end by themselves before the
        # recovery runs (the sampler dies with its parent: slower under TCG, where three
        # did so first), and none survives it
        assert recovered["processes"], recovered
        assert set(recovered["processes"]) <= set(left), (left, recovered)
        for p in left:
            assert not same_process(p, state["procs"][str(p)]["start"]), \
                f"pid {p} survived recovery"
        killed = records(tmp_path / "killed")
        assert killed[-1]["status"] == "interrupted" and "killed" in killed[-1]["error"]
        assert links_in(holder.pid) == {"lo"}, links_in(holder.pid)
        assert not os.path.exists(ns_dir), os.listdir(ns_dir)
    finally:
        if first is not None and first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
        holder.kill()
        holder.wait()
