"""Studies D and E in the project VM (healthy runs only: an outcome measured on a run the
emulator fell behind in is the emulator's, docs/design/health.md):

* NetPerfMeter through the pipeline (tests/host/test_netperfmeter_host.py's checks);
* D: an on-off flow is ONE connection whose window carries over an idle period with
  net.ipv4.tcp_slow_start_after_idle=0 and restarts from the initial window with 1;
* D: streams at 50 and 25 % of the matching bulk run's goodput (the sweep runs bulk
  first and reads it back) deliver that rate within 5 %;
* D: on the cellular and dsl paths, a bulk Cubic flow fills the path and its FIFO;
* D: the one-way delay an idle path adds, as the application measures it (the median
  minus the same tool's median over the path without delay), is the configured one
  within 1 ms; never less than it, and the raw median within 2.5 ms of it under TCG;
* E: k equal flows under FQ-CoDel share equally: entropy fairness within 2 % of ln k,
  Jain's index above 0.98.
"""
import json
import math
import os

import numpy as np
import pytest
from host.test_netperfmeter_host import run_and_check

from bufferbloat.results.health_record import idle_rtt_limits
from bufferbloat.results.records import load_run
from bufferbloat.run.engine import run_point, run_resolved
from bufferbloat.run.scenario import Scenario
from bufferbloat.run.sweep import run_sweep
from bufferbloat.run.watch import RETRY_DEGRADED
from bufferbloat.scenarios import catalogue
from tests.retries import (
    band,
    keep_missed_runs,
    note_sweep_reruns,
    observe,
    require_healthy,
    run_until_healthy_counted,
)

#: physics and timing bands on emulated runs: the acceptance tier judges them
#: (sudo ./run_tests.sh --acceptance, tests/retries.py); the gate leaves them out
pytestmark = pytest.mark.acceptance


CAT = catalogue()


def healthy(run):
    health = run.record["health"]
    assert run.record["status"] == "ok", run.record.get("error")
    require_healthy(health, run.record.get("scenario", {}).get("name", "netperfmeter"))
    return run


def point(scn, overrides=None, **kw):
    """run_point, run again once when the emulator fell behind (as a sweep does; the
    rerun counts toward the session's degraded budget, tests/retries.py): the
    directory of the last attempt."""
    run_dir, _aside = run_until_healthy_counted(
        lambda: run_point(scn, overrides, log=print, **kw), RETRY_DEGRADED)
    return run_dir


def metrics_of(run_dir):
    with open(os.path.join(run_dir, "metrics.json")) as f:
        return {(r["scope"], r["name"], r["metric"]): r["value"]
                for r in json.load(f)["metrics"]}


def test_netperfmeter_through_the_pipeline_in_the_vm(tmp_path):
    healthy(run_and_check(tmp_path, rate_mbit=10, delay_ms=5))


def _second_burst_cwnd(run, flow, on_s, off_s):
    """(initial window, cwnd when the second burst began): the flow's first sample, and
    the first sample after an idle spell (no data segment sent for >= 1 s) at which it
    sends again, from 0.5 s before the burst is due."""
    tcp = run.series("tcp")
    mine = tcp["flow"] == flow
    t, cwnd, segs = tcp["t"][mine], tcp["cwnd_pkts"][mine], tcp["data_segs_out"][mine]
    order = np.argsort(t)
    t, cwnd, segs = t[order], cwnd[order], segs[order]
    due = run.record["traffic_start_s"] + on_s + off_s
    idle_since = None
    for i in range(1, len(t)):
        if segs[i] == segs[i - 1]:
            idle_since = t[i - 1] if idle_since is None else idle_since
            continue
        if idle_since is not None and t[i] - idle_since >= 1.0 and t[i] >= due - 0.5:
            return cwnd[0], cwnd[i]
        idle_since = None
    raise AssertionError(f"{flow}: no second burst after an idle spell in tcp.csv")


@pytest.mark.parametrize("ssai", [0, 1])
def test_d_on_off_window_carries_over_idle_only_without_slow_start_after_idle(
        tmp_path, ssai):
    on_s, off_s = CAT["d1_cca_paths"].traffic[1]["on_off_s"]
    run_dir = point(CAT["d1_cca_paths"],
                    {"load": "onoff", "variant": "fiber", "cca": "cubic",
                     "slow_start_after_idle": ssai},
                    duration_s=9, quick=True, out_root=str(tmp_path))
    run = healthy(load_run(run_dir))
    assert {s["net.ipv4.tcp_slow_start_after_idle"] for s in run.record["sysctls"].values()} \
        == {str(ssai)}
    tcp = run.series("tcp")
    assert len(set(tcp["sport"][tcp["flow"] == "onoff"])) == 1     # one connection
    iw, cwnd = _second_burst_cwnd(run, "onoff", on_s, off_s)
    print(f"slow_start_after_idle={ssai}: initial window {iw:g}, cwnd at the second "
          f"burst {cwnd:g}")
    # the sample comes up to one sampling period (10 ms, one base RTT on this path)
    # after the burst began: slow start may have doubled a restarted window once, so a
    # restarted window reads 1 or 2 (discrete: 7 samples 1.14 +- 0.38); the ceiling sits
    # halfway between that and the carried-over window's floor of 3 (until 2026-11-30
    # it was 2, which a sample of exactly 2 met with no margin: false-fail 0.003)
    ratio = cwnd / max(iw, 1e-9)
    name = f"cwnd at the second burst over the initial window, ssai {ssai}"
    if ssai == 0:
        band(name, ratio, lo=3)          # the first burst's window, kept over the idle
    else:
        band(name, ratio, hi=2.5)        # restarted from the initial window


def test_d_streams_at_half_and_a_quarter_of_the_bulk_goodput(tmp_path):
    scn = CAT["d1_cca_paths"]
    index, failed = run_sweep(scn, {"load": ["stream50", "stream25", "bulk"]}, 1,
                              str(tmp_path),
                              run_resolved, quick=True, duration_s=15,
                              base={"variant": "fiber", "cca": "cubic"}, log=print,
                              retries=RETRY_DEGRADED)
    assert failed == 0
    with open(index) as f:
        entries = json.load(f)["done"]
    note_sweep_reruns(entries)              # the session's degraded budget
    done = {e["varied"]["load"]: e for e in entries}
    bulk = metrics_of(done["bulk"]["run_dir"])
    for load in ("bulk", "stream50", "stream25"):
        healthy(load_run(done[load]["run_dir"]))
    goodput = bulk[("network", "all", "goodput_up_mbit")]
    for load, share in (("stream50", 0.5), ("stream25", 0.25)):
        rec = load_run(done[load]["run_dir"]).record
        assert rec["knobs"]["bulk_goodput_mbit"] == pytest.approx(goodput, rel=1e-5)
        got = metrics_of(done[load]["run_dir"])[("flow", "stream", "app_throughput_mbit")]
        print(f"bulk goodput {goodput:.3f} Mbit/s; stream at {share:.0%}: {got:.3f} Mbit/s")
        band(f"stream rate over {share:.0%} of bulk goodput", got / max(share * goodput, 1e-9),
             1 - 0.05, 1 + 0.05)


#: D's bulk floors (test_d_bulk_cubic_fills_the_path_and_its_fifo's doc): the queue's
#: median at least a tenth of the FIFO, goodput at least 0.7 of the link
D_QUEUE_FLOOR = 0.1
D_GOODPUT_FLOOR = 0.7


@pytest.mark.parametrize("path,rate_mbit,base_ms,buffer_pkts", [
    ("cellular", 5.0, 60.0, 600), ("dsl", 3.0, 40.0, 64)])
def test_d_bulk_cubic_fills_the_path_and_its_fifo(tmp_path, path, rate_mbit, base_ms,
                                                  buffer_pkts):
    """D's other two paths (scenarios/d1_cca_paths.py): one bulk Cubic flow fills the
    path's rate (goodput 0.8-1.0x the link: TCP/IP headers take 4.4 % of a 1514-byte
    frame, and slow start the first seconds) and bloats its FIFO: the ping's median RTT
    between the base RTT + 20 % of the full queue and the base + the full queue + one
    packet (cellular: 600 packets at 5 Mbit/s, 1.45 s; dsl: 64 at 3 Mbit/s, 258 ms).
    Measured: cellular 4.49 Mbit/s, 552 ms (Cubic's HyStart leaves slow start before
    the 600 packets fill, and 15 s is short for the rest: 0.34 of the queue); dsl 2.86
    Mbit/s, 199 ms (0.62).

    The floors, restated 2026-11-30 from 8 cellular samples (goodput 4.41 +- 0.22
    Mbit/s, least 4.28; RTT p50 561 +- 141 ms, least 313, a miss of the old floor
    base + 0.2 x full; false-fails 0.013 and 0.029): where HyStart leaves slow start
    sets how full the queue gets in 15 s, 0.1-0.6 of it, so the queue's floor is a
    tenth of it (D_QUEUE_FLOOR: 145 ms of queue at the median, 2.4x the base RTT; an
    AQM holds 5-20 ms); a buffer of 24 BDPs keeps the link busy after any halving, and
    what takes goodput below 0.956 of the link (the headers) is slow start and an RTO
    recovery with the queue drained, about a second each: D_GOODPUT_FLOOR 0.7. The
    ceilings are contracts (in the test)."""
    run_dir = point(CAT["d1_cca_paths"], {"variant": path, "load": "bulk", "cca": "cubic"},
                    duration_s=15, quick=True, out_root=str(tmp_path))
    run = healthy(load_run(run_dir))
    assert run.record["params"]["bottleneck_mbit"] == rate_mbit
    m = metrics_of(run_dir)
    goodput = m[("network", "all", "goodput_up_mbit")]
    rtt = m[("ping", "ping", "rtt_p50_ms")]
    pkt_ms = 1514 * 8 / (rate_mbit * 1e3)
    full_ms = buffer_pkts * pkt_ms
    print(f"{path}: goodput {goodput:.3f} of {rate_mbit:g} Mbit/s; ping p50 {rtt:.0f} ms "
          f"(base {base_ms:g}, full queue {full_ms:.0f} ms); idle RTT "
          f"{run.record['idle_rtt']['p50_ms']} ms")
    # the ceilings are sides no healthy run can cross, contracts asserted apart: no
    # more goodput than the link; no median RTT above the base, a full queue and a
    # packet, plus the emulator's own idle excess that the health verdict allows
    assert goodput <= rate_mbit, goodput
    assert rtt <= idle_rtt_limits(base_ms + full_ms + pkt_ms)[1], rtt
    band(f"goodput, {path}", goodput, lo=D_GOODPUT_FLOOR * rate_mbit, unit="Mbit/s")
    band(f"ping RTT p50, {path}", rtt, lo=base_ms + D_QUEUE_FLOOR * full_ms, unit="ms")


def _idle_owd_ms(tmp_path, one_way_ms):
    """(the messages' one-way delays in ms, the run) of 100-byte messages 10 times a
    second over an idle 10 Mbit/s path whose one-way delay ``one_way_ms`` is set on the
    bottleneck link alone (one netem stage each way)."""
    scn = Scenario(name=f"t_owd_{one_way_ms:g}", description="a sparse probe stream on an "
                   "idle path",
                   params=dict(bottleneck_mbit=10, delay_ms=0,
                               bottleneck_delay_ms=one_way_ms, qdisc="fifo",
                               buffer_pkts=100, cca="cubic"),
                   traffic=({"kind": "netperfmeter", "name": "probe", "src": "h1",
                             "dst": "h2", "rate_mbit": 0.008, "frame_bytes": 100},
                            {"kind": "ping", "name": "ping", "src": "h1", "dst": "h2"}),
                   duration_s=8, quick_duration_s=8)
    run = healthy(load_run(point(scn, duration_s=8, out_root=str(tmp_path))))
    msg = run.series("npm_msg")
    owd_ms = (msg["t_recv"] - msg["t_sent"]) * 1e3
    band(f"messages received, one-way delay {one_way_ms:g} ms", owd_ms.size, lo=50)
    return owd_ms, run


def test_d_one_way_delay_at_idle_is_the_configured_one(tmp_path):
    """The delay the path adds, as the application measures it, is the configured one
    within 1 ms: the median one-way delay over a 10 ms path minus the median over the
    same path without delay (what this emulator costs the application by itself: under
    TCG its two user-space wake-ups and the namespaces' forwarding, ~1 ms; the serializ-
    ation of a 166-byte frame at 10 Mbit/s, 0.13 ms, is in both). The raw median is
    bounded too: within 1.5 ms of the one-way delay ICMP measures on the same path in
    the same run, and within 2.5 ms of the configured one (measured p50 11.0-11.9 ms in
    eight runs, with or without the guest's idle=poll)."""
    one_way_ms = 10.0
    own, _ = _idle_owd_ms(tmp_path, 0.0)
    owd_ms, run = _idle_owd_ms(tmp_path, one_way_ms)
    p50, own50 = float(np.median(owd_ms)), float(np.median(own))
    icmp_one_way = run.record["idle_rtt"]["p50_ms"] / 2
    print(f"{owd_ms.size} messages of 100 B, one-way delay p50 {p50:.3f} ms, min "
          f"{owd_ms.min():.3f} ms (configured {one_way_ms:g} ms); without delay p50 "
          f"{own50:.3f} ms: the path added {p50 - own50:.3f} ms; idle ping RTT p50 "
          f"{run.record['idle_rtt']['p50_ms']} ms")
    # never faster than the path
    band("one-way delay min", owd_ms.min(), lo=one_way_ms - 0.05, unit="ms")
    band("added one-way delay p50 - configured", p50 - own50 - one_way_ms, -1.0, 1.0, "ms")
    band("one-way delay p50 - ping's half RTT p50", p50 - icmp_one_way, hi=1.5, unit="ms")
    band("one-way delay p50 - configured", p50 - one_way_ms, hi=2.5, unit="ms")


def test_e_k_equal_flows_under_fq_codel_share_equally(tmp_path):
    k = 5
    run_dir = point(CAT["e1_aqm_kflows"], {"variant": "fq_codel", "k": k},
                    duration_s=10, quick=True, out_root=str(tmp_path))
    healthy(load_run(run_dir))
    m = metrics_of(run_dir)
    entropy = m[("network", "all", "entropy_fairness")]
    jain = m[("network", "all", "jain_fairness")]
    flows = {name: (round(value, 2), m.get(("flow", name, "rto_count")))
             for (scope, name, metric), value in m.items()
             if scope == "flow" and metric == "throughput_mbit"}
    print(f"FQ-CoDel, {k} flows: entropy {entropy:.4f} (ln k = {math.log(k):.4f}), "
          f"Jain {jain:.4f}; each flow's (Mbit/s, RTOs): {flows}")
    # entropy is at most ln k by its definition: that side is a contract, asserted apart
    assert entropy / math.log(k) <= 1 + 1e-9
    # both recorded before either is judged (2026-11-30: a run of 10 at entropy 0.975,
    # which means one flow near half its share, lost its Jain's index and its flows)
    met = [observe(f"entropy fairness over ln k, {k} flows", entropy / math.log(k),
                   lo=1 - 0.02),
           observe(f"Jain's index, {k} flows", jain, lo=0.98)]
    if not all(met):
        raise AssertionError(
            f"FQ-CoDel, {k} flows: entropy {entropy / math.log(k):.4f} of ln k (floor "
            f"0.98), Jain {jain:.4f} (floor 0.98); each flow's (Mbit/s, RTOs): {flows}; "
            f"the run is kept in {keep_missed_runs(str(tmp_path), 'fq-codel-k5')}")
