"""irtt's UDP probes through the real pipeline in the project VM (netem delay, OVS):
on the idle dumbbell the probe's RTT is the configured base RTT, and under one upload
into the bottleneck's FIFO it is the base RTT plus the queue the sampler saw.

Tolerances:
* idle: 5 ms one way per link = 20 ms base RTT, seen by the floors of the idle RTTs
  (their minima over ~100-140 probes) once the emulator's own round trip is taken out
  (the floor of the same probe over the same dumbbell without delay, as
  tests/vm/test_vm_fidelity.py does for ping: under TCG forwarding through namespaces
  and OVS costs 0.5-1 ms per round trip, which is not netem's doing). For ICMP ping,
  stamped by the kernel, within 1 ms. For irtt within 1 ms too, once measured again
  when a pair of runs misses it, and 2 ms on every pair: irtt stamps its probes in
  user space, and under TCG waking the client to read a reply costs more after a
  20 ms wait than after a 1 ms one (the vCPUs go idle in between): netem's 20 ms
  measured by irtt's floors 20.3, 20.3, 20.7, 20.7, 20.9, 21.8 ms in six runs, by
  ping's 20.5; so also: irtt's floor is never below ping's (no UDP probe beats the
  kernel's stamp on the same path) and at most 2.5 ms above it (measured 0.95-2.0).
  Floors, not medians: those wake-ups put irtt's idle median 2-4 ms above ping's;
* loaded: the FIFO's queueing delay when the request reached it (its backlog, sampled
  every 10 ms, over the rate the leaf drained at in those seconds, from its sent_bytes:
  under TCG a 10 Mbit/s link drains at 0.85-0.98 of its rate, docs/design/health.md) is a
  lower bound of the probe's extra RTT, and the probe follows it: the median extra RTT
  (RTT minus the idle median) is at least 0.85 x the median queue delay, and the
  per-probe extra RTT correlates with the queue delay (Pearson r >= 0.6; measured
  0.68-0.92: the queue's sawtooth against a few ms of TCG noise per probe). What the
  probe sees beyond the sampled queue (the guest's own backlog of packets it has not
  yet processed, up to ~17 ms in a measured run) the kernel-stamped ICMP ping of the
  same seconds sees too: the medians of their extra RTTs agree within max(10 ms, 15 %)
  (irtt's user-space wake-ups grow when the guest is busy; measured 2-8 ms). The queue
  is on the requests' way (s0 -> h2): their one-way delay carries it (>= 0.85 x the
  median queue delay above idle), the replies' stays within 2 ms of its idle value.
"""
import numpy as np
import pytest

from bufferbloat.results.records import load_run
from bufferbloat.run.engine import run_point
from bufferbloat.run.scenario import Scenario
from tests.retries import band, measure_until_met, observe

#: physics and timing bands on emulated runs: the acceptance tier judges them
#: (sudo ./run_tests.sh --acceptance, tests/retries.py); the gate leaves them out
pytestmark = pytest.mark.acceptance


DURATION_S = 20
LOAD_FROM = 0.35
INTERVAL_S = 0.05
RATE_MBIT = 10


def _run(tmp_path, delay_ms, load):
    traffic = [{"kind": "irtt", "name": "udp", "client": "h1", "server": "h2",
                "interval_s": INTERVAL_S},
               {"kind": "ping", "name": "icmp", "src": "h1", "dst": "h2",
                "interval_s": 0.1}]
    if load:
        traffic.append({"kind": "iperf", "name": "up", "src": "h1", "dst": "h2",
                        "start": LOAD_FROM})
    duration = DURATION_S if load else 6
    scn = Scenario(name=f"t_irtt_{delay_ms}", description="irtt in the VM",
                   params=dict(bottleneck_mbit=RATE_MBIT, qdisc="fifo", buffer_pkts=100,
                               cca="cubic", delay_ms=delay_ms),
                   traffic=tuple(traffic), duration_s=duration, quick_duration_s=duration)
    run = load_run(run_point(scn, duration_s=duration, out_root=str(tmp_path),
                             log=lambda *_: None))
    assert run.record["status"] == "ok", run.record.get("error")
    return run


def _answered(s, lo, hi):
    return (s["lost"] == "") & (s["t"] >= lo) & (s["t"] < hi)


def _floors(run, lo, hi, what):
    """(irtt's minimum RTT, ping's minimum RTT) of the probes sent in [lo, hi), ms;
    ``what`` names the run in its bands."""
    s, p = run.series("irtt"), run.series("ping")
    udp = s["rtt_ms"][_answered(s, lo, hi)]
    icmp = p["rtt_ms"][(p["t"] >= lo) & (p["t"] < hi) & np.isfinite(p["rtt_ms"])]
    band(f"irtt probes answered, {what}", udp.size, lo=60)
    band(f"pings answered, {what}", icmp.size, lo=30)
    return float(np.min(udp)), float(np.min(icmp))


def _idle_floors(tmp_path):
    """Measure the emulator's own floors, then the dumbbell's (its idle seconds before
    the load): (the loaded run, its irtt floor, its ping floor, irtt's own, ping's own)."""
    own_run = _run(tmp_path, 0, load=False)
    t = own_run.record["traffic_start_s"]
    own_udp, own_icmp = _floors(own_run, t + 0.5, t + 6, "no delay")
    run = _run(tmp_path, 5, load=True)
    start = run.record["traffic_start_s"]
    # the idle seconds (enough probes for a floor: of the ~120 due, the client's
    # start-up and timer misses on a busy TCG guest take some)
    udp, icmp = _floors(run, start + 0.5, start + LOAD_FROM * DURATION_S - 0.5,
                        "idle seconds")
    return run, udp, icmp, own_udp, own_icmp


def test_irtt_rtt_is_the_base_rtt_idle_and_rises_with_the_queue(tmp_path):
    """The delay netem adds as irtt sees it (its floor minus its own) is the configured
    base RTT within 1 ms: measured 20.3-20.9 ms in ten of eleven runs, 21.8 in one, so a
    pair of runs that misses it is measured again (each printed, the miss counted,
    tests/retries.py: the sequential rule); 2 ms holds on every pair."""
    attempts = []

    def measure():
        attempts.append(len(attempts) + 1)
        attempt = attempts[-1]
        run, udp, icmp, own_udp, own_icmp = _idle_floors(tmp_path / f"a{attempt}")
        base = run.record["base_rtt_ms"]
        print(f"attempt {attempt}: idle floors: irtt {udp:.2f} ms (own {own_udp:.2f}: netem "
              f"added {udp - own_udp:.2f}), ping {icmp:.2f} ms (own {own_icmp:.2f}: netem "
              f"added {icmp - own_icmp:.2f}); configured {base:g} ms")
        assert base == 20
        band("ping's added delay - base RTT", icmp - own_icmp - base, -1.0, 1.0, "ms")
        band("irtt's added delay - base RTT, 2 ms band", udp - own_udp - base, -2.0, 2.0,
             "ms")
        band("irtt floor - ping floor", udp - icmp, 0, 2.5, "ms")
        return run, udp, own_udp, base

    def misses_of(measured):
        _run, udp, own_udp, base = measured
        added = udp - own_udp
        observe("irtt's added delay - base RTT, 1 ms band", added - base, -1.0, 1.0, "ms")
        return [] if abs(added - base) <= 1.0 else [
            f"irtt's added delay {added:.2f} ms not within 1 ms of {base:g}"]

    (run, udp, own_udp, base), _misses = measure_until_met(measure, misses_of,
                                                           "irtt idle floor")
    assert abs(udp - own_udp - base) <= 1.0
    rec = run.record

    s = run.series("irtt")
    p = run.series("ping")
    start = rec["traffic_start_s"]
    load_at = start + LOAD_FROM * DURATION_S
    idle = _answered(s, start + 0.5, load_at - 0.5)
    idle_rtt = float(np.median(s["rtt_ms"][idle]))
    icmp_idle = p["rtt_ms"][(p["t"] >= start + 0.5) & (p["t"] < load_at - 0.5)]
    print(f"idle medians: irtt {idle_rtt:.2f}, ping {np.nanmedian(icmp_idle):.2f}")

    # under load: the bottleneck's queue when the request reached it (one link, 5 ms,
    # after it was sent), at the rate the leaf drained at
    q = run.series("qdisc")
    leaf = (q["kind"] == "pfifo") & (q["dev"] == rec["bottleneck_dev"])
    late = _answered(s, load_at + 3, start + DURATION_S)
    qt, sent = q["t"][leaf], q["sent_bytes"][leaf]
    span = (qt >= load_at + 3) & (qt <= start + DURATION_S)
    drain_bps = (sent[span][-1] - sent[span][0]) * 8 / (qt[span][-1] - qt[span][0])
    band("leaf drain rate", drain_bps / 1e6, 0.8 * RATE_MBIT, 1.02 * RATE_MBIT, "Mbit/s")
    qdelay = q["backlog_bytes"][leaf] * 8 / drain_bps * 1e3
    at_queue = np.interp(s["t"][late] + 0.005, qt, qdelay)
    excess = s["rtt_ms"][late] - idle_rtt
    med_q, med_x = float(np.median(at_queue)), float(np.median(excess))
    r = float(np.corrcoef(at_queue, excess)[0, 1])
    icmp_late = (p["t"] >= load_at + 3) & np.isfinite(p["rtt_ms"])
    icmp_x = float(np.median(p["rtt_ms"][icmp_late]) - np.nanmedian(icmp_idle))
    print(f"loaded: the leaf drained at {drain_bps / 1e6:.2f} Mbit/s; median queue delay "
          f"{med_q:.1f} ms, median extra RTT {med_x:.1f} ms (ICMP's {icmp_x:.1f} ms), "
          f"r {r:.2f}")
    band("queue delay p50", med_q, lo=20, unit="ms")            # the upload keeps a queue
    band("extra RTT p50 over queue delay p50", med_x / max(med_q, 1e-9), lo=0.85)
    band("Pearson r, extra RTT vs queue delay", r, lo=0.6)
    tol = max(10.0, 0.15 * icmp_x)
    band("extra RTT p50 - ICMP's", med_x - icmp_x, -tol, tol, "ms")
    up_idle = np.median(s["owd_up_ms"][idle])
    down_idle = np.median(s["owd_down_ms"][idle])
    band("request one-way delay rise over queue delay p50",
         (np.median(s["owd_up_ms"][late]) - up_idle) / max(med_q, 1e-9), lo=0.85)
    band("reply one-way delay rise", np.median(s["owd_down_ms"][late]) - down_idle,
         -2.0, 2.0, "ms")
