"""The departure trace on the host kernel (tracefs, HTB with tc's one-MTU burst + pfifo
at 10 Mbit/s, Linux bridge, no netem: delay 0): every packet the bottleneck sent, timed
against an ideal 10 Mbit/s link.

Bounds (bufferbloat/measure/departures.py HOST_REFERENCE; measured on this machine kind
2026-11-25, one cubic flow, 8 s, 7,029 backlogged gaps): p99 of |gap - ideal| 0.049 ms
(asserted <= 0.5 ms: a shaper that sent in clumps of even half a packet's 1.2 ms would
fail); 97.7 % of the gaps within 10 % of ideal (asserted >= 90 %); each packet's sojourn
against the ideal link's between -0.038 ms (1st percentile) and +0.045 ms (99th).
The sojourn's bound is asserted on the 1st and 95th percentiles (within +/- 0.5 ms), not
the 99th: 8 runs on 2026-11-27 gave p95 0.028-0.048 ms but p99 0.069-1.44 ms (and the
CI's 0.549 ms, one more 2.21 ms). Each run had 2-6 stalls of the machine itself (a gap
1-22 ms beyond ideal); one stall delays every packet queued behind it, up to a FIFO's
worth, so the top 1 % measures how often the host stalls, not the trace. Those stalls
are the health check's business (the gap error's p99, 0.09-0.21 ms in those runs). The
count of departures equals the leaf's sent packets
(the sampler's counter) within the packets sent before the trace started and after it
stopped (asserted within 1 %).

The timing bounds may miss once on a host that stalls (CI, 2026-11-27: gap error p99
0.661 ms on one run): that attempt is printed and run again, and the test passes only if
the next two attempts meet them (the sequential rule, tests/retries.py: a bug that
misses half its attempts fails it 37.5 % of the time, and every miss is printed)."""
import os

import numpy as np
import pytest

from bufferbloat.measure import departures as dp
from bufferbloat.results.records import load_run
from bufferbloat.run.engine import run_point
from bufferbloat.scenarios import catalogue
from tests.retries import measure_until_met
from tests.timing import realtime_only

RATE = 10


def _dead_pid():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


@realtime_only("tests/vm/test_departures_vm.py (the trace against TCG's calibration)")
@pytest.mark.bands
def test_departures_on_the_host_match_an_ideal_link(tmp_path, net_guard):
    # a machine started without systemd has tracefs unmounted: the engine mounts it
    # where systemd would (departures.mount_tracefs), as here
    root, why = dp.mount_tracefs()
    assert root, why
    scn = catalogue()["a1_fifo"]

    def measure():
        # what a killed run would leave: an instance of a PID that no longer runs
        stale = os.path.join(root, "instances", f"{dp.INSTANCE_PREFIX}{_dead_pid()}-1")
        os.mkdir(stale)
        run_dir = run_point(scn, {"delay_ms": 0, "bottleneck_mbit": RATE}, duration_s=8,
                            out_root=str(tmp_path), log=lambda *_: None)
        return load_run(run_dir), stale

    def misses(attempt):
        run = attempt[0]
        # what only a bug breaks holds on every attempt
        info = run.record["departures"]
        assert info["traced"] and info["lost_events"] == 0, info
        assert info["reader"] == "c" and info["unpaired"] == 0, info
        (_, c), = [(k, v) for k, v in run.record["health"]["checks"].items()
                   if k.startswith("departure_timing:")]
        # the timing bounds: a host stall beyond the test's control misses one attempt
        # (counted and printed; the sequential rule, tests/retries.py); so does the
        # health check's own departure verdict (its gap error p99 <= 2.2 ms) and a
        # backlog cut short by a stall
        out = []
        if c["backlogged_gaps"] <= 5000:
            out.append(f"backlogged gaps {c['backlogged_gaps']} <= 5000")
        if c["ok"] is not True:
            out.append(f"the health check's departure timing not ok: {c}")
        if c["gap_error_ms_p99"] > 0.5:
            out.append(f"gap error p99 {c['gap_error_ms_p99']} ms > 0.5")
        if c["within_10pct"] < 0.90:
            out.append(f"within 10 % {c['within_10pct']} < 0.90")
        if not -0.5 <= c["sojourn_excess_ms_p1"] or c["sojourn_excess_ms_p95"] > 0.5:
            out.append(f"sojourn excess p1 {c['sojourn_excess_ms_p1']} / p95 "
                       f"{c['sojourn_excess_ms_p95']} ms outside +/-0.5")
        return out

    (run, stale), _ = measure_until_met(measure, misses, "host departures at 10 Mbit/s")
    run_dir = run.dir
    info = run.record["departures"]
    assert info["traced"] and info["lost_events"] == 0 and info["machine"] == "host"
    assert info["reader"] == "c" and info["unpaired"] == 0 and not info.get("reader_error")
    assert os.path.basename(stale) in info["removed_stale"] and not os.path.exists(stale)
    assert not [n for n in os.listdir(os.path.join(root, "instances"))
                if n.startswith(f"{dp.INSTANCE_PREFIX}{os.getpid()}-")]
    assert not os.path.exists(os.path.join(run_dir, "raw", dp.RAW_NAME))

    checks = run.record["health"]["checks"]
    (name, c), = [(k, v) for k, v in checks.items() if k.startswith("departure_timing:")]
    assert name == f"departure_timing:{run.bottleneck_dev}:pfifo"
    # (the gap error, the share within 10 %, the sojourn excess and the check's own
    # verdict: bands, in misses; here only that the check was made)
    assert c["ok"] in (True, False), c

    # every packet the leaf sent while traced is a row: the sampler's counter agrees
    d = run.series("departures")
    q = run.series("qdisc")
    mask = (q["dev"] == run.bottleneck_dev) & (q["kind"] == "pfifo")
    t_first, t_last = d["t"][0], d["t"][-1]
    inside = mask & (q["t"] >= t_first) & (q["t"] <= t_last)
    sent = np.nanmax(q["sent_pkts"][inside]) - np.nanmin(q["sent_pkts"][inside])
    traced = np.sum((d["dev"] == run.bottleneck_dev) & (d["t"] >= q["t"][inside].min())
                    & (d["t"] <= q["t"][inside].max()))
    assert abs(traced - sent) <= max(3, 0.01 * sent), (traced, sent)
