"""Host kernel: the capacity replay (bb-link-trace) on a live HTB + pfifo.

Two network namespaces of the test's own joined by a veth pair; the sender's end has
``htb 1:`` with class ``1:1`` and ``pfifo limit 1000`` as its leaf: the bottleneck.

1. gate: on an idle link, a schedule changing the rate every 10 ms for 1 s: the class
   takes every rate in place (the leaf's handle, its counters, its drops unchanged,
   the loop's change errors 0);
2. acceptance: a square wave of 2 and 8 Mbit/s, 2 s each, one Cubic flow, 12 s: in
   backlogged 100 ms windows delivered / capacity has its median within 5 % and its
   95th percentile deviation within 10 %; the loop misses <= 1 % of its ticks;
3. acceptance: a 60 s mahimahi trace replayed twice sets the same rate in every window.
"""
import json
import os
import subprocess
import time

import pytest

from bufferbloat.measure import linkloop
from bufferbloat.net import linktrace, tracegen
from bufferbloat.results import capacity
from bufferbloat.run.engine import sampler_rt_priority
from tests.retries import band, observe


def _ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _tc(ns, *args):
    return subprocess.run(["ip", "netns", "exec", ns, "tc", *args], check=True,
                          capture_output=True, text=True).stdout


@pytest.fixture
def bottleneck(net_guard):
    """(sender namespace, receiver namespace, shaped device, receiver's address)."""
    tag = f"bblt{os.getpid() % 100000}"
    snd, rcv, dev = f"{tag}s", f"{tag}r", f"{tag}a"
    _ip("netns", "add", snd)
    try:
        _ip("netns", "add", rcv)
        try:
            _ip("-n", snd, "link", "add", dev, "type", "veth", "peer", "name", f"{tag}b",
                "netns", rcv)
            for ns, d, a in ((snd, dev, "10.252.0.1/24"), (rcv, f"{tag}b", "10.252.0.2/24")):
                _ip("-n", ns, "addr", "add", a, "dev", d)
                _ip("-n", ns, "link", "set", d, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
            # one segment per skb: a 64 KB GSO packet would leave HTB in a token debt
            # of 260 ms at 2 Mbit/s, repaid at whatever rate comes next
            _ip("-n", snd, "link", "set", "dev", dev, "gso_max_segs", "1")
            _tc(snd, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1")
            _tc(snd, "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
                "rate", "8mbit", "ceil", "8mbit")
            _tc(snd, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "pfifo",
                "limit", "1000")
            yield snd, rcv, dev, "10.252.0.2"
        finally:
            _ip("netns", "del", rcv)
    finally:
        _ip("netns", "del", snd)


def _holder(ns):
    """A process in ``ns`` whose PID names the namespace for the loop (PID/DEV)."""
    return subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "600"])


def _replay(trace, ns, dev, series, seconds):
    holder = _holder(ns)
    try:
        time.sleep(0.2)
        loop, why = linkloop.start_loop(trace, f"{holder.pid}/{dev}", str(series),
                                        time.monotonic(), rt_priority=sampler_rt_priority())
        assert loop is not None, why
        time.sleep(seconds)
        stats = loop.stop()
    finally:
        holder.terminate()
        holder.wait(timeout=10)
    assert stats is not None and stats["stopped_by"] == "SIGTERM", stats
    return stats


def _leaf(ns, dev):
    out = json.loads(_tc(ns, "-s", "-j", "qdisc", "show", "dev", dev))
    return next(q for q in out if q.get("parent") == "1:1")


def test_rate_changes_in_place_leave_the_leaf_alone(bottleneck, tmp_path):
    snd, _, dev, _ = bottleneck
    before = _leaf(snd, dev)
    trace = linktrace.schedule_trace("0.01:2,0.01:8,0.01:0,0.01:50")
    stats = _replay(trace, snd, dev, tmp_path, 1.0)
    after = _leaf(snd, dev)
    assert stats["change_errors"] == 0, stats
    assert stats["changes"] >= 50, stats        # ~100 windows, a new rate in each
    assert after["handle"] == before["handle"] and after["kind"] == "pfifo"
    assert after["drops"] == before["drops"] == 0
    assert after["options"] == before["options"]
    rows = capacity.read_loop_rows(tmp_path / linkloop.LOOP_CSV)
    assert {r["rate"] for r in rows} >= {2_000_000, 8_000_000, 50_000_000, 1000}
    assert all(r["drops"] == 0 for r in rows)


def _flow(snd, rcv, addr, seconds, tmp_path):
    server = subprocess.Popen(["ip", "netns", "exec", rcv, "iperf3", "-s", "-1", "-B", addr],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        client = subprocess.Popen(["ip", "netns", "exec", snd, "iperf3", "-c", addr, "-t",
                                   str(seconds), "-C", "cubic", "-J"],
                                  stdout=open(tmp_path / "iperf.json", "w"),
                                  stderr=subprocess.DEVNULL)
        return server, client
    except BaseException:
        server.terminate()
        server.wait(timeout=10)
        raise


@pytest.mark.acceptance
def test_square_wave_delivers_the_capacity(bottleneck, tmp_path):
    snd, rcv, dev, addr = bottleneck
    trace = linktrace.schedule_trace("2:2,2:8")
    holder = _holder(snd)
    server, client = _flow(snd, rcv, addr, 13, tmp_path)
    try:
        time.sleep(0.8)      # the flow's slow start, before the replay's windows count
        # at the priority a run gives it (the sampler's: SCHED_FIFO 1 on a host)
        loop, why = linkloop.start_loop(trace, f"{holder.pid}/{dev}", str(tmp_path),
                                        time.monotonic(), rt_priority=sampler_rt_priority())
        assert loop is not None, why
        time.sleep(12)
        stats = loop.stop()
    finally:
        for p in (client, server, holder):
            if p.poll() is None:
                p.terminate()
            p.wait(timeout=15)
    m = capacity.record(str(tmp_path))
    print("square wave:", json.dumps(m), json.dumps(stats))
    # the values with their bounds into the test record (bench/band_spreads.py)
    band("backlogged 100 ms windows with a ratio", m["ratio_windows"], lo=60)
    assert observe("delivered / capacity, 100 ms windows, median", m["ratio_p50"],
                   0.95, 1.05), m
    assert observe("delivered / capacity, 100 ms windows, p95 deviation",
                   m["ratio_dev_p95"], hi=0.10), m
    assert observe("the loop's missed ticks", m["missed_ticks_pct"], hi=1.0, unit="%"), m
    assert m["over_capacity_windows"] == 0, m
    assert (tmp_path / capacity.CAPACITY_CSV).exists()


@pytest.mark.acceptance
def test_a_60s_trace_replayed_twice_sets_the_same_rates(bottleneck, tmp_path):
    snd, _, dev, _ = bottleneck
    path = tmp_path / "walk.trace"
    path.write_text(tracegen.mahimahi_text(tracegen.random_walk(60, 6, seed=7)))
    trace = linktrace.load_trace(str(path))
    assert trace.period_s == 60
    runs = []
    for i in range(2):
        series = tmp_path / f"r{i}"
        _replay(trace, snd, dev, series, 60.5)
        rows = capacity.read_loop_rows(series / linkloop.LOOP_CSV)
        runs.append({r["k"] % 6000: r["rate"] for r in rows})
    common = set(runs[0]) & set(runs[1])
    band("10 ms slots set in both replays", len(common), lo=0.99 * 6000)
    assert all(runs[0][k] == runs[1][k] for k in common)
