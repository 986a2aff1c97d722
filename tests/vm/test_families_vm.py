"""Every experiment family end to end in the project VM (quick profile, short runs), each
showing its study's known qualitative outcome. Rates above what the TCG VM sustains are
scaled (bufferbloat.net.scaling.TCG_MAX_MBIT) with buffers scaled alike, so delays stay the
study's. Each assertion states its margin; they are qualitative by design (the studies'
own claims), with margins wide enough for one short run and narrow enough that the
opposite outcome fails. Every run must first prove that the emulator kept up (its health
verdict, docs/design/health.md): an outcome measured on a degraded run is the emulator's.
"""
import json
import math
import os

import numpy as np
import pytest

from bufferbloat.results import theory
from bufferbloat.results.health import headline
from bufferbloat.results.metrics import traffic_start_s
from bufferbloat.results.records import load_run
from bufferbloat.run.engine import run_point
from bufferbloat.run.watch import RETRY_DEGRADED
from bufferbloat.scenarios import catalogue
from tests.retries import band, observe, require_healthy, run_until_healthy_counted

#: physics and timing bands on emulated runs: the acceptance tier judges them
#: (sudo ./run_tests.sh --acceptance, tests/retries.py); the gate leaves them out
pytestmark = pytest.mark.acceptance


CAT = catalogue()
_RUNS = {}


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return str(tmp_path_factory.mktemp("families"))


def reset_for_retry():
    """Between a missed attempt and the next (tests/conftest.py's sequential rule): the
    next attempt makes its runs afresh."""
    _RUNS.clear()


def run(out, name, time_s, **overrides):
    """Run (once per module) and return (run, metrics rows)."""
    key = (name, time_s, tuple(sorted(overrides.items())))
    if key not in _RUNS:
        # a run the emulator fell behind on is kept and run again once, as a sweep does
        # (bufferbloat.run.watch.RETRY_DEGRADED): the outcome is judged on a healthy run;
        # each rerun counts toward the session's degraded budget (tests/retries.py)
        run_dir, aside = run_until_healthy_counted(
            lambda: run_point(CAT[name], overrides, duration_s=time_s, out_root=out,
                              quick=True, log=print), RETRY_DEGRADED,
            log=lambda line: print(f"{name} {overrides}: {line}"))
        with open(os.path.join(run_dir, "metrics.json")) as f:
            _RUNS[key] = (load_run(run_dir), json.load(f)["metrics"])
        rec = _RUNS[key][0].record
        assert rec["status"] == "ok"
        print(f"{name} {overrides}: {headline(rec.get('health'))}")
    # the outcome below is the network's only if the emulator kept up (docs/design/health.md):
    # work conservation >= 0.95 while backlogged, <= 5 % sampler ticks missed, flows on
    # time, the idle RTT at the configured one, goodput within the link
    health = _RUNS[key][0].record["health"]
    require_healthy(health, f"{name} {overrides}")
    return _RUNS[key]


band_of = band     # where a test's own variable is called ``band``


def metric(rows, scope, name_part, metric_name):
    vals = [r["value"] for r in rows if r["scope"] == scope and name_part in r["name"]
            and r["metric"] == metric_name]
    assert vals, f"no {scope}/{name_part}/{metric_name} in {len(rows)} rows"
    return vals[0]


def test_a_fifo100_rtt_far_above_fifo20_and_pie_holds_its_target(out):
    """A at 1.5 Mbit/s, base RTT 20 ms (5 ms a link). Theory: a full FIFO of N packets
    of 1514 B adds N x 8.07 ms, 161 ms for 20 and 807 ms for 100; Cubic's saw-tooth
    keeps it 60-100 % full (measured RTT p50 115 and 543 ms, FIFO-100's queueing delay
    p50 512-681 ms over five runs, docs/design/health.md and the CI logs). Asserted: each RTT
    above the base plus 30 % of its full queue and below the base plus a full queue
    plus one packet; FIFO-100's queueing delay from 35 % of a full queue to a full one
    (CI and checks, 2026-11-26: RTTs 110-120 and 422-543 ms, queueing delay 393-681
    ms: a 15 s run's median still holds its slow start and first recovery). PIE's median
    delay from half its 20 ms target to 1.5x (measured 18.2-19.5 ms in six runs, 12.3 ms
    in a CI run: a 15 s run's median still holds the start's lower delays). A FIFO limit
    off by 10x, or a PIE target read in the wrong unit, falls outside."""
    _, f20 = run(out, "a1_fifo", 15, buffer_pkts=20)
    _, f100 = run(out, "a1_fifo", 15, buffer_pkts=100)
    _, pie = run(out, "a2_pie", 15)
    rtt20 = metric(f20, "ping", "ping", "rtt_p50_ms")
    rtt100 = metric(f100, "ping", "ping", "rtt_p50_ms")
    print(f"FIFO-20 RTT p50 {rtt20:.0f} ms, FIFO-100 {rtt100:.0f} ms (theory: full queues "
          f"add 161 and 807 ms)")
    full20, full100, base, pkt = 20 * 8.075, 100 * 8.075, 20.0, 8.075
    band("FIFO-20 RTT p50", rtt20, base + 0.3 * full20, base + full20 + pkt, "ms")
    band("FIFO-100 RTT p50", rtt100, base + 0.3 * full100, base + full100 + pkt, "ms")
    pie_delay = metric(pie, "link", "pie", "aqm_delay_p50_ms")
    fifo_delay = metric(f100, "link", "fifo", "qdelay_p50_ms")
    print(f"PIE delay p50 {pie_delay:.1f} ms (target 20), FIFO-100 {fifo_delay:.0f} ms")
    band("PIE delay p50", pie_delay, 10, 30, "ms")
    band("FIFO-100 queueing delay p50", fifo_delay, 0.35 * full100, full100 + pkt, "ms")


#: the floor of the ten-flow fetch time's rise over half the drop rate's rise x 1 s
A_FETCH_RISE_FLOOR = 0.5


def test_a_ten_flows_raise_the_fetch_time(out):
    """Family A's fetch (h1 downloads from h2, as EXPERIMENTS.md has it) sends its data
    on the path where the long flows only send ACKs; what 10 flows add is PIE's higher
    drop probability p on the fetch's SYN, request and ACKs crossing the queue. A lost
    SYN costs the 1 s initial RTO (two cost 3 s), a lost request or tail ACK a 0.2 s+
    RTO. So fetch times are bimodal (measured with the 100 kB page: 0.65 s or +1 s or
    +3 s; 2 of 18 fetches slowed with 1 flow, 9 of 18 with 10) and a mean over a few
    fetches is noisy.

    Theory: the SYN alone is lost with probability p, so at least a share p of the
    fetches is slowed by >= 1 s, and the mean grows by at least p x 1 s. Asserted with
    half that as the margin. The share is binomial: to keep the margin ~3 standard
    errors away the test needs many fetches per run, so it fetches a 10 kB page (the
    mechanism does not depend on the page size) every 0.5 s for 60 s. Measured: 4 % of
    116 fetches slowed with 1 flow, 53 % of 43 with 10 (PIE dropping 2.4 % vs 28 %),
    mean 0.20 vs 1.09 s; another run 2 % of 116 vs 38 % of 24, mean 0.17 vs 0.74 s."""
    knobs = dict(web_every_s=0.5, web_size_bytes=10_000)
    one_run, one = run(out, "a3_pie_flows", 60, flows=1, **knobs)
    ten_run, ten = run(out, "a3_pie_flows", 60, flows=10, **knobs)
    t1 = metric(one, "web", "all", "total_mean_s")
    t10 = metric(ten, "web", "all", "total_mean_s")
    p1 = metric(one, "link", "pie", "drop_pct") / 100
    p10 = metric(ten, "link", "pie", "drop_pct") / 100
    base = float(np.median(_fetch_times(one_run)))        # an undisturbed fetch

    def slowed(r):
        times = _fetch_times(r)
        return float(np.mean(times > base + 0.5)), times.size   # an RTO's worth
    s1, n1 = slowed(one_run)
    s10, n10 = slowed(ten_run)
    print(f"web fetch mean: 1 flow {t1:.2f} s, 10 flows {t10:.2f} s; slowed by > 0.5 s: "
          f"{s1:.0%} of {n1} vs {s10:.0%} of {n10}; PIE drops {p1:.1%} vs {p10:.1%}")
    assert metric(ten, "network", "all", "flows") == 10
    band("fetches at 10 flows", n10, lo=15)      # fetches run one after another: slowed ones mean fewer (24-43)
    band("PIE drop rate, 10 flows over 1", p10 / max(p1, 1e-9), lo=5)   # the mechanism
    band("share slowed, 10 flows - 1, over half the drop rate's rise",
         (s10 - s1) / (0.5 * (p10 - p1)), lo=1)
    # the mean fetch time is the noisier consequence: a binomial count of 1 s and 3 s
    # penalties over 24-43 fetches (relative sd ~35 %, right-skewed: 10 samples 4.71 +-
    # 1.66, least 2.37, where theory's p x 1 s reads 2); its floor is half the share's,
    # a quarter of theory (it was 1 until 2026-11-30: false-fail 0.0018; now 0.0007)
    band("fetch time's rise over half the drop rate's rise x 1 s",
         (t10 - t1) / (0.5 * (p10 - p1) * 1.0), lo=A_FETCH_RISE_FLOOR)



def _fetch_times(r):
    web = r.series("web")
    times = np.asarray(web["total_s"], dtype=float)
    return times[np.isfinite(times)]


def test_a_more_loss_lowers_the_throughput(out):
    """At 10 Mbit/s and 20 ms, 0.5 % loss leaves the link the limit (Mathis et al.'s
    MSS/RTT x sqrt(3/2)/sqrt(p) is 10.0 Mbit/s there); at 4 % the model gives 1448 x 8 /
    0.020 x 1.22 / 0.2 = 3.55 Mbit/s. Measured 9.44 and 3.47 Mbit/s. Asserted: at 0.5 %
    above 80 % of the link, at 4 % within 0.6-1.5x the model (the model's constant
    depends on the loss pattern and delayed ACKs; a loss applied twice, or not at all,
    falls outside)."""
    _, low = run(out, "a4_wifi_loss", 15, variant="fifo", loss_pct=0.5, bottleneck_mbit=10)
    _, high = run(out, "a4_wifi_loss", 15, variant="fifo", loss_pct=4, bottleneck_mbit=10)
    g_low = metric(low, "flow", "long", "throughput_mbit")
    g_high = metric(high, "flow", "long", "throughput_mbit")
    print(f"throughput at 0.5 % loss {g_low:.2f} Mbit/s, at 4 % {g_high:.2f} Mbit/s")
    mathis = 1448 * 8 / 0.020 * math.sqrt(1.5) / math.sqrt(0.04) / 1e6
    band("throughput at 0.5 % loss", g_low, lo=0.8 * 10, unit="Mbit/s")
    band("throughput at 4 % loss over Mathis", g_high / mathis, 0.6, 1.5)


def acked_mbit(run, flow, t0, t1):
    """The flow's goodput between t0 and t1 (s since the run's origin, t0 of the record,
    not the traffic's start) from its acknowledged bytes (the sampler's tcpi_bytes_acked),
    and the span it was taken over: from the first sample at or after t0 to the last at or
    before t1 in which the flow is in the Open state (tcpi_ca_state 0). While a loss is
    being recovered snd_una stands still and then jumps by all that was SACKed meanwhile
    (up to ~0.13 Mbit/s over 9 s behind a.5's 0.8 s FIFO): an end inside a recovery
    counts that data on the wrong side."""
    tcp = run.series("tcp")
    mine = tcp["flow"] == flow
    t, acked = tcp["t"][mine], tcp["bytes_acked"][mine].astype(float)
    open_ = tcp["ca_state"][mine] == 0
    inside = np.nonzero(open_ & (t >= t0) & (t <= t1))[0]
    assert len(inside) >= 2, (flow, t0, t1)
    i, j = inside[0], inside[-1]
    return float(acked[j] - acked[i]) * 8 / (t[j] - t[i]) / 1e6, (t[i], t[j])


def test_a_udp_video_takes_throughput_from_tcp_while_it_runs(out):
    """The 0.5 Mbit/s stream is on from 10 to 20 s of the 30 s traffic, through the FIFO
    that TCP keeps full: TCP's goodput then is what the stream leaves of the link. Theory:
    the stream's frames (1200 bytes + 28 of UDP/IP + 14 of Ethernet) take thr x 1242 / 1200
    of the 1.5 Mbit/s, TCP gets the rest at its payload share (1448 / 1514): 0.94 Mbit/s
    for a stream delivering 0.50. Goodput is acknowledged bytes, as the metrics count it
    (iperf3's sender intervals count bytes written into a send buffer that is still
    growing: 1.34 against 1.56 Mbit/s once, where the link gives 1.43).

    "With the stream" is the span of the stream's own arrivals, less 0.5 s at each end,
    its ends where TCP is not recovering a loss (:func:`acked_mbit`). The stream starts at
    10 s of the traffic (it once started at 10 s of the run: 7-8 s of the traffic, its
    sender's interpreter started at its time; and windows of fixed run times took in up
    to 3 s without it: 1.06-1.10 Mbit/s in CI and here). Measured in four runs since:
    the stream arriving from 10.4-10.7 s, TCP 0.91-0.92 Mbit/s with it (theory 0.94),
    1.41-1.42 after. Asserted: the stream began and
    ended within 0.5 s (+ the FIFO's 0.8 s) of its time; TCP no more than theory allows
    (+5 %), no more than 0.12 Mbit/s (8 % of the link) below it (retransmissions take
    link time too), and at least 15 % below TCP's goodput after the stream."""
    r, rows = run(out, "a5_video", 30, variant="fifo")
    udp = r.series("udp")
    first, last = float(np.min(udp["t_recv"])), float(np.max(udp["t_recv"]))
    start = traffic_start_s(r)
    assert 10 <= first - start <= 11.3 and 19.5 <= last - start <= 21.3, (start, first, last)
    during, (t0, t1) = acked_mbit(r, "long", first + 0.5, last - 0.5)
    after, _ = acked_mbit(r, "long", last + 2, start + 29)
    thr = metric(rows, "udp", "video", "throughput_mbit")
    left = theory.tcp_goodput_ceiling(r.bottleneck_mbit - thr * (1200 + 28 + 14) / 1200)
    print(f"TCP {during:.2f} Mbit/s from {t0 - start:.2f} to {t1 - start:.2f} s of the "
          f"traffic, the stream arriving from {first - start:.2f} to {last - start:.2f} s "
          f"(theory {left:.2f}), {after:.2f} after; "
          f"the stream delivers {thr:.2f}; UDP loss "
          f"{metric(rows, 'udp', 'video', 'loss_pct'):.1f} %, jitter "
          f"{metric(rows, 'udp', 'video', 'jitter_ms'):.1f} ms, one-way p50 "
          f"{metric(rows, 'udp', 'video', 'owd_p50_ms'):.0f} ms")
    band("TCP during the stream", during, left - 0.12, 1.05 * left, "Mbit/s")
    band("TCP during the stream over after", during / after, hi=0.85)
    # the 0.5 Mbit/s stream (10 s), through a FIFO that TCP keeps full: what it loses
    # there (measured 1.7 %) is all it misses. Its throughput is bytes over the span of
    # its arrivals, which the FIFO's changing delay (up to 807 ms) may stretch or shrink
    # by 8 %; a stream sent at the wrong rate, or losing most of its packets, falls out
    loss = metric(rows, "udp", "video", "loss_pct")
    band("stream loss", loss, hi=10, unit="%")
    band("stream throughput", thr, 0.5 * (1 - loss / 100) * 0.88, 0.5 * 1.1, "Mbit/s")


def check_b_scaled_to_the_vms_cap(rec):
    """B's 100 Mbit/s each way, brought down to what the VM sustains: under TCG with the
    default cap (scaling.TCG_MAX_MBIT, 20 Mbit/s, halved for a load both ways) exactly
    x0.1, to 10 Mbit/s; with BUFFERBLOAT_MAX_MBIT the factor that cap gives; where no
    cap applies (a KVM guest), unscaled."""
    from bufferbloat.net import scaling
    from bufferbloat.run import where
    if where.in_project_vm():      # vm/run tells the guest how it is accelerated
        assert os.environ.get("BUFFERBLOAT_GUEST_ACCEL") in ("tcg", "kvm")
    cap = scaling.rate_cap_mbit(CAT["b2_pie_target"])
    default_tcg = (os.environ.get("BUFFERBLOAT_GUEST_ACCEL") == "tcg"
                   and os.environ.get(scaling.MAX_MBIT_ENV) is None)
    print(f"B's scaling: {rec['scaling']} (cap {cap}, default TCG cap: {default_tcg})")
    if default_tcg:
        assert cap == scaling.TCG_MAX_MBIT / 2 == 10.0
        assert rec["scaling"]["factor"] == pytest.approx(0.1, abs=1e-12)
        assert rec["params"]["bottleneck_mbit"] == 10.0
    if cap is None or cap >= 100:
        assert rec["scaling"] is None and rec["params"]["bottleneck_mbit"] == 100
    else:
        assert rec["scaling"]["factor"] == pytest.approx(cap / 100, abs=1e-12)
        assert rec["scaling"]["max_rate_mbit"] == cap
        assert rec["params"]["bottleneck_mbit"] == cap


def test_b_average_latency_grows_with_the_pie_target(out):
    """B on its testbed (the default: docs/design/testbed-b.md): RRUL's ping crosses the
    router's PIE once (the uploads') and the server NIC's fq_codel (the downloads', its
    5 ms target) on the way back, over a ~2 ms idle RTT. Raising PIE's target from 5 to
    20 ms raises the ping's mean by the rise of PIE's queue (the fq_codel's does not
    change): about the targets' 15 ms, less PIE's overshoot of a 5 ms target at 10 Mbit/s
    (docs/design/scaling.md); asserted within 4-20 ms (15, plus 5 for the means' spread over
    15 s). Measured (15 s, x0.1, 3 runs each,
    healthy, 2026-11-27): ping mean 20.5, 19.0, 15.0 ms at target 5 and 29.3, 26.8, 28.7
    at 20 (at 20 s: 17.0 and 31.9); the uploads' mean queueing delay (the sampler's
    backlog / rate, independent of the ping) rose with it by 9.0, 7.9, 11.3 against the
    ping's 8.8, 7.8, 13.7. Asserted too: the ping's rise within 5 ms of the uploads'
    queue's rise; target 20's queueing part (mean minus the idle RTT: 24.7-27.5
    measured) from 0.75x PIE's 20 ms target (fq_codel serves the sparse ping from its
    new-flows list, ahead of the downloads' 5-13 ms queue: little of it is the ping's)
    to 1.6x the 25 ms the two AQMs' targets add (the floor was 0.75 x 25 until
    2026-11-30: 10 samples 23.4 +- 2.1 ms, 2.2 sd above it, false-fail 0.002); PIE's own delay
    estimate within 0.5-2x of 20 ms (18.0-20.2 measured); the server NIC's queue, median,
    within 1-4x of fq_codel's 5 ms target (9.8-13.3 measured: twice the target at this
    rate, where four flows' packets take 1.2 ms each)."""
    r5, low = run(out, "b2_pie_target", 15, **{"qdisc.target_ms": 5})
    r20, high = run(out, "b2_pie_target", 15, **{"qdisc.target_ms": 20})
    check_b_scaled_to_the_vms_cap(r5.record)
    assert r20.record["params"]["reverse_qdisc"] == "fq_codel"
    assert not r20.record["params"]["aqm_both_ways"]
    m5 = metric(low, "ping", "rrul-ping", "rtt_mean_ms")
    m20 = metric(high, "ping", "rrul-ping", "rtt_mean_ms")
    q5 = metric(low, "link", "s0-", "qdelay_mean_ms")
    q20 = metric(high, "link", "s0-", "qdelay_mean_ms")
    idle20 = r20.record["idle_rtt"]["p50_ms"]
    print(f"RRUL ping mean: target 5 ms -> {m5:.1f} ms, target 20 ms -> {m20:.1f} ms "
          f"(idle {idle20:.1f}); the uploads' queue, mean: {q5:.1f} -> {q20:.1f} ms")
    band("RRUL ping mean, target 20 - target 5", m20 - m5, 4, 20, "ms")
    band("ping rise - queue rise", (m20 - m5) - (q20 - q5), -5, 5, "ms")
    band("RRUL ping mean over idle, target 20", m20 - idle20, 0.75 * 20, 1.6 * 25, "ms")
    fwd = metric(high, "link", "s0-", "aqm_delay_p50_ms")
    rev = metric(high, "link", "h2-", "qdelay_p50_ms")
    print(f"target 20 ms: PIE's delay p50 {fwd:.1f} ms; the server NIC's fq_codel "
          f"queue p50 {rev:.1f} ms")
    band("PIE delay p50, target 20", fwd, 10, 40, "ms")
    band("reverse fq_codel queue p50", rev, 5, 20, "ms")


def test_b_pie_holds_its_target_whatever_its_tupdate_and_sways_more_when_slow(out):
    """B.1: tupdate is how often PIE recomputes its drop probability (RFC 8033: p moves
    by alpha (qdelay - target) + beta (qdelay - qdelay_old) each update), so it sets how
    fast PIE reacts, not where it settles: at tupdate 1 ms (one kernel tick: 4 ms at
    HZ=250), 30 (B's default, 32 in ticks; B.2's target-20 run) and 60 ms the uploads'
    PIE holds its 20 ms target, its own delay estimate's median within 0.5-2x; the
    slowest lets the queue sway further before it reacts: the queueing delay's p95 at
    60 ms above that at 1 ms. Measured on B's testbed (the default; 3 runs each, 15 s,
    x0.1, healthy, 2026-11-27): median 18.6, 18.1, 18.8 ms (tupdate 1), 18.0, 18.8, 20.2
    (30), 21.1, 19.8, 21.3 (60); p95 30.8, 29.7, 29.9 against 66.3, 93.2, 41.1 (60). On
    the dumbbell variant (4 runs each): median 21.6, 20.5, 18.3, 21.9 ms (tupdate 1),
    28.3, 24.8, 19.6, 20.7 (60); p95 49.4, 47.0, 43.4, 55.6 against 86.7, 88.1, 146.1,
    71.7 (x1.29-3.4: the spread is why the bound is the direction, not a ratio).

    Since metrics are judged after the warm-up (steady state), the sway is gone: p95 at
    60 ms was not above that at 1 ms in 3 of ~10 attempts (2026-11-29/30: 29.7-30.1
    against 31.1-33.6 ms), the test's only misses. The study's own shape is that
    "tupdate barely matters" (../shared/EXPERIMENTS.md, B): the medians at 60 and 1 ms
    agree within 2/3-1.5x (measured 0.96-1.14), and the p95 difference is recorded, not
    asserted. (The name is kept so the bands keep their samples.)"""
    p95, p50 = {}, {}
    for tupdate in (1, 30, 60):
        if tupdate == 30:
            r, rows = run(out, "b2_pie_target", 15, **{"qdisc.target_ms": 20})
        else:
            r, rows = run(out, "b1_pie_tupdate", 15, **{"qdisc.tupdate_ms": tupdate})
        qd = r.record["qdisc"]
        assert qd["params"]["tupdate_ms"] == tupdate, qd
        if tupdate == 1:    # the kernel counts it in ticks: the run says what it became
            assert any(w.startswith("pie tupdate 1 ms becomes") for w in qd["warnings"]), qd
        fwd = metric(rows, "link", "s0-", "aqm_delay_p50_ms")
        p95[tupdate] = metric(rows, "link", "s0-", "qdelay_p95_ms")
        print(f"tupdate {tupdate} ms: uploads' PIE delay p50 {fwd:.1f} ms (target 20), "
              f"queueing delay p95 {p95[tupdate]:.1f} ms")
        band(f"PIE delay p50, tupdate {tupdate}", fwd, 10, 40, "ms")
        p50[tupdate] = fwd
    # the study's shape: tupdate barely matters; the p95s recorded, not judged (below)
    observe("queueing delay p95, tupdate 60 - tupdate 1", p95[60] - p95[1], unit="ms")
    band("PIE delay p50, tupdate 60 over tupdate 1", p50[60] / p50[1], 2 / 3, 1.5)


def test_b_an_extra_tcp_upload_takes_its_share_and_pie_holds_its_target(out):
    """B.3 with an extra TCP flow beside RRUL's 4 uploads: 5 Cubic flows with one RTT
    share the uploads' link, so the extra one gets about a fifth of the uploads' goodput
    (asserted 0.5-2x of it: a flow left out or taking two shares fails), the link stays
    busy (utilization >= 0.9) and PIE holds its 20 ms target (median 10-40 ms). Measured
    on B's testbed (the default; 3 runs, 15 s, healthy, 2026-11-27): 2.19, 1.95 and 1.82
    Mbit/s against fifths of 1.80, 1.78 and 1.79 (x1.02-1.22); utilization 0.94-0.96;
    PIE 16.6-20.6 ms. On the dumbbell variant (3 runs): 1.79, 2.06 and 2.42 against
    1.77, 1.82 and 1.78 (x1.01-1.36); utilization 0.942-0.963; PIE 17.3-19.8 ms.
    (A UDP flood at the link's rate instead, `extra=udp`, is not in the VM phase: in 15 s
    its outcome is not stable enough to bound. Three quick runs on 2026-11-27, all
    healthy: PIE's delay p50 14.8, 2.1 and 5.8 ms at target 20, utilization 0.963, 0.631
    and 0.937, TCP uploads 2.93, 1.01 and 1.68 Mbit/s. The full profile's 60 s runs are
    steady: 8 of 8 healthy, PIE 18.1-19.7 ms in the 5 at target 20, drops 15.9-18.2 %,
    TCP uploads 1.09-1.79 Mbit/s of 10, utilization 0.84-0.98.)"""
    r, rows = run(out, "b1_pie_tupdate", 15, extra="tcp")
    extra = metric(rows, "flow", "extra-tcp", "throughput_mbit")
    up = metric(rows, "network", "all", "goodput_up_mbit")
    util = metric(rows, "link", "s0-", "utilization")
    fwd = metric(rows, "link", "s0-", "aqm_delay_p50_ms")
    print(f"extra TCP upload {extra:.2f} Mbit/s of the uploads' {up:.2f}; utilization "
          f"{util:.3f}; PIE's delay p50 {fwd:.1f} ms")
    band("extra upload over a fifth of the uploads", extra / (up / 5), 0.5, 2)
    band("utilization", util, lo=0.9)
    band("PIE delay p50", fwd, 10, 40, "ms")


# C's flows come from one NetPerfMeter process (the scenario's default tool), connected
# before the clock starts: the quick sweep's points (20 and 40 flows) are healthy in the
# TCG VM (docs/design/health.md), where iperf3's process per flow launched 40 flows late
C_TIME_S = 30      # statistics from 15 s (the study's second half); flows start within 10 s


def _c(out, variant, flows):
    return run(out, "c1_red_vs_pie", C_TIME_S, variant=variant, flows=flows)


def test_c_red_and_pi_mark_with_ecn_and_keep_the_queue_below_fifo(out):
    q, marks, drops, ce = {}, {}, {}, {}
    for variant in ("red", "pi"):
        r, rows = _c(out, variant, 20)
        sysctls = r.record["sysctls"]
        assert {h: v["net.ipv4.tcp_ecn"] for h, v in sysctls.items()} == \
            {"h1": "1", "h2": "1"}, "the hosts did not negotiate ECN"
        q[variant] = metric(rows, "link", "", "backlog_mean_bytes")
        marks[variant] = metric(rows, "link", "", "marks")
        drops[variant] = metric(rows, "link", "", "drops")
        ce[variant] = sum(x["value"] for x in rows if x["metric"] == "ce_delivered")
    _, fifo = run(out, "c1_red_vs_pie", C_TIME_S, qdisc="fifo", flows=20)
    q["fifo"] = metric(fifo, "link", "", "backlog_mean_bytes")
    print(f"20 flows: mean backlog {q}; marks {marks}; drops {drops}; CE seen by the "
          f"senders {ce}")
    for v in ("red", "pi"):
        # marking, not dropping: far more marks than drops of any kind (early or tail)
        assert marks[v] > 5 * max(drops[v], 1), (v, marks[v], drops[v])
        # the marks reach the senders: CE echoed on most marked segments (a marked
        # segment that is later lost is not delivered)
        assert ce[v] >= 0.5 * marks[v], (v, ce[v], marks[v])
    assert q["red"] < q["fifo"] and q["pi"] < q["fifo"]


def _c_load(out, low, high):
    """C's RED and PI at ``low`` and ``high`` flows: (PI's run at ``high``, its q_ref,
    its mean queue in packets at ``high``, its mean mark probability at (low, high),
    RED's mean backlog in bytes by flows, RED's metric rows at ``high``)."""
    pi = {n: _c(out, "pi", n) for n in (low, high)}
    red = {n: _c(out, "red", n)[1] for n in (low, high)}
    run = pi[high][0]
    qref = run.record["network"]["topology"]["qdisc"]["params"]["q_ref_pkts"]
    qlen = metric(pi[high][1], "link", "", "qlen_mean_pkts")
    p = tuple(metric(pi[n][1], "link", "", "prob_mean_") for n in (low, high))
    backlog = {n: metric(rows, "link", "", "backlog_mean_bytes") for n, rows in red.items()}
    return run, qref, qlen, p, backlog, red[high]


def test_c_pi_holds_its_reference_and_raises_p_with_load_while_red_queue_grows(out):
    r20, qref, qlen, (p10, p20), red, _ = _c_load(out, 10, 20)
    rate = r20.record["health"]["checks"]["controller_rate:s0-eth2:pi"]["rate_hz"]
    print(f"PI: q_ref {qref} pkts, mean queue at 20 flows {qlen:.1f} pkts; mean p "
          f"{p10:.4f} (10 flows) -> {p20:.4f} (20 flows); {rate:.1f} updates/s. "
          f"RED mean backlog {red} bytes (thresholds 4000-12000)")
    # the integral term drives the mean queue to q_ref; the sampled mean sits a little
    # below it (measured 0.81 and 0.73 of q_ref at 20 and 40 flows: the queue's
    # distribution is skewed by its empty intervals), never far above it
    band("PI mean queue over q_ref, 20 flows", qlen / qref, 0.5, 1.25)
    # more flows need a higher mark probability for the same queue (p ~ N^2 in the
    # fluid model): strictly higher
    assert p20 > p10
    # RED's queue rides up its ramp as load grows: higher mean, inside its thresholds
    # (+/- a 536 B packet's slack on the lower side)
    assert red[20] > red[10]
    band("RED mean backlog, 20 flows", red[20], 4000 - 1000, 12000, "B")
    # the controller ran at its configured 160 Hz (an hrtimer, not 4 ms jiffies)
    assert rate == pytest.approx(160, rel=0.03)


def test_c_quick_points_at_40_flows_are_healthy_and_follow_the_load(out):
    """The quick sweep's 40-flow points (run() asserts each healthy): PI still holds
    its reference with a higher mark probability than at 20 flows; RED's queue rides
    higher up its ramp than at 20 flows. The 40 flows came from 4 active processes of 10
    (one passive side, bufferbloat/traffic/netperfmeter/flows.py FLOWS_PER_PROCESS): each
    flow's socket was found (the sampler labels its rows), and the processes' measurements
    started within two of the passive side's 250 ms ticks of each other (+ 100 ms: a
    process is now and then a tick late; measured 0.17 s at 40 flows, 0.27-0.49 s at 60
    in the full profile). One process late by 10 ticks, or a flow never mapped, fails."""
    pi40, qref, qlen, (p20, p40), red, red40 = _c_load(out, 20, 40)
    npm = next(e for e in pi40.record["traffic_results"] if e.get("kind") == "NetPerfMeterRun")
    starts = [p["measurement_start_s"] for p in npm["processes"]]
    print(f"PI at 40 flows: {len(starts)} processes, measurement starts spread "
          f"{max(starts) - min(starts):.3f} s; prepare {pi40.record['phases_s']['prepare']} s")
    assert [p["flows"] for p in npm["processes"]] == [10, 10, 10, 10]
    assert max(starts) - min(starts) <= 0.6
    assert all(f["sport"] for f in npm["flows"]) and len(npm["flows"]) == 40
    flows = [r for r in red40 if r["scope"] == "flow" and r["metric"] == "throughput_mbit"
             and r["value"] > 0]
    print(f"40 flows: PI mean queue {qlen:.1f} pkts (q_ref {qref}), mean p {p20:.4f} (20 "
          f"flows) -> {p40:.4f}; RED mean backlog {red} bytes; {len(flows)} RED flows "
          "that moved data")
    assert len(flows) == 40        # every flow moved data (pre-connected)
    band("PI mean queue over q_ref, 40 flows", qlen / qref, 0.5, 1.25)
    assert p40 > p20
    assert red[40] > red[20]


def test_e_fq_codel_shares_equally(out):
    _, rows = run(out, "e1_aqm_kflows", 10, variant="fq_codel")
    jain = metric(rows, "network", "all", "jain_fairness")
    print(f"FQ-CoDel, 5 equal flows: Jain's index {jain:.3f}")
    # measured 1.000 and 0.928 (CI, 2026-11-26): iperf3's flows, one process each,
    # start up to a second apart under TCG and 10 s is short; NetPerfMeter's pre-
    # connected flows hold 0.98 in test_netperfmeter_vm. Of 5 flows, one that gets
    # nothing scores 0.8 (one at half its share 0.95): 0.9 fails a flow left out
    band("Jain's index, 5 flows", jain, lo=0.9)


#: E at k = 10 runs for the full profile's 15 s, not the quick 10 s. Under TCG an iperf3
#: flow may send its first data seconds after its launch (its control exchange with the
#: server; docs/design/health.md), past the 3 s warm-up, and the health check counts that as
#: idle: a share of the judged window that halves from 10 to 15 s. Measured on
#: 2026-11-27 at k = 10: 3 of 6 attempts degraded at 10 s (and PIE's median at 46 ms in
#: one healthy 10 s run), 2 of 18 at 15 s; the full profile's 15 s points at k = 10 were
#: healthy in 6 of 6. A degraded attempt is run again once and counted
#: (tests/retries.py).
E_TEN_S = 15
#: the floor of E's ten-flow FIFO median, as a share of a full queue (the test's doc)
E_FIFO_FLOOR = 0.3


def test_e_ten_flows_keep_the_link_busy_and_the_fifo_near_full(out):
    """E with k = 10 NewReno flows under FIFO (the quick profile has 5): they keep the
    link busy (utilization >= 0.9) and the 100-packet FIFO (15.1 ms at 80 Mbit/s, scaled
    with the rate in the VM so the delay stays) well filled: a buffer of one BDP (25
    packets at 20 Mbit/s and 15 ms), and flows that all halve at once, drain it empty and
    refill it linearly, a median of half of it; flows that halve apart keep it fuller.
    Asserted: the median within E_FIFO_FLOOR (0.3) to 1x of a full queue plus a packet.
    The floor: theory's median for flows halving at once with the link idle up to 10 %
    of the time (utilization >= 0.9) is (0.5 - 0.1) / 0.9 = 0.44 of full; at x0.25 the
    queue is 25 packets (a packet 4 % of it) refilled in ~3 RTTs (~50 ms), so its
    sawtooth is ~5 of the sampler's 10 ms ticks long: less a third for sampling and
    packet quanta, 0.3. (It was 0.4, half less 20 %, until 2026-11-30: 11 samples,
    9.83 +- 1.88 ms, one at exactly 0.4 of full, false-fail 0.0045; at 0.3 it is
    0.0006, both sides.) Measured (15 s, healthy): 9.73, 7.87, 9.12 and 9.12 ms (0.52-0.64),
    utilization 0.978-0.988; earlier at 10 s 10.3 ms.
    (CoDel at the same point held 23.6 ms, not 5, in one run. Ten Reno flows grow by a
    packet per ~20 ms RTT each, ~500 packets/s in all; at x0.25 each holds ~3 packets,
    so a drop takes back ~1.6 and CoDel must drop ~300/s, against ~75/s at the study's
    80 Mbit/s (~13 packets a flow): 4x the rate, and CoDel's count, which sets its rate
    as sqrt(count) per 100 ms, 16x. Probably a result that does not scale (the scaling
    evidence), not yet shown. k = 20 with iperf3 was degraded twice in the TCG VM: flows
    whose first data came 4-6 s after the start, late starts counted as idle 6-17 % of
    the judged window, E_TEN_S.)"""
    full_ms = 100 * 1514 * 8 / 80e3
    r, rows = run(out, "e1_aqm_kflows", E_TEN_S, variant="fifo", k=10)
    bn = r.record["params"]["bottleneck_mbit"]
    fifo = metric(rows, "link", "s0-", "qdelay_p50_ms")
    util = metric(rows, "link", "s0-", "utilization")
    print(f"E, 10 flows: FIFO queueing delay p50 {fifo:.2f} ms (a full FIFO {full_ms:.1f}"
          f" ms), utilization {util:.3f} (at {bn:g} Mbit/s)")
    band("utilization", util, lo=0.9)
    band("FIFO queueing delay p50", fifo, E_FIFO_FLOOR * full_ms,
         full_ms + 1514 * 8 / (bn * 1e3), "ms")


#: E's AQMs at k = 10 (the quick profile has 5): (variant, the median queueing delay's
#: band in ms at the VM's rate, why). Measured, quick points (10 s, x0.25, 3 runs,
#: healthy, 2026-11-27): RED 0.09, 0.61, 0.00 ms; PIE 18.8, 15.5, 17.6; CoDel 21.2, 18.2,
#: 20.6; utilization 0.959-0.986; drops 440-1856. The full profile's 15 s points: RED
#: 0.61, PIE 16.4, CoDel 21.2 ms. At 15 s (E_TEN_S), healthy: RED 0.00 x4; PIE 18.2,
#: 16.4, 17.0, 15.8; CoDel 25.4, 21.8, 24.8, 23.6; utilization 0.932-0.992; drops
#: 494-2515. RED runs last: its first attempt was degraded in 2 of 3 runs as the
#: session's first ten-flow point (flows late on cold caches), and was healthy when run
#: again.
E_AQMS_AT_TEN = (
    # PIE's default target 15 ms: the median within 0.5-1.5x
    ("pie", (7.5, 22.5), "within 0.5-1.5x PIE's 15 ms target"),
    # CoDel's target 5 ms: at x0.25 ten Reno flows hold ~3 packets each, so CoDel must
    # drop ~4x as often as at 80 Mbit/s, and its control law (drops sqrt(count) per
    # 100 ms) reaches that rate late: it holds 18-26 ms, above its target, under half its
    # unscaled 100-packet limit (60.6 ms at 20 Mbit/s, where a FIFO of 100 packets sits
    # near 0.68 of full, ~41 ms: docs/design/scaling.md, a delay that does not scale)
    ("codel", (5.0, 30.0), "above its 5 ms target, at most half its 100-packet limit"),
    # RED's thresholds are bytes, scaled with the rate: min 3,785 B and max 11,355 B,
    # 1.5 and 4.5 ms at 20 Mbit/s; its drops keep the median below the max threshold.
    # No floor: a delay is never below 0, and RED's median is often 0 (until 2026-11-30
    # the band had a floor of 0, which the normal model of band_spreads read as a side
    # 1 sd below the mean: p = 0.2 a run from a side no run can miss)
    ("red", (None, 4.5), "below RED's max threshold"),
)


#: the utilization's floor at k = 10: 0.9 (the study's "~95 %"), but RED's: at x0.25 its
#: scaled thresholds hold the queue at 1.5-4.5 ms (2.5-7.5 packets) against a BDP of
#: 20 Mbit/s x 15 ms = 24.8 packets, and its ten flows, ~3 packets each, can halve
#: together: a Reno sawtooth halving in step from BDP + B to (BDP + B) / 2 uses
#: 1 - f + f (3 BDP + B) / (4 BDP) of the link, f = (BDP - B) / (BDP + B): 0.82 with B at
#: RED's min threshold, 3/4 with no queue at all. Measured (healthy, 15 s): 0.786, 0.967,
#: 0.985, 0.9985, and 0.93 +- 0.085 over 5 samples: against 0.9, p = 0.38 a run, a
#: band that failed correct code; against theory's 3/4, p ~ 0.02 (normal model)
E_UTIL_FLOOR = {"red": 0.75}


@pytest.mark.parametrize("variant,band,why", E_AQMS_AT_TEN, ids=[v for v, _, _ in E_AQMS_AT_TEN])
def test_e_aqms_at_ten_flows_keep_the_link_busy_and_act(out, variant, band, why):
    """E's expected shape at k = 10 for RED, PIE and CoDel: the link ~95 % used
    (utilization >= 0.9; RED's >= 0.75, :data:`E_UTIL_FLOOR`), the AQM dropping
    (drops > 0) and its queueing delay in its own band (:data:`E_AQMS_AT_TEN`)."""
    r, rows = run(out, "e1_aqm_kflows", E_TEN_S, variant=variant, k=10)
    util = metric(rows, "link", "s0-", "utilization")
    qd = metric(rows, "link", "s0-", "qdelay_p50_ms")
    drops = metric(rows, "link", "s0-", "drops")
    print(f"E, 10 flows, {variant}: utilization {util:.3f}, queueing delay p50 {qd:.2f} ms "
          f"({why}: {band[0] or 0:g}-{band[1]:g}), {drops:.0f} drops")
    band_of("utilization", util, lo=E_UTIL_FLOOR.get(variant, 0.9))
    assert drops > 0
    band_of("queueing delay p50", qd, band[0], band[1], "ms")


def test_d_vegas_keeps_the_queue_that_cubic_fills(out):
    _, cubic = run(out, "d1_cca_paths", 15, variant="lan", cca="cubic")
    _, vegas = run(out, "d1_cca_paths", 15, variant="lan", cca="vegas")
    qc = metric(cubic, "link", "", "backlog_mean_bytes")
    qv = metric(vegas, "link", "", "backlog_mean_bytes")
    print(f"mean backlog: cubic {qc:.0f} B, vegas {qv:.0f} B")
    band("vegas backlog over cubic's", qv / qc, hi=0.5)
    assert metric(vegas, "link", "", "utilization") > 0.8   # while still using the link


def test_d_under_load_the_tools_delay_splits_as_theory_says(out):
    """Study D's one-way delay under a bulk Cubic flow filling the lan path's FIFO (10
    Mbit/s, 2.5 ms a link: base RTT 10 ms, one way d0 = 5 ms; 100 packets: a full queue
    drains in 100 x 1514 x 8 / 10e6 = 121 ms), split in three (docs/reference/one-way-delay.md,
    flowmetrics.delay_parts): the send-buffer wait W, the path's one-way delay P = d0 +
    Q/C + L/C from the sampled backlog, the rest R = D - W - P. Against theory and an
    independent probe (docs/reference/one-way-delay.md, "Still to do ... under load"):
    * P's queueing part agrees with ICMP's: the path's median minus d0 within 10 ms (or
      15 %) of ping's median excess RTT over its idle RTT (ping crosses the same queue
      one way; the return path holds only ACKs);
    * P is physical: at most d0 + a full FIFO's 121 ms + the frame's own 1.2 ms and a
      packet's 1.2 ms of slack (measured max 125.0 ms: path p50 106.8 against ping's
      excess 101.1 ms, rest -0.6 ms, send-buffer wait 506 of the tool's 616 ms);
    * the parts add up: R's median within 10 ms of 0 (head-of-line blocking and the
      tool's loop are in R; measured -0.8 to 0.1 ms on the full profile's runs);
    * the tool's delay is never below the path's (medians), and what it sees beyond the
      path is mostly W (half of it, within 2 ms; measured 443 of 544 ms on fiber with
      the kernel's autotuned send buffer)."""
    r, rows = run(out, "d1_cca_paths", 15, variant="lan", cca="cubic")
    d0 = 5.0
    tool = metric(rows, "flow", "bulk", "owd_p50_ms")
    wait = metric(rows, "flow", "bulk", "sndbuf_wait_p50_ms")
    path = metric(rows, "flow", "bulk", "path_owd_p50_ms")
    path_max = metric(rows, "flow", "bulk", "path_owd_max_ms")
    rest = metric(rows, "flow", "bulk", "owd_rest_p50_ms")
    ping = metric(rows, "ping", "ping", "rtt_p50_ms")
    idle = r.record["idle_rtt"]["p50_ms"]
    print(f"D lan cubic: tool's one-way p50 {tool:.1f} ms = send-buffer wait {wait:.1f} + "
          f"path {path:.1f} (max {path_max:.1f}) + rest {rest:.1f}; ping p50 {ping:.1f} ms "
          f"over an idle {idle:.1f} ms")
    excess = ping - idle
    band("path delay - ping's excess", (path - d0) - excess, -max(10.0, 0.15 * excess),
         max(10.0, 0.15 * excess), "ms")
    assert path_max <= d0 + 121.2 + 2 * 1.2   # a FIFO limit off by 10x fails here
    band("one-way rest p50", rest, -10.0, 10.0, "ms")
    assert tool >= path
    assert wait >= 0.5 * (tool - path) - 2.0


def test_f_pie_holds_the_queue_at_least_5x_below_fifo_on_a_square_wave(out):
    """F on a square-wave link (2 s at 2 Mbit/s, 2 s at 8; the HTB class changed in place
    every 10 ms under the kernel's qdisc): a Cubic flow fills the 1000-packet FIFO at 8
    Mbit/s and the queue drains four times slower at 2 (a full FIFO is 6 s at 2 Mbit/s,
    1.5 s at 8), while PIE judges the queue's delay (15 ms target) and holds it near
    that at either rate, with a transient of about one update (15 ms) after each step
    down, where the same backlog suddenly takes 4x longer. The queueing delay is each
    sample's backlog drained at the rate of the moment. Asserted (the issue's bound): PIE's
    mean at least 5x below FIFO's; FIFO's at least 5x PIE's target (it holds a standing
    queue, not a momentary one). Measured on degraded runs beside other work
    (2026-11-28): FIFO 370-640 ms, PIE 13-25 ms. A PIE target read in the wrong unit,
    or a rate change that reset the AQM's state, breaks the first; a FIFO limit a tenth
    of its size the second."""
    _, fifo = run(out, "f1_aqm_varying", 20, variant="fifo_square")
    _, pie = run(out, "f1_aqm_varying", 20, variant="pie_square")
    f = metric(fifo, "link", "pfifo", "qdelay_mean_ms")
    p = metric(pie, "link", "pie", "qdelay_mean_ms")
    print(f"square wave 2/8 Mbit/s: FIFO mean queueing delay {f:.0f} ms, PIE {p:.1f} ms "
          f"({f / max(p, 1e-9):.0f}x)")
    assert observe("FIFO / PIE mean queueing delay", f / max(p, 1e-9), lo=5), (p, f)
    assert observe("FIFO mean queueing delay", f, lo=5 * 15.0, unit="ms"), f
    observe("PIE mean queueing delay", p, unit="ms")
