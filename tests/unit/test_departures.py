"""The departure trace (bufferbloat/measure/departures.py): the kernel's own text parsed
(a real trace_pipe capture, tests/fixtures/tools/tracefs/), departures paired with their
enqueue, the gaps of an ideal link, a bursty link and a late link told apart, and the
health check at its boundary (docs/design/health.md: p99 gap error <= the burst's time at the
rate + 1 ms)."""
import os

import numpy as np
import pytest

from bufferbloat.core.series import SERIES_COLUMNS
from bufferbloat.measure import departures as dp
from bufferbloat.results import health as hl
from bufferbloat.results.records import load_run
from bufferbloat.results.records_writer import RunWriter

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "fixtures", "tools", "tracefs",
                       "net_dev_queue_xmit_1.5mbit.trace")
SLACK_MS = 1.0            # docs/design/health.md, departure_timing: burst time + 1 ms
MIN_GAPS = 100


def test_the_kernels_text_is_parsed_and_paired():
    events = dp.read_events(FIXTURE)
    with open(FIXTURE) as f:
        lines = [line for line in f if ": net_dev_" in line]
    assert len(events) == len(lines) == 600
    assert {e[1] for e in events} == {"q", "x"}
    assert {e[2] for e in events} == {"s0-eth1", "s0-eth2"}
    rows = dp.departure_rows(events, t0=events[0][0])
    data = [r for r in rows if r[1] == "s0-eth2" and r[2] == 1514]
    assert len(data) > 60
    # 1.5 Mbit/s, one full-size packet every 8.07 ms once the queue holds some
    t = np.array([r[0] for r in data if r[4]])
    gaps = np.diff(t) * 1e3
    assert np.median(gaps) == pytest.approx(1514 * 8 / 1.5e3, rel=0.01)
    # a departure has its enqueue (the fixture starts before the traffic)
    assert all(r[3] is not None and r[3] >= 0 for r in data)


def test_departures_pair_by_address_and_backlog_is_an_enqueue_before_the_last_departure():
    ev = [(1.000, "q", "d", "a", 100), (1.001, "x", "d", "a", 100),
          (1.002, "q", "d", "b", 100), (1.003, "q", "d", "c", 100),
          (1.004, "x", "d", "b", 100), (1.005, "x", "d", "c", 100),
          (1.006, "q", "d", "a", 200),          # address reused after a drop / free
          (1.007, "x", "d", "z", 300)]           # enqueue never seen
    rows = dp.departure_rows(ev, t0=1.0)
    assert [r[4] for r in rows] == [0, 0, 1, 0]       # c was queued when b left
    assert [r[3] for r in rows] == [1.0, 2.0, 2.0, None]
    assert [r[0] for r in rows] == [0.001, 0.004, 0.005, 0.007]


def _link(rate_mbit, n, burst_pkts=1, late_ms=0.0, size=1500):
    """Departures of a backlogged link: packets leave ``burst_pkts`` at a time at the
    start of each burst's time (a token bucket with that burst), ``late_ms`` late."""
    tx = size * 8 / (rate_mbit * 1e6)
    t = np.array([(i // burst_pkts) * burst_pkts * tx + (i // burst_pkts) * late_ms / 1e3
                  for i in range(n)])
    return t, np.full(n, size), np.ones(n)


def test_an_ideal_link_has_no_gap_error_and_a_bursty_one_its_burst():
    t, ln, bl = _link(10, 500)
    s = dp.timing_summary(t, ln, np.full(500, np.nan), bl, 10)
    assert s["gap_error_ms_p99"] == pytest.approx(0, abs=1e-6)
    assert s["within_10pct"] == 1.0 and s["backlogged_gaps"] == 499
    t, ln, bl = _link(10, 500, burst_pkts=10)          # 12 ms bursts at 10 Mbit/s
    s = dp.timing_summary(t, ln, np.full(500, np.nan), bl, 10)
    # within a burst a gap is 0 (error one packet's 1.2 ms); after it 10 packets' time
    assert s["gap_error_ms_p50"] == pytest.approx(1.2, rel=1e-6)
    assert s["gap_error_ms_max"] == pytest.approx(10.8, rel=1e-6)
    assert s["deviation_p50"] == pytest.approx(1.0)


def test_sojourn_excess_is_zero_on_an_ideal_fifo_and_the_lateness_of_a_late_one():
    """Packets arrive at twice the rate; an ideal FIFO link sends each one when the one
    before has been sent: its sojourn is exactly the ideal link's. A link late by L per
    packet makes each packet wait L more for every packet that left after its enqueue,
    its own included (Distrinet-HiFi's check accumulates the lateness ahead of it;
    where its enqueue fell in a late gap of an idle link, one packet's share less)."""
    rate, size, n = 10, 1500, 200
    tx = size * 8 / (rate * 1e6)
    arrive = np.arange(n) * tx / 2
    for late_ms in (0.0, 0.3):
        depart = np.zeros(n)
        for i in range(n):
            ready = arrive[i] if i == 0 else max(arrive[i], depart[i - 1] + tx + late_ms / 1e3)
            depart[i] = ready
        soj = (depart - arrive) * 1e3
        bl = np.r_[0, (arrive[1:] <= depart[:-1]).astype(float)]
        s = dp.timing_summary(depart, np.full(n, size), soj, bl, rate)
        after = np.array([i - np.sum(depart <= arrive[i]) + 1 for i in range(n)])
        # (one packet's share less where its enqueue fell in a late, idle gap)
        assert late_ms * (np.median(after) - 1) - 1e-6 <= s["sojourn_excess_ms_p50"] \
            <= late_ms * np.median(after) + 1e-6
        assert s["gap_error_ms_p99"] == pytest.approx(late_ms, abs=1e-6)


def test_device_names_are_validated_before_they_reach_the_kernels_filter():
    assert dp.dev_filter(["s0-eth2", "h2-eth0"]) == 'name == "s0-eth2" || name == "h2-eth0"'
    for bad in ('x" || name ~ "*', "a" * 16, "", "eth 0"):
        with pytest.raises(ValueError):
            dp.dev_filter([bad])


def test_what_is_missing_is_named(tmp_path):
    assert "not mounted" in dp.missing(root=None) if dp.tracefs_root() is None else True
    root = tmp_path / "tracing"
    root.mkdir()
    assert "instances" in dp.missing(root=str(root))
    (root / "instances").mkdir()
    (root / "events" / "net" / "net_dev_queue").mkdir(parents=True)
    assert "net/net_dev_xmit" in dp.missing(root=str(root))
    (root / "events" / "net" / "net_dev_xmit").mkdir()
    assert dp.missing(root=str(root)) is None


def test_tracefs_is_found_in_the_mount_table(tmp_path):
    m = tmp_path / "mounts"
    m.write_text("sysfs /sys sysfs rw 0 0\nnodev /sys/kernel/tracing tracefs rw 0 0\n")
    assert dp.tracefs_root(str(m)) == "/sys/kernel/tracing"
    m.write_text("sysfs /sys sysfs rw 0 0\n")
    assert dp.tracefs_root(str(m)) is None


def test_tracefs_is_mounted_where_systemd_would_when_nothing_has(tmp_path, monkeypatch):
    mounts = []
    table = {"root": None}
    monkeypatch.setattr(dp, "tracefs_root", lambda: table["root"])
    monkeypatch.setattr(dp.os, "geteuid", lambda: 0)

    def fake_run(argv, **kw):
        mounts.append(argv)
        table["root"] = argv[-1]
        return type("R", (), {"returncode": 0, "stderr": "", "stdout": ""})()
    monkeypatch.setattr(dp.subprocess, "run", fake_run)
    point = tmp_path / "tracing"
    point.mkdir()
    assert dp.mount_tracefs(str(point)) == (str(point), None)
    assert mounts == [["mount", "-t", "tracefs", "nodev", str(point)]]
    # mounted already: nothing is run
    assert dp.mount_tracefs(str(point)) == (str(point), None) and len(mounts) == 1
    # no mount point (a kernel without tracefs), or not root: refused with the reason
    table["root"] = None
    got, why = dp.mount_tracefs(str(tmp_path / "absent"))
    assert got is None and "does not exist" in why and len(mounts) == 1
    monkeypatch.setattr(dp.os, "geteuid", lambda: 1000)
    got, why = dp.mount_tracefs(str(point))
    assert got is None and "needs root" in why and len(mounts) == 1


def test_stale_instances_are_those_of_dead_processes(tmp_path):
    inst = tmp_path / "instances"
    for name in ("bufferbloat-100-1", "bufferbloat-200-3", "other-100", "bufferbloat-x"):
        (inst / name).mkdir(parents=True)
    stale = dp.stale_instances(root=str(tmp_path), alive=lambda pid: pid == 200)
    assert [os.path.basename(p) for p in stale] == ["bufferbloat-100-1"]


def test_the_environment_turns_it_off_or_is_refused(monkeypatch):
    from bufferbloat.core.errors import UsageError
    monkeypatch.setenv(dp.ENV, "off")
    assert dp.wanted() is False
    monkeypatch.setenv(dp.ENV, "auto")
    assert dp.wanted() is True
    monkeypatch.setenv(dp.ENV, "yes please")
    with pytest.raises(UsageError):
        dp.wanted()


# ----------------------------------------------------------------- the health check
def _run(path, burst_pkts=1, late_ms=0.0, n=1000, machine="host", lost=0, shared=False,
         burst_bytes=None, rate=10):
    t, ln, bl = _link(rate, n, burst_pkts=burst_pkts, late_ms=late_ms)
    w = RunWriter(path)
    w.record.update(params={"bottleneck_mbit": rate}, bottleneck_dev="s0-eth2",
                    departures={"traced": True, "devs": ["s0-eth2"],
                                "rates_mbit": {"s0-eth2": rate},
                                "burst_bytes": {"s0-eth2": burst_bytes},
                                "machine": machine, "lost_events": lost,
                                "shared_kernel": shared})
    w.add_rows("qdisc", SERIES_COLUMNS["qdisc"], [
        {"t": 0.0, "dev": "s0-eth2", "handle": "1:", "kind": "htb"},
        {"t": 0.0, "dev": "s0-eth2", "handle": "10:", "kind": "pie"}])
    w.add_rows("departures", SERIES_COLUMNS["departures"],
               [[float(a), "s0-eth2", int(b), None, int(c)] for a, b, c in zip(t, ln, bl)])
    w.close("ok")
    return load_run(path)


def _check(run):
    h = hl.assess(run)
    return h, h["checks"]["departure_timing:s0-eth2:pie"]


ONE_MTU_LIMIT_MS = 1514 * 8 / 10e3 + SLACK_MS      # 2.211 ms at 10 Mbit/s


@pytest.mark.parametrize("late_ms, ok", [(ONE_MTU_LIMIT_MS - 0.05, True),
                                         (ONE_MTU_LIMIT_MS + 0.05, False)])
def test_departure_timing_boundary_with_one_mtu_burst(tmp_path, late_ms, ok):
    """tc's one-MTU burst: the limit is one 1514-byte packet's time (1.211 ms at
    10 Mbit/s) + 1 ms; a link whose every gap is late by the limit +/- 0.05 ms."""
    h, c = _check(_run(tmp_path / "r", late_ms=late_ms))
    assert c["ok"] is ok and (h["verdict"] == "degraded") is (not ok)
    assert c["limit"] == f"<= {1514 * 8 / 10e3 + SLACK_MS:.3f} ms"


@pytest.mark.parametrize("pkts, ok", [(18, True), (19, False)])
def test_departure_timing_allows_the_configured_burst_not_more(tmp_path, pkts, ok):
    """A 20 ms burst configured (25,000 B at 10 Mbit/s: limit 21 ms): clumps of k
    packets leave a gap of (k - 1) x 1.2 ms after them: 18 (20.4 ms) pass, 19 (21.6 ms)
    fail."""
    h, c = _check(_run(tmp_path / "r", burst_pkts=pkts, burst_bytes=25000))
    assert c["ok"] is ok, c


@pytest.mark.parametrize("kw, why", [({"lost": 5}, "lost 5 events"),
                                     ({"shared": True}, "shared"),
                                     ({"n": MIN_GAPS}, "backlogged gaps"),
                                     ({"machine": "kvm"}, "not calibrated on kvm")])
def test_departure_timing_not_judged_where_it_cannot_be(tmp_path, kw, why):
    h, c = _check(_run(tmp_path / "r", late_ms=5.0, **kw))
    assert c["ok"] is None and why in c["not_judged"] and c["value"] >= 4.9
    assert h["verdict"] == "healthy" or not any("departures" in p for p in h["problems"])


def test_departure_timing_is_judged_from_its_minimum_gap_count(tmp_path):
    _, c = _check(_run(tmp_path / "r", late_ms=5.0, n=MIN_GAPS + 1))
    assert c["backlogged_gaps"] == MIN_GAPS and c["ok"] is False


def test_the_compiled_reader_writes_what_the_python_conversion_does(tmp_path):
    """bb-departures on the real capture (a regular file: it reads to its end, then
    waits for more until SIGTERM, like the pipe) writes the rows departure_rows makes
    from the same text, and its counts."""
    import json
    import signal
    import subprocess
    import time

    binary, why = dp.helper_binary()
    assert binary, why
    events = dp.read_events(FIXTURE)
    t0 = events[0][0] - 0.5
    out, stats = tmp_path / "departures.csv", tmp_path / "stats.json"
    proc = subprocess.Popen([binary, FIXTURE, repr(t0), str(out), str(stats)],
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr.readline().strip() == "ready"
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    want = dp.departure_rows(events, t0)
    with open(out) as f:
        header, *lines = f.read().splitlines()
    assert header == ",".join(dp.COLUMNS)
    got = [line.split(",") for line in lines]
    assert len(got) == len(want) == 283       # the capture's xmit lines
    for g, w in zip(got, want):
        assert float(g[0]) == pytest.approx(w[0], abs=1e-6) and g[1] == w[1]
        assert int(g[2]) == w[2] and int(g[4]) == w[4]
        assert (g[3] == "") if w[3] is None else float(g[3]) == pytest.approx(w[3], abs=1e-4)
    st = json.loads(stats.read_text())
    assert st["events"] == 600 and st["departures"] == 283 and st["skipped_lines"] == 0
    assert st["unpaired"] == sum(1 for w in want if w[3] is None)


def test_the_guest_holds_every_traced_event_and_no_run_takes_its_holders():
    """The project VM's guest holds the trace's events in idle instances for its whole
    boot (vm/guest/bb-run), so that a run's enable/disable patches no kernel text (the
    TCG lockups, docs/design/health.md): it must hold exactly the events a run enables, in
    instances that no run's clean-up takes for its own stale ones."""
    from tests.conftest import ROOT
    with open(os.path.join(ROOT, "vm", "guest", "bb-run")) as f:
        text = f.read()
    line = next(ln for ln in text.splitlines() if "for ev in net/" in ln)
    assert sorted(line.split(" in ", 1)[1].rstrip("; do").split()) == sorted(dp.EVENTS)
    assert f"instances/{dp.HOLD_PREFIX}$i" in text
    assert not dp.HOLD_PREFIX.startswith(dp.INSTANCE_PREFIX)

