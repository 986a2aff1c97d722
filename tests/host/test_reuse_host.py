"""A sweep's network kept between points, on the host kernel (HTB + pfifo, Linux bridge,
no netem: delay 0): the next point's state proven clean, a network of another shape or
whose state is not clean replaced by a fresh one, an interrupted point leaving nothing
behind; and (acceptance) the same point measures the same on a kept and on a fresh
network.

Tolerances of the acceptance test, from the run-to-run spread measured here: six fresh
runs of a1_fifo, delay 0, 100-packet FIFO, 5 s, on this host (bench/bench_overhead.py
--host, 2026-11-29) spread over utilization 0.9989-1.0012 (range 0.0023), the queue's
mean delay 290.6-311.0 ms (range 20.4 ms) and the ping's mean RTT 283.6-307.6 ms (range
24.0 ms). The test compares three runs each way, their difference may be 1.5 times the
range of single runs (0.0035, 31 ms, 36 ms): the means' for utilization, the medians'
for the two delays. A kept network that kept the point before's 20-packet FIFO would
measure ~80 ms instead of ~290.

Why medians for the delays: CUBIC's start-up has two regimes here. In most runs
HyStart ends slow start at a window of 28 packets (ssthresh 28 at 0.3 s) and the FIFO
never drops in 5 s (mean queue delay 288-306 ms); now and then it ends it at ~86, the
window grows past the FIFO, which drops, and the flow times out once: the run's mean
delay is 405-450 ms (2026-11-30 05:46, a fresh run: 406.6 ms against 290.4 and 293.8,
the RTT 418 ms against 286-289; 06:56, a kept run: 442.1 ms, ssthresh 86 at 1.1 s, 7
drops, an RTO at 3.5 s; both kept in .scratch/reuse-misses; in both the window was
still 10 at 0.3 s, where the others' was 28 with HyStart done). One such run of three
moves a mean by ~40 ms, past the tolerance, on either side; it moves a median by
nothing. A reuse fault moves every kept run, so the medians still see it. How many runs
of each side dropped is recorded (not judged): three of the four such runs seen so far
were kept runs (449.5, 449.9 ms on 2026-11-30, measurements.md), so the records are to
tell whether a kept network has that regime more often.
"""
import json
import os
import signal
import statistics
import subprocess
import time

import pytest

from bufferbloat.core.signals import same_process
from bufferbloat.net.hosts import CCA_SYSCTL
from bufferbloat.net.reuse import NetworkKeeper
from bufferbloat.results.metrics import metric_value
from bufferbloat.run import engine
from bufferbloat.run.engine import run_point
from bufferbloat.scenarios import catalogue
from tests.retries import band, keep_missed_runs, observe

DURATION_S = 3
A1 = catalogue()["a1_fifo"]
E1 = catalogue()["e1_aqm_kflows"]
QUIET = dict(log=lambda *_: None)


def _a1(buffer_pkts, **extra):
    return {"delay_ms": "0", "buffer_pkts": str(buffer_pkts), **extra}


def _rec(run_dir):
    with open(os.path.join(run_dir, "result.json")) as f:
        return json.load(f)


def _leaf(rec, key="installed"):
    """The bottleneck leaf as read back at the point's start (or ``installed_after``)."""
    qdiscs = rec["network"][key][f"root/{rec['bottleneck_dev']}"]["qdiscs"]
    return next(q for q in qdiscs if q.get("parent") == "1:1")


def test_a_kept_network_serves_the_next_point_proven_clean(tmp_path, net_guard):
    with NetworkKeeper(enabled=True) as keeper:
        first = run_point(A1, _a1(20, cca="cubic", ecn="1"), duration_s=DURATION_S,
                          out_root=str(tmp_path), keeper=keeper, **QUIET)
        kept = keeper.kept
        assert kept is not None, "a point that ended well hands its network back"
        ended = {p.pid: p for p in kept.procs}        # the first point's tools, by PID
        shells = {h.name: h.pid for h in kept.net.hosts}
        second = run_point(A1, _a1(50, cca="reno"), duration_s=DURATION_S,
                           out_root=str(tmp_path), keeper=keeper, **QUIET)
        assert keeper.kept is kept and {h.name: h.pid for h in kept.net.hosts} == shells
    r1, r2 = _rec(first), _rec(second)
    assert r1["status"] == r2["status"] == "ok"
    assert r1["network"]["reuse"] == {"reused": False, "why": "the first point", "points": 1}
    reuse = r2["network"]["reuse"]
    assert reuse["reused"] is True and reuse["points"] == 2, reuse
    # the verdict records which network it was
    assert r1["health"]["network"]["reused"] is False
    assert r2["health"]["network"] == {"reused": True, "why": reuse["why"]}
    # no build, no teardown in either point's wall time but the one each did
    assert "teardown" not in r1["phases_s"] and "build" in r1["phases_s"]
    assert "build" not in r2["phases_s"] and r2["phases_s"]["reconfigure"] > 0
    clean = reuse["clean"]
    # no process of the previous point alive
    assert ended and all(p.poll() is not None and not same_process(pid, None)
                         for pid, p in ended.items())
    assert clean["processes_left"] == 0
    # its TIME-WAIT sockets (iperf3's, ping's, the fetches') destroyed, none left
    assert clean["sockets_destroyed"] >= 1
    assert clean["qdiscs"] == "replaced" and clean["routes"] == "as built"
    assert {"tcp_metrics_flushed", "neighbours_flushed"} <= set(clean)
    # the queue is the second point's, new: its limit, its counters from zero
    assert _leaf(r1)["options"]["limit"] == 20 and _leaf(r2)["options"]["limit"] == 50
    assert _leaf(r1, "installed_after")["bytes"] > 200_000
    assert _leaf(r2)["bytes"] < 20_000 and _leaf(r2)["backlog"] == 0
    # the interfaces' counters go on: read as the second point's baseline
    base1, base2 = (r["network"]["baseline"]["interfaces"] for r in (r1, r2))
    port = f"root/{r2['bottleneck_dev']}"
    assert base2[port]["tx_bytes"] > base1[port]["tx_bytes"] + 200_000
    # sysctls written again and read back: its CCA, and ECN back to the fresh value
    assert r1["sysctls"]["h1"][CCA_SYSCTL] == "cubic"
    assert r2["sysctls"]["h1"][CCA_SYSCTL] == "reno"
    assert r1["sysctls"]["h1"]["net.ipv4.tcp_ecn"] == "1"
    assert r2["sysctls"]["h1"]["net.ipv4.tcp_ecn"] != "1"
    assert r2["sysctls"]["h1"]["ip -4 route"] == r1["sysctls"]["h1"]["ip -4 route"]
    assert r2["health"]["verdict"] in ("healthy", "degraded")


def _wait_until_in_netns_of(proc, pid, timeout_s=10.0):
    """Return once ``proc`` runs sleep in the network namespace of ``pid``."""
    want = os.stat(f"/proc/{pid}/ns/net").st_ino
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with open(f"/proc/{proc.pid}/comm") as f:
                comm = f.read().strip()
            there = os.stat(f"/proc/{proc.pid}/ns/net").st_ino == want
        except FileNotFoundError:
            comm, there = None, False
        if comm == "sleep" and there:
            return
        assert proc.poll() is None, "nsenter could not enter h1's namespace"
        assert time.monotonic() < deadline, "nsenter did not become sleep in h1's namespace"
        time.sleep(0.01)


def test_another_shape_a_dirty_state_or_an_interrupt_gets_a_fresh_network(
        tmp_path, net_guard, monkeypatch):
    out = str(tmp_path)
    stray = None
    try:
        with NetworkKeeper(enabled=True) as keeper:
            run_point(A1, _a1(20), duration_s=DURATION_S, out_root=out, keeper=keeper,
                      **QUIET)
            # a process of ours, in h1's namespace, that the network did not start
            shell = next(h.pid for h in keeper.kept.net.hosts if h.name == "h1")
            stray = subprocess.Popen(["nsenter", "-t", str(shell), "-n", "--", "sleep",
                                      "120"], start_new_session=True)
            # nsenter becomes sleep in h1's namespace after it starts: wait for that
            _wait_until_in_netns_of(stray, shell)
            dirty = _rec(run_point(A1, _a1(20), duration_s=DURATION_S, out_root=out,
                                   keeper=keeper, **QUIET))
            assert dirty["network"]["reuse"]["reused"] is False
            assert "not proven clean: processes other than the hosts' shells" in \
                dirty["network"]["reuse"]["why"] and "(sleep)" in \
                dirty["network"]["reuse"]["why"]
            assert dirty["phases_s"]["teardown"] > 0 and dirty["phases_s"]["build"] > 0
            k2 = {"k": "2", "rtt_ms": "0", "delay_ms": "0", "qdisc": "fifo"}
            other = _rec(run_point(E1, k2, duration_s=DURATION_S, out_root=out,
                                   keeper=keeper, **QUIET))
            assert other["network"]["reuse"]["reused"] is False
            assert other["network"]["reuse"]["why"].startswith(
                "another network: its topology differ")

            def interrupted(ctx):
                raise KeyboardInterrupt
            monkeypatch.setattr(engine, "measure", interrupted)
            with pytest.raises(KeyboardInterrupt):
                run_point(E1, k2, duration_s=DURATION_S, out_root=out, keeper=keeper,
                          **QUIET)
            # the interrupted point had the kept network, and removed it
            assert keeper.kept is None
            assert keeper.why_not.startswith("the point before ended with "
                                             "KeyboardInterrupt")
    finally:
        if stray is not None:
            stray.send_signal(signal.SIGKILL)
            stray.wait()
    recs = [_rec(os.path.join(root, d)) for root, dirs, _ in os.walk(out) for d in dirs
            if os.path.isfile(os.path.join(root, d, "result.json"))]
    assert sorted(r["status"] for r in recs) == ["interrupted", "ok", "ok", "ok"]
    interrupted_rec = next(r for r in recs if r["status"] == "interrupted")
    assert interrupted_rec["network"]["reuse"]["reused"] is True


#: the acceptance test's tolerances (the module's doc): 1.5 x the range of six fresh runs
TOLERANCE = {"utilization": 0.0035, "qdelay_mean_ms": 31.0, "rtt_mean_ms": 36.0}
#: how the three runs of each side are summarised (the module's doc: why the median)
SUMMARY = {"utilization": ("mean", statistics.mean),
           "qdelay_mean_ms": ("median", statistics.median),
           "rtt_mean_ms": ("median", statistics.median)}
REPS = 3


def _measured(run_dir):
    with open(os.path.join(run_dir, "metrics.json")) as f:
        rows = json.load(f)["metrics"]
    return {"utilization": metric_value(rows, "utilization", "link"),
            "qdelay_mean_ms": metric_value(rows, "qdelay_mean_ms", "link"),
            "rtt_mean_ms": metric_value(rows, "rtt_mean_ms", "ping")}


@pytest.mark.acceptance
def test_the_same_point_measures_the_same_on_a_kept_and_on_a_fresh_network(tmp_path,
                                                                         net_guard):
    """Three runs of a1_fifo (100 packets, 5 s) each on a network kept from a point with a
    20-packet FIFO before it, and three on a fresh network: their means (utilization)
    and medians (the delays) agree within TOLERANCE (the module's doc)."""
    out = str(tmp_path)
    kept, fresh = [], []
    with NetworkKeeper(enabled=True) as keeper:
        for rep in range(1, REPS + 1):
            run_point(A1, _a1(20), duration_s=5, out_root=out, keeper=keeper, rep=rep,
                      **QUIET)
            kept.append(run_point(A1, _a1(100), duration_s=5, out_root=out, rep=rep,
                                  keeper=keeper, **QUIET))
    for rep in range(1, REPS + 1):
        fresh.append(run_point(A1, _a1(100), duration_s=5, out_root=out, rep=rep,
                               **QUIET))
    for d in kept + fresh:
        assert _rec(d)["status"] == "ok"
    assert all(_rec(d)["health"]["network"]["reused"] for d in kept)
    assert not any(_rec(d)["health"]["network"]["reused"] for d in fresh)
    got = {}
    for name, dirs in (("kept", kept), ("fresh", fresh)):
        values = [_measured(d) for d in dirs]
        got[name] = {m: SUMMARY[m][1]([v[m] for v in values]) for m in TOLERANCE}
    print(f"kept network: {got['kept']}; fresh network: {got['fresh']}")
    # which start-up regime each run had (the module's doc): recorded, not judged, so
    # that the records tell whether a kept network has the overflowing one more often
    for name, dirs in (("kept", kept), ("fresh", fresh)):
        observe(f"{name} runs whose FIFO dropped in slow start, of {REPS}",
                sum(_leaf(_rec(d), "installed_after")["drops"] > 0 for d in dirs))
    for metric, tol in TOLERANCE.items():
        try:
            band(f"kept - fresh, {SUMMARY[metric][0]} {metric}",
                 got["kept"][metric] - got["fresh"][metric], -tol, tol,
                 "ms" if metric.endswith("_ms") else "")
        except AssertionError as exc:
            # each run's value and verdict in the record: a miss names the run that made
            # it (2026-11-29: kept - fresh 103 ms once in 5 samples, the runs lost with
            # their tmp_path); the six runs' directories are kept for a look
            raise AssertionError(f"{exc}; {_each_run(kept, fresh, metric)}; the runs are "
                                 f"kept in {keep_missed_runs(out, 'reuse')}") from None


def _each_run(kept, fresh, metric):
    return "; ".join(
        f"{name}: " + ", ".join(
            f"{_measured(d)[metric]:.4g} ({_rec(d)['health']['verdict']}, traffic "
            f"{_rec(d)['phases_s'].get('traffic', float('nan')):.2f} s)" for d in dirs)
        for name, dirs in (("kept", kept), ("fresh", fresh)))
