"""The ``irtt`` kind through the real pipeline on the host kernel (HTB + pfifo, Linux
bridge, no netem: delay 0): UDP probes h1 -> h2 beside ICMP pings, first on the idle
link, then while one cubic upload fills the 100-packet FIFO of the 10 Mbit/s bottleneck
(s0 -> h2: the probes' requests queue, their replies do not).

Tolerances: the full FIFO holds 100 x 1514 B = 121 ms at 10 Mbit/s (cubic's sawtooth
keeps it above 20 ms). irtt's probes and ping's cross the same queue: a ping and the
irtt probe sent nearest it (within half irtt's 50 ms interval) meet the same queue but
for what it changed in that time, which in cubic's congestion avoidance (one packet,
1.2 ms, an RTT of ~56 ms) is under a millisecond. Pairing did not narrow the spread as
that predicts: 7 runs measured -1.9 to 6.0 ms (mean 3.0, sd 2.7; 2026-11-30), so the
runs differ by an offset between the tools, not by sampling; what makes it is not known
yet (irtt's server turnaround in user space on a busy host is one candidate). What the
band tells apart is a probe that crossed the queue from one that did not: that one
would read the whole queue below ping, at least 20 ms (the loaded median's floor
below), ~55 ms in these runs. So the pairs' median difference is within +-15 ms: 5 ms
short of the least a probe beside the queue would read, and 4 sd of the tools' offset
above its mean (until 2026-11-30 the band was 15 % of ping's median, ~8.5 ms, which the
offset crossed once in 7 runs). On the idle link (no delay configured) an RTT is well
under 2 ms; the requests' one-way delay carries the queue (within 5 ms of the RTT), the
replies' does not (< 2 ms)."""
import gzip
import json
import subprocess

import numpy as np
import pytest

from bufferbloat.results.health_record import idle_rtt_limits
from bufferbloat.results.records import load_run
from bufferbloat.run.engine import run_point
from bufferbloat.run.scenario import Scenario
from tests.retries import band
from tests.timing import EMULATED_CPU, UNDER_TCG

DURATION_S = 12
LOAD_FROM = 0.4          # the upload starts 40 % into the run
INTERVAL_S = 0.05
#: the paired difference's tolerance (the module's doc): under the 20 ms a probe that
#: did not cross the queue would read at least
PAIRED_TOLERANCE_MS = 15.0


def _irtt_pids():
    out = subprocess.run(["pgrep", "-x", "irtt"], capture_output=True, text=True).stdout
    return set(out.split())


@pytest.mark.acceptance
def test_irtt_probes_idle_then_behind_the_queue(tmp_path, net_guard):
    before = _irtt_pids()
    scn = Scenario(
        name="t_irtt", description="irtt beside ping, idle then under one upload",
        params=dict(bottleneck_mbit=10, qdisc="fifo", buffer_pkts=100, cca="cubic",
                    delay_ms=0),
        traffic=({"kind": "irtt", "name": "udp", "client": "h1", "server": "h2",
                  "interval_s": INTERVAL_S},
                 {"kind": "ping", "name": "icmp", "src": "h1", "dst": "h2",
                  "interval_s": 0.1},
                 {"kind": "iperf", "name": "up", "src": "h1", "dst": "h2",
                  "start": LOAD_FROM}),
        duration_s=DURATION_S, quick_duration_s=DURATION_S)
    run_dir = run_point(scn, duration_s=DURATION_S, out_root=str(tmp_path),
                        log=lambda *_: None)
    assert _irtt_pids() - before == set(), "irtt processes left behind"
    run = load_run(run_dir)
    rec = run.record
    assert rec["status"] == "ok", rec.get("error")
    s = run.series("irtt")
    start = rec["traffic_start_s"]
    # every probe of the run, on schedule: one per interval (but those irtt's timer
    # skipped, a late wake-up on a busy machine: it counts them), consecutive seqs
    raw = json.loads(gzip.decompress(run.raw("udp.irtt.json.gz", binary=True)))
    n = len(s["t"])
    assert n == raw["stats"]["packets_sent"]
    assert abs(n + raw["stats"]["timer_misses"] - DURATION_S / INTERVAL_S) <= 1, n
    band("probes sent", n, lo=0.97 * DURATION_S / INTERVAL_S)
    assert np.array_equal(s["seq"], np.arange(n))
    band("first probe after the traffic's start", s["t"][0] - start, -0.5, 0.5, "s")
    band("probe spacing, median", np.median(np.diff(s["t"])), INTERVAL_S - 0.005,
         INTERVAL_S + 0.005, "s")
    lost = s["lost"] != ""
    print("lost probes:", s["lost"][lost])
    band("probes lost, share", lost.sum() / max(n, 1), hi=0.05)   # tail drops may take a few
    ok = ~lost
    # idle: no delay configured, no queue
    idle = ok & (s["t"] < start + LOAD_FROM * DURATION_S - 0.5)
    band("idle probes answered", idle.sum(),
         lo=0.8 * (LOAD_FROM * DURATION_S - 0.5) / INTERVAL_S)
    # (under TCG, tests/timing.py, the idle path's own delay is the health verdict's
    # limit for a path of no delay: bufferbloat.results.health_record.idle_rtt_limits)
    band(f"idle RTT, median{UNDER_TCG}", np.median(s["rtt_ms"][idle]),
         hi=idle_rtt_limits(0)[1] if EMULATED_CPU else 2.0, unit="ms")
    # loaded (the second half): the probe sees the FIFO the ping sees
    late = s["t"] > start + 0.6 * DURATION_S
    rtt = np.median(s["rtt_ms"][ok & late])
    p = run.series("ping")
    loaded_ping = (p["t"] > start + 0.6 * DURATION_S) & ~np.isnan(p["rtt_ms"])
    icmp = np.median(p["rtt_ms"][loaded_ping])
    print(f"loaded: irtt RTT median {rtt} ms, ping RTT median {icmp} ms")
    # a cubic sawtooth keeps the FIFO between part full and full: never above its
    # 121 ms, far above the idle link's fraction of a millisecond
    band("loaded RTT, median", rtt, 20, 126, "ms")
    print(f"loaded: irtt over ping, medians: {rtt / max(icmp, 1e-9):.3f}")
    # each ping paired with the irtt probe sent nearest it (the module's doc)
    pt, prtt = p["t"][loaded_ping], p["rtt_ms"][loaded_ping]
    it, irtt_ms = s["t"][ok & late], s["rtt_ms"][ok & late]
    j = np.clip(np.searchsorted(it, pt), 1, len(it) - 1)
    j = np.where(np.abs(it[j - 1] - pt) < np.abs(it[j] - pt), j - 1, j)
    near = np.abs(it[j] - pt) <= INTERVAL_S / 2
    # ping every 0.1 s over the loaded 40 %: each has an irtt probe within 25 ms unless
    # irtt's timer skipped it or the probe was lost
    band("pings paired with an irtt probe", near.sum(),
         lo=0.5 * 0.4 * DURATION_S / 0.1)
    band("loaded RTT, irtt - ping, median of pairs sent within 25 ms",
         np.median(irtt_ms[j[near]] - prtt[near]), -PAIRED_TOLERANCE_MS, PAIRED_TOLERANCE_MS,
         "ms")
    # the queue is on the requests' way (h1 -> h2), not the replies'
    up = np.median(s["owd_up_ms"][ok & late])
    down = np.median(s["owd_down_ms"][ok & late])
    print(f"loaded: one-way delay medians up {up} ms, down {down} ms")
    band("loaded one-way delay up - RTT, medians", up - rtt, -5.0, 5.0, "ms")
    band("loaded one-way delay down, median", down, hi=2.0, unit="ms")
    # the metrics and the summary
    rows = {r["metric"]: r["value"] for r in json.load(open(f"{run_dir}/metrics.json"))
            ["metrics"] if r["scope"] == "irtt" and r["name"] == "udp"}
    assert {"rtt_p50_ms", "rtt_p95_ms", "rtt_mean_ms", "owd_up_mean_ms",
            "owd_down_mean_ms", "loss_up_pct", "loss_down_pct"} <= set(rows)
    entry = next(e for e in rec["traffic_results"] if e.get("probe") == "udp")
    assert entry["kind"] == "IrttProbe" and entry["sent"] == n and entry["error"] is None


def test_missing_irtt_refused_before_any_network_state(tmp_path, monkeypatch, net_guard):
    from bufferbloat.core.errors import MissingFeature
    from bufferbloat.net.capabilities import Capabilities, Capability, probe
    from bufferbloat.run import engine
    real = probe()
    rows = [Capability(r.name, r.kind, False, "not found on PATH: install the Debian "
                       "package irtt") if r.name == "irtt" else r for r in real.rows]
    monkeypatch.setattr(engine, "probe", lambda: Capabilities(rows, real.kernel_release,
                                                               real.hz))
    scn = Scenario(name="t_irtt_missing", description="irtt missing",
                   params=dict(bottleneck_mbit=10, qdisc="fifo", delay_ms=0),
                   traffic=({"kind": "irtt", "name": "udp", "client": "h1",
                             "server": "h2"},), duration_s=5, quick_duration_s=5)
    with pytest.raises(MissingFeature, match="irtt"):
        run_point(scn, duration_s=5, out_root=str(tmp_path), log=lambda *_: None)
    assert not any(tmp_path.iterdir())          # no run directory either
