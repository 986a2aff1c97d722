"""Host kernel (HTB + pfifo, Linux bridge, no netem: delay 0): the traffic objects
produce every record they promise, with real numbers.

Tolerances are stated at each assertion. Every run is short (3-4 s of traffic)."""
import json
import time

import pytest

from bufferbloat.net.network import Network
from bufferbloat.net.topology import DumbbellTopo
from bufferbloat.traffic.base import Schedule
from bufferbloat.traffic.iperf.flow import Iperf3Flow
from bufferbloat.traffic.ping import PingProbe
from bufferbloat.traffic.rrul import Rrul
from bufferbloat.traffic.udpstream import UdpStream
from bufferbloat.traffic.web import WebFetcher, WebServer
from tests.retries import band, measure_until_met, observe
from tests.timing import EMULATED_CPU, START_SLACK_S, UNDER_TCG


def dumbbell(**kw):
    params = dict(bottleneck_mbit=10, host_mbit=20, buffer_pkts=100, switch="bridge")
    params.update(kw)
    return Network(DumbbellTopo(**params))


def test_every_web_fetch_recorded(net_guard):
    # a fetch every 0.5 s on a host (a 50 kB fetch takes ~45 ms); every 2 s under TCG,
    # where curl's start alone takes a few hundred ms (a fetch measured 0.26 s late) and
    # the sixth fetch, due 0.25 s before the stop, was once cut by it
    every = 2.0 if EMULATED_CPU else 0.5
    with dumbbell() as net:
        small = WebServer(net, "h2", 8080, 50_000).start()
        big = WebServer(net, "h2", 8081, 5_000_000).start()   # 4 s at 10 Mbit/s
        try:
            t0 = time.monotonic()
            # fetches due at 0, 1, ... 5 periods in its window: six; stopped a period
            # after the last (none is due at the stop, whenever the stop comes)
            fetch = WebFetcher(net, "h1", "h2", 8080, every_s=every, t0=t0,
                               expected_size=50_000, name="small",
                               window_s=5.5 * every).start()
            time.sleep(6 * every)
            fetch.stop()
            # then a fetch that outlasts the run: recorded as incomplete, not dropped
            slow = WebFetcher(net, "h1", "h2", 8081, every_s=1.0, t0=t0,
                              expected_size=5_000_000, name="big").start()
            time.sleep(1.5)
            slow.stop()
        finally:
            small.stop()
            big.stop()
    rows = fetch.rows()
    assert len(rows) == 6, fetch.raw_outputs()
    late = [r["t"] - every * i for i, r in enumerate(rows)]
    observe(f"latest web fetch start after its due time{UNDER_TCG}", max(late),
            hi=START_SLACK_S["fetch"] / 2, unit="s")
    for i, r in enumerate(rows):
        assert r["http_code"] == 200 and r["ok"] is True
        assert r["size_bytes"] == 50_000
        assert 0 < r["connect_s"] <= r["ttfb_s"] <= r["total_s"] < 0.5 * every
        # started on schedule: never early (the latest one's lateness, within
        # tests/timing.py's slack on an unloaded host, is recorded above: a loaded host
        # makes it later)
        assert late[i] >= -0.01, (i, r["t"])
        # 50 kB through a 10 Mbit/s link takes ~40 ms (HTB's bursts let a little pass at
        # line rate): the page really crossed the shaped link
        assert r["total_s"] > 0.75 * 50_000 * 8 / 10e6
    assert fetch.summary()["ok"] == 6
    big_rows = slow.rows()
    assert len(big_rows) == 1 and big_rows[0]["ok"] is False
    assert big_rows[0]["http_code"] == "" and big_rows[0]["total_s"] == pytest.approx(
        1.5, abs=START_SLACK_S["fetch"])
    assert slow.summary()["incomplete"] == 1


@pytest.mark.acceptance
def test_udp_streams_under_and_over_the_bottleneck(net_guard):
    with dumbbell(bottleneck_mbit=10) as net:
        t0 = time.monotonic()
        ok = UdpStream(net, "h1", "h2", rate_kbit=1000, size_bytes=1200, start_s=0.2,
                       duration_s=3, t0=t0, port=5600, name="video").start()
        summ = ok.wait()
    assert summ["sent"] == 312  # 3 s / 9.6 ms
    assert summ["loss_pct"] == 0 and summ["received"] == 312
    # payload throughput within 5 % of the configured rate
    band("throughput, 1 Mbit/s stream", summ["throughput_kbit"], 950, 1050, "kbit/s")
    # an empty 10 Mbit/s path: one-way latency ~ 1 ms serialisation (+ scheduling)
    band("latency p50, 1 Mbit/s stream", summ["latency_p50_ms"], hi=5, unit="ms")
    band("latency p99, 1 Mbit/s stream", summ["latency_p99_ms"], hi=20, unit="ms")
    band("jitter, 1 Mbit/s stream", summ["jitter_ms"], hi=5, unit="ms")
    rows = ok.rows()
    assert len(rows) == 312 and list(rows[0]) == ["stream", "seq", "t_sent", "t_recv",
                                                  "size_bytes"]
    # the sender starts at t0 + start_s (its own clock; tests/timing.py: the slack is 20 ms
    # on a real-time host, seconds under TCG, where two Python processes start first), and
    # its packets keep their 9.6 ms spacing from its first (no drift, 20 ms)
    first = rows[0]["t_sent"]
    # nothing starts early: a contract (one-sided timing), asserted apart; the lateness
    # is the band (until 2026-11-30 the band's floor too, 2.1 sd under 6 samples' mean)
    assert first >= 0.2, first
    band(f"first packet sent, after t0{UNDER_TCG}", first, hi=0.2 + START_SLACK_S["udp"],
         unit="s")
    band("first to last packet sent", rows[-1]["t_sent"] - first, 311 * 0.0096 - 0.02,
         311 * 0.0096 + 0.02, "s")
    assert all(r["t_recv"] >= r["t_sent"] for r in rows)

    with dumbbell(bottleneck_mbit=5) as net:
        over = UdpStream(net, "h1", "h2", rate_kbit=10_000, size_bytes=1200,
                         duration_s=3, port=5601, name="over").start()
        summ = over.wait()
    # the bottleneck carries 5e6 / (1242 B frame x 8) = 503 pkt/s of the 1042 sent: 48 %
    # received (+100 buffered packets = 3 %): loss ~ 49 %; tolerance +-8 points
    band("packets sent, 10 Mbit/s stream", summ["sent"], 3125 - 5, 3125 + 5)
    band("loss, 10 Mbit/s stream", summ["loss_pct"], 49 - 8, 49 + 8, "%")
    # throughput is the bottleneck's payload rate: 503 x 1200 x 8 = 4.83 Mbit/s, +-5 %
    band("throughput, 10 Mbit/s stream", summ["throughput_kbit"], 4831 * 0.95, 4831 * 1.05,
         "kbit/s")
    # the full 100-packet FIFO adds 100 x 1242 x 8 / 5 Mbit/s = 199 ms
    band("latency p95, 10 Mbit/s stream", summ["latency_p95_ms"], 199 * 0.85, 199 * 1.15,
         "ms")


#: a prepared stream's first packet after its due time on a real-time host: two wake-ups
#: (the schedule's thread calls start(), then the sender reads its START_AT), not the
#: sender's own clock as for a stream started at t0 (START_SLACK_S["udp"], 20 ms). CI's
#: gate on this 2-core host (load 1-2.6) measured 0.6-27 ms in 15 runs (2026-11-30: 27
#: and 21 ms in two of them): 50 ms
PREPARED_SLACK_S = 0.05


def test_a_prepared_udp_stream_sends_at_its_schedules_time(net_guard):
    """A traffic part's stream is prepared before the run's clock starts (its two
    interpreters take seconds under TCG) and sends when its schedule starts it, at the
    traffic's origin + its start, not at t0 + its start (the origin comes seconds after
    t0): never before that time (asserted), and within 50 ms of it on a real-time host
    (0.5 s under TCG; observed, not judged), and its record says when it was due and
    when it began, for the health check. A prepared stream the run ends before its time
    sends nothing, and both its processes end."""
    with dumbbell() as net:
        t0 = time.monotonic()
        kw = dict(rate_kbit=1000, size_bytes=1200, duration_s=1, t0=t0, send_on_start=True)
        sent = UdpStream(net, "h1", "h2", port=5602, name="sent", **kw).prepare()
        never = UdpStream(net, "h1", "h2", port=5603, name="never", **kw).prepare()
        procs = [sent.sender, sent.receiver, never.sender, never.receiver]
        assert all(p.poll() is None for p in procs)
        origin = time.monotonic() + 0.5        # seconds after t0 under TCG
        schedule = Schedule(origin)
        schedule.add(sent, 0.7)
        sent.scheduled_s = origin + 0.7 - t0     # what a part's start() sets
        schedule.start()
        time.sleep(max(0.0, origin + 0.7 - time.monotonic()) + 0.1)
        summ = sent.wait()
        quiet = never.stop()
        schedule.stop()
        assert all(p.poll() is not None for p in procs)
    slack = 0.5 if EMULATED_CPU else PREPARED_SLACK_S
    due = origin + 0.7 - t0
    assert summ["scheduled_s"] == pytest.approx(due, abs=1e-6)
    # never early (the contract); how late is recorded (a loaded host makes it later)
    assert summ["t_launch"] >= due, (summ["t_launch"], due)
    rows = sent.rows()
    assert rows[0]["t_sent"] >= due, (rows[0]["t_sent"], due)
    observe(f"prepared UDP stream's first packet after its due time{UNDER_TCG}",
            rows[0]["t_sent"] - due, hi=slack, unit="s")
    assert summ["sent"] == 104 and summ["received"] == 104   # 1 s / 9.6 ms
    assert quiet["sent"] == 0 and quiet["received"] == 0 and quiet["t_launch"] is None
    assert "scheduled_s" not in quiet


def test_iperf3_flows_rows_streams_directions_ccas(net_guard):
    with dumbbell() as net:
        t0 = time.monotonic()
        up = Iperf3Flow(net, "h1", "h2", 3, cca="reno", port=5201, name="up", t0=t0)
        par = Iperf3Flow(net, "h1", "h2", 3, cca="cubic", port=5202, parallel=3, name="par",
                         t0=t0, cport=20000)
        # a download started 1 s later by its own thread: h1 (server) sends to h2
        down = Iperf3Flow(net, "h2", "h1", 3, cca="reno", port=5203, direction="down",
                          start_s=1.0, name="down", t0=t0)
        for f in (up, par, down):
            f.start()
        for f in (up, par, down):
            f.wait()
        t_done = time.monotonic() - t0
    # per-interval rows exist and add up to what the sender sent
    for f in (up, par, down):
        rows = [r for r in f.rows() if r["flow"] == f.name]
        assert len(rows) >= 3
        assert sum(r["bytes"] for r in rows) == f.result["end"]["sum_sent"]["bytes"] > 100_000
        assert all(r["t_end"] > r["t_start"] >= 0 for r in rows)
        assert rows[-1]["t_end"] <= t_done
        assert set(f.raw_outputs()) == {f"{f.name}.client.json", f"{f.name}.server.json"}
        json.loads(f.raw_outputs()[f"{f.name}.client.json"])
    # the delayed flow starts ~1 s after t0 (thread + server start: < 0.5 s late)
    assert 1.0 <= down.rows()[0]["t_start"] < 1.0 + START_SLACK_S["iperf3"]
    assert up.rows()[0]["t_start"] < START_SLACK_S["iperf3"]
    # -P 3: three labelled streams, the source ports known
    labels = par.flow_labels()
    assert sorted(labels.values()) == ["par-1", "par-2", "par-3"]
    assert {h for h, _ in labels} == {"h1"}
    # --cport: the labels told to the sampler before the run are iperf3's own
    assert {port: label for (_, port), label in labels.items()} == par.stream_labels()
    assert {r["flow"] for r in par.rows()} == {"par", "par-1", "par-2", "par-3"}
    assert sum(r["bytes"] for r in par.rows() if r["flow"] != "par") == \
        par.result["end"]["sum_sent"]["bytes"]
    assert list(up.flow_labels().values()) == ["up"]
    # -R: the client (h2) received, the server (h1) sent
    assert down.result["start"]["test_start"]["reverse"] == 1
    # at least its fair share of the link with the 4 others (up, par's 3) over its 3 s,
    # 3 s x 10 / 5 Mbit/s = 750 kB: it also has the link alone after they end (measured
    # in the TCG VM: 866 kB sent, 956 kB received in two runs; > 1 MB on this host)
    assert down.server_result["end"]["sum_sent"]["bytes"] > 750_000
    assert down.server_result["end"]["sum_received"]["bytes"] == 0
    assert down.result["end"]["sum_received"]["bytes"] > 750_000
    assert all(r["rtt_us"] != "" for r in down.rows())   # sender-side rows (h1's socket)
    assert down.summary()["sender"] == "h1"
    # the CCA each flow used, as iperf3 reports it
    assert up.summary()["sender_cca"] == "reno"
    assert par.summary()["sender_cca"] == "cubic"
    assert down.summary()["sender_cca"] == "reno"      # -C reaches the sending server
    assert down.server_result["end"]["sender_tcp_congestion"] == "reno"
    # the 10 Mbit/s bottleneck carries up and par: what their receivers got, over the
    # span from the first one's start to the last one's end (the same 3 s on a host; under
    # TCG their processes start apart, tests/timing.py), stays below it (+5 %)
    rows = up.rows() + [r for r in par.rows() if r["flow"] == "par"]
    span = max(r["t_end"] for r in rows) - min(r["t_start"] for r in rows)
    got = sum(f.result["end"]["sum_received"]["bytes"] for f in (up, par))
    assert got * 8 / span / 1e6 < 10.5, (got, span)


@pytest.mark.bands
def test_rrul_and_schedule(net_guard):
    # the scheduled ping runs from 1 s to late_stop, inside an RRUL 1 s longer (host:
    # 2 s, RRUL 3 s); under TCG its process may start up to START_SLACK_S["ping"] late (a
    # stop at 2 s once came before its first probe), so there it stops 1 s after that
    late_stop = 1.0 + START_SLACK_S["ping"] + 1.0 if EMULATED_CPU else 2.0

    def measure():
        with dumbbell() as net:
            t0 = time.monotonic()
            rrul = Rrul(net, "h1", "h2", late_stop + 1.0, t0=t0, cca="cubic").start()
            sched = Schedule(t0)
            late_ping = sched.add(PingProbe(net, "h2", "h1", 0.1, name="late", t0=t0),
                                  at_s=1.0, stop_at_s=late_stop)
            # a flow h2 -> h1 (against the downloads) started at 0.5 s and stopped at 2 s
            cut = sched.add(Iperf3Flow(net, "h2", "h1", 10, port=5401, name="cut", t0=t0),
                            at_s=0.5, stop_at_s=2.0)
            sched.start()
            summ = rrul.wait()
            sched.stop()
        return summ, rrul, sched, late_ping, cut

    def misses(attempt):
        summ, _, sched, late_ping, _ = attempt
        assert summ["errors"] == [] and sched.errors == [], (summ["errors"], sched.errors)
        lrows = late_ping.rows()
        if lrows:
            observe(f"the scheduled ping's first probe{UNDER_TCG}", lrows[0]["t"], 1.0,
                    min(late_stop, 1.0 + START_SLACK_S["ping"]), "s")
        # never early, whatever the machine
        assert not lrows or lrows[0]["t"] >= 1.0, lrows[0]
        # the scheduled ping's start: its process starts while RRUL's eight iperf3s do,
        # and a host stall may delay it past the slack (CI, 2026-11-27: 1.25 s against
        # 1.2); that attempt is printed and run again (the sequential rule, tests/retries.py)
        out = []
        if lrows and not lrows[0]["t"] < min(late_stop, 1.0 + START_SLACK_S["ping"]):
            out.append(f"the scheduled ping's first probe at {lrows[0]['t']} s")
        # its stop: the schedule's thread, woken while RRUL's flows load the machine
        stopped = late_ping.summary()["t_stopped"]
        assert stopped is not None and stopped >= late_stop, stopped      # never early
        observe(f"the scheduled ping's stop after its time{UNDER_TCG}", stopped - late_stop,
                None, START_SLACK_S["ping"], "s")
        if stopped - late_stop > START_SLACK_S["ping"]:
            out.append(f"the scheduled ping stopped at {stopped:.3f} s")
        return out

    (summ, rrul, sched, late_ping, cut), _ = measure_until_met(
        measure, misses, "RRUL with a schedule")
    assert summ["errors"] == []
    assert len(rrul.flows) == 8
    labels = rrul.flow_labels()
    assert sorted(labels.values()) == sorted(
        [f"rrul-up-{i}" for i in range(1, 5)] + [f"rrul-down-{i}" for i in range(1, 5)])
    rows = rrul.rows()
    assert {r["flow"] for r in rows["iperf"]} == set(labels.values())
    for f in rrul.flows:
        assert f.result["start"]["test_start"]["reverse"] == (f.direction == "down")
        assert f.summary()["bytes_sent"] > 100_000
    # uploads share the 10 Mbit/s bottleneck (h1 -> h2)
    assert summ["up_mbit"] == pytest.approx(9.5, abs=1.0)
    assert len(rows["ping"]) >= 25 and all(r["probe"] == "rrul-ping" for r in rows["ping"])
    assert rrul.ping.summary()["received"] >= 25
    # the scheduled ping ran from t = 1 s (its first probe within the start slack,
    # tests/timing.py) until it was stopped (at late_stop, within the slack: misses):
    # one probe every 0.1 s until then, +-2, none after (a probe in flight as the
    # SIGTERM goes: 0.05 s)
    lrows = late_ping.rows()
    assert lrows, late_ping.raw_outputs()
    first = lrows[0]["t"]      # within 1.0 s and the slack: held by misses
    stopped = late_ping.summary()["t_stopped"]
    assert abs(len(lrows) - (stopped - first) / 0.1) <= 2, (first, stopped, len(lrows))
    assert lrows[-1]["t"] <= stopped + 0.05, (lrows[-1], stopped)
    assert set(rrul.raw_outputs()) >= {"rrul-up-1.client.json", "rrul-ping.txt"}
    # the stopped flow keeps the intervals it completed, from ~0.5 s to ~2 s
    assert sched.errors == []
    crows = cut.rows()
    cs = cut.summary()
    assert cs["stopped"]
    if EMULATED_CPU and not crows:
        # under TCG (tests/timing.py) its process and its setup exchanges across the
        # downloads' queue may take the whole 1.5 s: stopped before its clock started, it
        # reports no interval and sent nothing
        assert not cs["bytes_sent"], cs
        return
    assert 1 <= len(crows) <= 2
    # started at 0.5 s; iperf3's setup exchanges cross the downloads' full queue
    # (~0.1 s per round trip here), so its clock starts up to ~0.6 s later (under TCG its
    # process starts late too: before the stop at 2 s)
    assert 0.5 <= crows[0]["t_start"] < (2.0 if EMULATED_CPU else 1.2)
    # its last interval closes when the stop signal arrives
    assert crows[-1]["t_end"] == pytest.approx(2.0, abs=0.1)
    assert cs["error"] == "interrupt - the client has terminated"
    assert cs["bytes_sent"] == sum(r["bytes"] for r in crows) > 0
