"""A whole run on the host kernel (HTB + pfifo, Linux bridge, no netem: delay 0): the run
directory holds everything, and the metrics recomputed from it equal the stored ones.

Contracts (the gate, whatever the load): the record is complete, the phases add up to the
wall time, pfifo never holds more than its 100-packet limit, every web fetch is recorded
(one per period started before the end, none early), the metrics recomputed from the
stored data equal the stored ones, the flows are labelled by their source ports.

Bands (measure_until_met: recorded in the gate, judged in the acceptance tier by the
sequential rule, tests/retries.py): one cubic flow fills the FIFO (sampled backlog >= 90
packets on a host; >= 80 under TCG, whose 10 ms samples once peaked at 89); the flow's
sampled srtt and the pings cross the same queue, so their medians agree within 25 %
(srtt is smoothed over 8 RTTs, pings are instantaneous); the link is used (0.9-1.02);
4 flows share it (Jain >= 0.8); the traffic phase's length, the sampler's ticks and the
fetches' start. These were plain asserts in the gate until a loaded CI machine measured
Jain 0.68 (2026-11-29; 2 of 20 archived gate records failed there).
"""
import json
import math
import os

import numpy as np
import pytest

from bufferbloat.results.metrics import compute_metrics
from bufferbloat.results.records import load_run
from bufferbloat.results.records_layout import SCHEMA_VERSION
from bufferbloat.run.engine import run_point
from bufferbloat.run.scenario import Scenario
from bufferbloat.scenarios import catalogue
from tests.retries import band, measure_until_met, observe
from tests.timing import EMULATED_CPU, START_SLACK_S, UNDER_TCG, sampler_timing_misses

DURATION_S = 15


def _metric(rows, scope, metric, name=None):
    vals = [r["value"] for r in rows if r["scope"] == scope and r["metric"] == metric
            and (name is None or r["name"] == name)]
    assert vals, f"no {scope} {metric}"
    return vals[0]


def _first_due(rec):
    """The run time the schedule gave the web fetcher (result.json's ``scheduled_s``)."""
    (entry,) = [e for e in rec["traffic_results"] if e.get("fetch") == "web"]
    return entry["scheduled_s"]


def _fetch_times(web, first_due):
    """(start times, their 3 s grid from the fetcher's due time, when each was due): a
    fetch is due at its grid time or, if the one before outlasted the period, when that
    one ended (web.py: no overlap, the schedule not shifted, not even by a late first
    fetch); it then starts within tests/timing.py's slack (0.1 s on a real-time host, 1 s
    under TCG, where a fetch measured 0.26 s late)."""
    t = web["t"]
    grid = first_due + 3 * np.arange(len(t))
    due = grid.copy()
    due[1:] = np.maximum(grid[1:], t[:-1] + web["total_s"][:-1])
    return t, grid, due


@pytest.mark.bands
def test_fifo_run_records_everything_and_reloads(tmp_path, net_guard):
    scn = catalogue()["a1_fifo"]

    def measure():
        return run_point(scn, {"delay_ms": 0, "web_every_s": 3}, duration_s=DURATION_S,
                         out_root=str(tmp_path), log=lambda *_: None)

    def misses(run_dir):
        # the bounds a stall of the host itself can break (2-6 stalls of 1-22 ms a run
        # measured here, docs/design/health.md): the traffic phase's end, the sampler's ticks,
        # the fetches' start; a miss is printed and the run made again, judged by the
        # sequential rule (tests/retries.py)
        run = load_run(run_dir)
        rec = run.record
        assert rec["status"] == "ok", rec.get("error")
        # (its floor, never short, is the contract asserted next, not a band)
        observe("traffic phase", rec["phases_s"]["traffic"], None, DURATION_S + 0.6, "s")
        assert rec["phases_s"]["traffic"] >= DURATION_S, rec["phases_s"]   # never short
        out = []
        if rec["phases_s"]["traffic"] > DURATION_S + 0.6:
            out.append(f"traffic phase {rec['phases_s']['traffic']} s")
        miss = sampler_timing_misses(rec["sampler"], p99_ms=12.0)
        if miss:
            out.append(f"sampler {miss}")
        web = run.series("web")
        if len(web["t"]):       # (none at all fails the count below)
            t, _, due = _fetch_times(web, _first_due(rec))
            observe(f"latest fetch start after its due time{UNDER_TCG}", np.max(t - due),
                    hi=START_SLACK_S["fetch"], unit="s")
            if np.any(t > due + START_SLACK_S["fetch"]):
                out.append(f"fetches late: {t - due}")
        return out + physics_misses(run)

    def physics_misses(run):
        # what one cubic flow through the 100-packet FIFO does: it fills it, the flow's
        # srtt and the pings cross the same queue, the link is used (bands: a loaded
        # host measured 0.68-0.99 here for what theory puts at 1, so they are judged
        # in the acceptance tier, recorded in the gate)
        out = []
        q = run.series("qdisc")
        peak = float(np.nanmax(q["qlen_pkts"][q["kind"] == "pfifo"]))
        floor = 80 if EMULATED_CPU else 90
        # (its ceiling, the 100-packet limit, is a contract asserted below, not a band)
        if not observe(f"FIFO peak backlog{UNDER_TCG}", peak, floor, None, "pkts"):
            out.append(f"FIFO peak {peak:g} packets < {floor}")
        tcp = run.series("tcp")
        srtt_ms = np.median(tcp["srtt_us"][tcp["t"] > DURATION_S / 2]) / 1000
        ping = run.series("ping")
        rtt = np.median(ping["rtt_ms"][(ping["t"] > DURATION_S / 2)
                                       & ~np.isnan(ping["rtt_ms"])])
        gap = abs(srtt_ms - rtt) / rtt
        if not observe("srtt against ping, relative gap", gap, hi=0.25):
            out.append(f"srtt {srtt_ms:.1f} ms against ping {rtt:.1f} ms")
        # (the stored metrics: the test asserts below that they equal the recomputed)
        util = _metric(run.metrics(), "link", "utilization")
        if not observe("FIFO run utilization", util, 0.9, 1.02):
            out.append(f"utilization {util:.3f}")
        return out

    run_dir, _ = measure_until_met(measure, misses, "a FIFO run on the host")
    run = load_run(run_dir)
    rec = run.record
    assert rec["schema_version"] == SCHEMA_VERSION and rec["status"] == "ok"
    for key in ("scenario", "params", "qdisc", "knobs", "traffic", "machine", "tools",
                "network", "started", "t0_realtime", "realtime_minus_monotonic",
                "duration_s", "wall_s", "sampler", "phases_s"):
        assert key in rec, key
    # where the wall time went: the phases add up to it, the traffic phase is the run's
    # duration (within the 0.5 s watch period), the build and teardown are the network's
    phases = rec["phases_s"]
    assert {"resolve", "build", "sampler_start", "traffic", "grace", "collect", "metrics",
            "health", "teardown", "other"} <= set(phases), phases
    assert math.isclose(sum(phases.values()), rec["wall_s"], rel_tol=0.02, abs_tol=0.2)
    # (the traffic phase within DURATION_S + 0.6 s: held by misses)
    for phase in ("build", "teardown"):
        assert rec["timings"][f"{phase}_s"] > 0
        assert math.isclose(phases[phase], rec["timings"][f"{phase}_s"], abs_tol=1e-3)
    assert rec["machine"]["kernel"] == os.uname().release
    assert rec["params"]["buffer_pkts"] == 100 and rec["qdisc"]["kind"] == "fifo"
    assert "pfifo" in json.dumps(rec["network"]["installed_after"])
    for name in ("qdisc", "tcp", "ping", "iperf", "web"):
        assert run.has(name), name
    for raw in ("long.client.json", "ping.txt"):
        assert run.raw(raw), raw

    # the sampler: 10 ms period; pfifo never holds more than its limit (a kernel fact,
    # whatever the load: it enqueues only below the limit); how full it gets is a band
    q = run.series("qdisc")
    leaf = q["kind"] == "pfifo"
    assert np.nanmax(q["qlen_pkts"][leaf]) <= 100
    assert leaf.sum() >= 0.9 * DURATION_S / 0.01     # (its tick timing: misses)
    tcp = run.series("tcp")
    assert set(tcp["flow"]) == {"long"}

    # every web fetch: one per 3 s period due before the part's stop (none at the stop
    # itself), on a 3 s grid from its scheduled start, never early (their start within
    # the slack: misses). A slot is due at its grid time or when the fetch before it
    # ended, whichever is later (a fetch that outlasts its period delays the next): every
    # slot due before the stop started, the next one was not due yet
    web = run.series("web")
    first = _first_due(rec)
    t, grid, due = _fetch_times(web, first)
    stop = first + DURATION_S
    assert len(t) <= math.ceil(DURATION_S / 3) and np.all(due < stop), (t, due)
    next_grid = first + 3 * len(t)
    next_due = max(next_grid, t[-1] + web["total_s"][-1]) if len(t) else next_grid
    assert next_due >= stop - 1e-6, (t, web["total_s"], stop)
    assert len(t) == math.ceil(DURATION_S / 3) or next_grid < stop, (t, web["total_s"])
    assert np.all(t >= grid - 0.01), (t, grid)

    # metrics recomputed from the stored data alone equal the stored table
    with open(os.path.join(run_dir, "metrics.json")) as f:
        stored = json.load(f)["metrics"]
    again = compute_metrics(load_run(run_dir), warmup_s=rec["warmup_s"])
    assert len(again) == len(stored)
    for a, b in zip(again, stored):
        assert (a["scope"], a["name"], a["metric"]) == (b["scope"], b["name"], b["metric"])
        assert a["value"] == b["value"] or math.isclose(a["value"], b["value"],
                                                        rel_tol=1e-9)
    # (the FIFO's peak, srtt against ping and the utilization: bands, in misses())


#: the floor of 4 FIFO flows' Jain's index: two flows holding the link (the test's note)
JAIN_FLOOR = 0.5


@pytest.mark.bands
def test_parallel_flows_are_labelled_and_sampled(tmp_path, net_guard):
    scn = catalogue()["a3_pie_flows"]

    def measure():
        run = load_run(run_point(scn, {"delay_ms": 0, "qdisc": "fifo", "buffer_pkts": 100,
                                       "flows": 4}, duration_s=10, out_root=str(tmp_path),
                                 log=lambda *_: None))
        return run, compute_metrics(run, warmup_s=2)

    def misses(result):
        # 4 cubic flows of one RTT through one FIFO share it: Jain's index 1 in theory
        # over a long run. Over 8 s of a drop-tail FIFO at a sub-millisecond base RTT a
        # flow can be locked out for seconds (RFC 7567 section 2.2): measured 0.897 +-
        # 0.071 in 10 runs (least 0.754; a flow starved outright gives 0.75), and 0.68
        # on CI once (2026-11-29): a floor of 0.8 missed 1 in 10. The band's floor
        # is what a FIFO sharing at all must beat: 0.5, two of the four flows holding
        # the whole link (5.6 sd below the mean); a judged band, acceptance tier
        jain = _metric(result[1], "network", "jain_fairness")
        print(f"Jain's index of 4 flows: {jain:.3f}")
        # (no ceiling in the band: the index is at most 1 by its definition, a contract
        # asserted below; a ceiling 1.6 sd above the mean read as a side to miss)
        return [] if observe("Jain's index of 4 FIFO flows", jain, JAIN_FLOOR) \
            else [f"Jain's index {jain:.3f} < {JAIN_FLOOR}"]

    (run, rows), _ = measure_until_met(measure, misses, "4 flows through one FIFO")
    tcp = run.series("tcp")
    assert set(tcp["flow"]) == {f"long-{i}" for i in range(1, 5)}
    iperf = run.series("iperf")
    assert set(iperf["flow"]) == {f"long-{i}" for i in range(1, 5)}
    # tcp.csv was written labelled as sampled: each stream's label is the one iperf3
    # gives the stream on that source port (its JSON, read after the run)
    client = json.loads(run.raw("long.client.json"))
    ports = [c["local_port"] for c in client["start"]["connected"]]
    for i, port in enumerate(ports, 1):
        assert set(tcp["sport"][tcp["flow"] == f"long-{i}"]) == {port}
    assert _metric(rows, "network", "flows") == 4
    # the contract whatever the load: the index of 4 flows lies in [1/4, 1] (every byte
    # on one label: 1/4); how near 1 it is, is the band above
    assert 0.25 - 1e-9 <= _metric(rows, "network", "jain_fairness") <= 1.0 + 1e-9


#: iperf3's on-off bursts (a new connection per burst) and paced streams, on the host
#: kernel (study D itself runs NetPerfMeter, whose passive side needs SCTP: the VM's)
IPERF_D = Scenario(
    name="t_iperf_d", description="iperf3 on-off bursts and a paced stream",
    params=dict(bottleneck_mbit=10, delay_ms=0, qdisc="fifo", buffer_pkts=100,
                cca="cubic"),
    traffic=({"kind": "iperf", "name": "onoff", "src": "h1", "dst": "h2",
              "on_off_s": (1, 5), "when": {"load": "onoff"}},
             {"kind": "iperf", "name": "stream", "src": "h1", "dst": "h2", "rate_pct": 50,
              "when": {"load": "stream50"}}),
    knobs=dict(load="onoff"), duration_s=13, quick_duration_s=13)


def test_iperf_on_off_bursts_paced_stream_and_sender_buffer(tmp_path, net_guard):
    """On-off: one connection per 1 s burst every 6 s; stream50: paced at half the
    10 Mbit/s bottleneck (within 10 %); sndbuf_bytes caps tcp_wmem in every host;
    slow_start_after_idle is set in every host and recorded."""
    run = load_run(run_point(IPERF_D, {"load": "onoff", "slow_start_after_idle": 0},
                             duration_s=13, out_root=str(tmp_path), log=lambda *_: None))
    iperf = run.series("iperf")
    assert set(iperf["flow"]) == {"onoff-on1", "onoff-on2", "onoff-on3"}
    origin = run.record["traffic_start_s"]      # the schedule's time zero (s after t0)
    for k, label in enumerate(("onoff-on1", "onoff-on2", "onoff-on3")):
        t = iperf["t_start"][iperf["flow"] == label]
        assert abs(t.min() - origin - 6 * k) < 1.0, (label, t.min(), origin)
    assert {h["net.ipv4.tcp_slow_start_after_idle"]
            for h in run.record["sysctls"].values()} == {"0"}
    run = load_run(run_point(IPERF_D, {"load": "stream50", "sndbuf_bytes": 65536},
                             duration_s=10, out_root=str(tmp_path), log=lambda *_: None))
    rows = compute_metrics(run, warmup_s=2)
    assert abs(_metric(rows, "flow", "throughput_mbit") - 5.0) <= 0.5
    assert run.record["params"]["sndbuf_bytes"] == 65536
    assert run.record["sysctls"]["h1"]["net.ipv4.tcp_wmem"] == "4096 16384 65536"
    assert run.record["sysctls"]["h1"]["net.ipv4.tcp_congestion_control"] == "cubic"
    # the kernel's default where the knob is not set
    assert run.record["sysctls"]["h1"]["net.ipv4.tcp_slow_start_after_idle"] == "1"


@pytest.mark.acceptance
def test_the_page_served_by_the_sender_waits_in_the_bloated_queue(tmp_path, net_guard):
    """FIFO-100 at 1.5 Mbit/s behind one cubic flow h1 -> h2 (mean queueing delay q).

    With web_server=h2 (EXPERIMENTS.md's direction, the default) the page comes back on
    the unloaded direction: only its handshake, request and the ACKs of its slow-start
    rounds cross the queue, at least 3 x q and no page byte (bound: 3-8 q). With
    web_server=h1 (the CS244 direction) the SYN-ACK and each of its >= 3 slow-start
    rounds (IW10: 10 + 20 + 40 packets) cross the queue (>= 4 q), and the page's own
    100 kB cross the 1.5 Mbit/s link behind the cubic flow's packets, which the other
    direction never makes them do: a fetch takes at least its serialisation,
    100 kB x 8 / 1.5 Mbit/s = 0.53 s, longer than the default's.

    Measured on this host (4 pairs, 2026-11-27): default 1.47-1.97 s = 5.4-5.6 q (q 270-356
    ms); CS244 direction 4.17-9.15 s = 11.9-21.4 q, 2.2-7.6 s more than the default; one
    CI pair 3.45 s against 1.86 s (1.6 s more). An earlier bound, "at least twice the
    default", failed in that CI pair (x1.85): the rounds crossing the queue are about as
    many both ways, so the ratio has no floor of 2 in theory, only the page's bytes do.

    That difference is judged on the fetches' medians, not their means: a fetch whose
    segment meets the full FIFO waits an RTO (>= 200 ms, backed off), a tail that moves
    the mean of ~10 fetches by seconds, on the safe side, and widens the spread the
    false-fail rate is computed from (8 runs to 2026-11-30: mean differences 2.49-7.44
    s, 3.61 +- 1.58 s, one run's h1 fetches at 20.8 q; false-fail 0.006 by the normal
    model). The page's serialisation bounds every fetch, so it bounds the median."""
    scn = catalogue()["a1_fifo"]
    means, medians, qdelay_s = {}, {}, {}
    for server in ("h2", "h1"):
        run_dir = run_point(scn, {"delay_ms": 0, "web_server": server}, duration_s=20,
                            out_root=str(tmp_path / server), log=lambda *_: None)
        run = load_run(run_dir)
        web = run.series("web")
        assert set(web["fetch"]) == {"web"}
        rows = compute_metrics(run, warmup_s=run.record["warmup_s"])
        means[server] = _metric(rows, "web", "total_mean_s")
        medians[server] = _metric(rows, "web", "total_p50_s")
        qdelay_s[server] = _metric(rows, "link", "qdelay_mean_ms") / 1000
    print("fetch mean s:", means, "median s:", medians, "queueing delay s:", qdelay_s)
    band("fetch mean over mean queueing delay, server h2",
         means["h2"] / max(qdelay_s["h2"], 1e-9), 3, 8)
    band("fetch mean over mean queueing delay, server h1",
         means["h1"] / max(qdelay_s["h1"], 1e-9), lo=4)
    page_s = 100_000 * 8 / 1.5e6
    band("fetch median, server h1 - server h2", medians["h1"] - medians["h2"], lo=page_s,
         unit="s")


def test_advmss_sets_every_tcp_flows_segment_size(tmp_path, net_guard):
    """``advmss_bytes``: every host's routes advertise it, so a flow whose tool sets no
    MSS (iperf3 without -M, NetPerfMeter, which has no such option) sends segments of at
    most that payload (tcpi_snd_mss: 536 less the 12 bytes of timestamps); without it,
    segments are the MTU's (1448)."""
    def mss_of(**params):
        scn = Scenario(name="t_advmss", description="one flow",
                       params=dict(bottleneck_mbit=10, delay_ms=0, qdisc="fifo",
                                   buffer_pkts=100, cca="cubic", **params),
                       traffic=({"kind": "iperf", "name": "long", "src": "h1",
                                 "dst": "h2"},),
                       duration_s=3, quick_duration_s=3)
        run = load_run(run_point(scn, duration_s=3, out_root=str(tmp_path),
                                 log=lambda *_: None))
        assert run.record["status"] == "ok", run.record.get("error")
        return run, set(run.series("tcp")["mss_bytes"].tolist())
    run, mss = mss_of(advmss_bytes=536)
    assert mss == {524.0}, mss
    for host in ("h1", "h2"):
        assert "advmss 536" in run.record["sysctls"][host]["ip -4 route"]
    _, mss = mss_of()
    assert mss == {1448.0}, mss
