"""Host kernel: the compiled queue sampler (bufferbloat/measure/csampler) on a live HTB + pfifo.

A network namespace of the test's own with one end of a veth pair (HTB 4 Mbit/s, pfifo
limit 50 as its leaf), the other end in the root namespace; a UDP sender in the namespace
offers ~8 Mbit/s through it, so the leaf holds a standing queue and drops.

1. bb-qdisc-sampler alone, 3 s at 10 ms on both ends: ~100 rows per second per qdisc,
   one row per qdisc per tick, sent_bytes never decreasing and growing, the leaf's
   backlog seen, few missed ticks, its stats file written on SIGTERM;
2. the sampler process (``python3 -m bufferbloat.measure.sampler``) with the helper: sampler.json
   says ``qdisc_sampler: "c"`` and carries the helper's ticks and misses; with
   ``BUFFERBLOAT_QDISC_SAMPLER=python`` the same spec is read by the Python loop and
   says so.
"""
import csv
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from bufferbloat.core.series import SERIES_COLUMNS
from bufferbloat.measure import compiled
from tests.conftest import ROOT
from tests.retries import band

SENDER = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
payload = b"x" * 1000
t = time.monotonic()
while True:  # ~1000 datagrams/s = 8 Mbit/s, twice the shaped rate
    for _ in range(10):
        try:
            s.sendto(payload, (sys.argv[1], 9))
        except OSError:
            pass
    t += 0.01
    time.sleep(max(0, t - time.monotonic()))
"""


def _ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@pytest.fixture
def shaped_ns(net_guard):
    """(pid of a process in the namespace, dev in the namespace, dev in the root one)."""
    tag = f"bbcs{os.getpid() % 100000}"
    ns, inner, outer = tag, f"{tag}i", f"{tag}o"
    procs = []
    _ip("netns", "add", ns)
    try:
        _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", ns)
        _ip("addr", "add", "10.251.0.2/24", "dev", outer)
        _ip("link", "set", outer, "up")
        for cmd in (["addr", "add", "10.251.0.1/24", "dev", inner],
                    ["link", "set", inner, "up"], ["link", "set", "lo", "up"]):
            _ip("-n", ns, *cmd)
        tc = ["ip", "netns", "exec", ns, "tc"]
        subprocess.run(tc + ["qdisc", "add", "dev", inner, "root", "handle", "1:", "htb",
                             "default", "1"], check=True)
        subprocess.run(tc + ["class", "add", "dev", inner, "parent", "1:", "classid", "1:1",
                             "htb", "rate", "4mbit", "ceil", "4mbit"], check=True)
        subprocess.run(tc + ["qdisc", "add", "dev", inner, "parent", "1:1", "handle", "10:",
                             "pfifo", "limit", "50"], check=True)
        holder = subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "120"])
        procs.append(holder)
        sender = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", SENDER,
                                   "10.251.0.2"])
        procs.append(sender)
        time.sleep(0.5)
        yield holder.pid, inner, outer
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=10)
        subprocess.run(["ip", "link", "del", outer], capture_output=True)
        _ip("netns", "del", ns)


def _rows(path):
    with open(path) as f:
        rows = list(csv.reader(f))
    return rows[0], [dict(zip(rows[0], r)) for r in rows[1:]]


def _binary():
    binary, why = compiled.qdisc_helper_binary()
    assert binary, why
    return binary


@pytest.mark.acceptance
def test_c_sampler_rows_at_100_per_second(shaped_ns, tmp_path):
    pid, inner, outer = shaped_ns
    out, stats_path = tmp_path / "qdisc.csv", tmp_path / "stats.json"
    t0 = time.monotonic()
    proc = subprocess.Popen([_binary(), "--t0", repr(t0), "--period", "0.01", "--flush",
                             "0.5", "--out", str(out), "--stats", str(stats_path),
                             f"{pid}/{inner}", outer], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(3.0)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    st = json.loads(stats_path.read_text())
    head, rows = _rows(out)
    print("stats:", st)
    assert tuple(head) == SERIES_COLUMNS["qdisc"]
    assert st["stopped_by"] == "SIGTERM" and st["errors"] == {}
    span = st["t_last"] - st["t_first"]
    band("sampled span", span, 2.8, 3.5, "s")
    band("missed ticks' share", st["missed_ticks"]
         / max(st["samples"] + st["missed_ticks"], 1), hi=0.05)
    band("samples per 10 ms of the span", st["samples"] / max(span / 0.01, 1e-9), lo=0.95)

    by = {}
    for r in rows:
        by.setdefault((r["dev"], r["handle"]), []).append(r)
    assert set(by) >= {(inner, "1:"), (inner, "10:")}, set(by)
    root, leaf = by[(inner, "1:")], by[(inner, "10:")]
    assert root[0]["kind"] == "htb" and root[0]["parent"] == "root"
    assert leaf[0]["kind"] == "pfifo" and leaf[0]["parent"] == "1:1"
    assert len(root) == len(leaf) == st["samples"]  # one row per qdisc per tick
    assert all(len(v) == st["samples"] for v in by.values())
    for what, series in (("HTB root", root), ("pfifo leaf", leaf)):
        sent = [int(r["sent_bytes"]) for r in series]
        assert all(b >= a for a, b in zip(sent, sent[1:]))
        # 4 Mbit/s for ~3 s (within 10 %)
        band(f"sent rate, {what}", (sent[-1] - sent[0]) * 8 / span / 1e6, 3.6, 4.4, "Mbit/s")
    ts = [float(r["t"]) for r in leaf]
    assert all(b > a for a, b in zip(ts, ts[1:]))
    band("leaf backlog peak", max(int(r["qlen_pkts"]) for r in leaf), lo=40, unit="packets")
    assert int(leaf[-1]["drops"]) > 0
    assert all(r["prob"] == "" and r["delay_us"] == "" for r in leaf)


def _run_sampler(tmp_path, name, pid, inner, env_mode):
    out_dir = tmp_path / name
    spec = {"t0": time.monotonic(), "out_dir": str(out_dir), "period_s": 0.01,
            "duration_s": 2.0, "rt_priority": 0,
            "qdisc_devs": [{"ns": "x", "pid": pid, "dev": inner}], "flows": []}
    os.makedirs(out_dir)
    spec_path = out_dir / "spec.json"
    spec_path.write_text(json.dumps(spec))
    env = dict(os.environ, PYTHONPATH=ROOT, BUFFERBLOAT_QDISC_SAMPLER=env_mode)
    subprocess.run([sys.executable, "-m", "bufferbloat.measure.sampler", str(spec_path)], env=env,
                   check=True, timeout=60)
    series = out_dir / "series"
    return json.loads((series / "sampler.json").read_text()), _rows(series / "qdisc.csv")


@pytest.mark.acceptance
def test_sampler_process_uses_the_helper(shaped_ns, tmp_path):
    pid, inner, _outer = shaped_ns
    _binary()
    st_c, (head_c, rows_c) = _run_sampler(tmp_path, "c", pid, inner, "c")
    st_py, (head_py, rows_py) = _run_sampler(tmp_path, "py", pid, inner, "python")
    print("c:", st_c)
    print("python:", st_py)
    assert st_c["qdisc_sampler"] == "c"
    assert st_py["qdisc_sampler"] == "python (BUFFERBLOAT_QDISC_SAMPLER=python)"
    assert st_c["samples"] == st_c["qdisc_sampler_stats"]["samples"]
    band("the helper's samples in 2 s", st_c["samples"], lo=180)
    assert st_c["missed_ticks"] == st_c["qdisc_sampler_stats"]["missed_ticks"]
    band("the helper's missed ticks in 2 s", st_c["missed_ticks"], hi=10)
    assert head_c == head_py == list(SERIES_COLUMNS["qdisc"])
    for rows, st in ((rows_c, st_c), (rows_py, st_py)):
        assert len(rows) == 2 * st["samples"]  # htb + pfifo per tick
        assert {r["kind"] for r in rows} == {"htb", "pfifo"}
