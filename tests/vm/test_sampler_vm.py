"""Full kernel (the project VM): the netlink sampler on PIE, CoDel and FQ-CoDel.

A dumbbell at 1.5 Mbit/s, 5 ms per link, for each AQM in turn (a network of its own),
one sampler (10 ms) and one cubic flow each:

* PIE, target 20 ms, for 25 s: the sampled ``delay_us`` of the PIE leaf tracks its
  target: median over the second half of the flow within 10-30 ms (the same band as
  tests/vm/test_vm_fidelity.py; docs/design/platform.md measured ~22 ms mid-flow); ``prob`` is
  sampled, within 0..1, and > 0 at some point;
* CoDel, then FQ-CoDel, for 10 s each: their ``delay_us`` column is populated on every
  row of that leaf and > 0 at some point while the flow runs (CoDel: ldelay of the last
  dequeued packet; FQ-CoDel: the largest ldelay of its active flows);
* the sampled flow's srtt is populated and the sampler holds its grid under TCG: achieved
  period p50 within 10 +/- 1 ms;
* the queue was read by the compiled helper, which the VM phase requires (run_tests.sh
  builds it on the host).
"""
import csv
import math
import statistics
import time

import pytest

from bufferbloat.measure.compiled import qdisc_helper_binary
from bufferbloat.measure.sampler import Sampler
from bufferbloat.net.network import Network
from bufferbloat.net.topology import DumbbellTopo
from bufferbloat.traffic.iperf.flow import Iperf3Flow
from tests.retries import band

#: physics and timing bands on emulated runs: the acceptance tier judges them
#: (sudo ./run_tests.sh --acceptance, tests/retries.py); the gate leaves them out
pytestmark = pytest.mark.acceptance


PIE_S = 25
OTHER_S = 10


def _rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def _flow(net, t0, seconds, port):
    start = time.monotonic() - t0
    Iperf3Flow(net, "h1", "h2", seconds, cca="cubic", port=port).start().wait()
    return start, time.monotonic() - t0


def _sampled(tmp_path, kind, seconds, qdisc_params=None):
    """(the leaf's qdisc.csv rows while the flow ran, tcp.csv rows, sampler stats) of one
    flow through a bottleneck with AQM ``kind``."""
    topo = DumbbellTopo(bottleneck_mbit=1.5, delay_ms=5, qdisc=kind, buffer_pkts=1000,
                        cca="cubic", qdisc_params=qdisc_params or {})
    out = tmp_path / kind
    with Network(topo) as net:
        t0 = time.monotonic()
        s = Sampler(net, str(out), t0, flows=[{"host": "h1", "dports": [5201]}]).start()
        start, end = _flow(net, t0, seconds, 5201)
        assert s.alive()
        stats = s.stop()
        dev = net.bottleneck_dev[1]
    print(f"{kind}: sampler stats:", stats)
    q = [r for r in _rows(out / "series" / "qdisc.csv")
         if r["dev"] == dev and r["kind"] == kind and start <= float(r["t"]) <= end]
    return q, _rows(out / "series" / "tcp.csv"), stats, (start, end)


def test_sampler_pie_codel_fq_codel(net_guard, tmp_path):
    pie, tcp, stats, (start, end) = _sampled(tmp_path, "pie", PIE_S, {"target_ms": 20})
    half = [r for r in pie if float(r["t"]) >= (start + end) / 2]
    band("PIE rows, second half", len(half), lo=math.floor(0.5 * PIE_S / 2 / 0.01) + 1)
    delay_ms = statistics.median(int(r["delay_us"]) for r in half) / 1e3
    probs = [float(r["prob"]) for r in pie]
    print(f"PIE: median sampled delay over the second half {delay_ms:.1f} ms (target 20), "
          f"max prob {max(probs):.4f}, {sum(p > 0 for p in probs)} of {len(probs)} rows "
          f"with prob > 0")
    # half the target to 1.5x (measured 19.4 ms twice; 12.3-19.5 ms in the A tests)
    band("PIE sampled delay p50, second half", delay_ms, 10, 30, "ms")
    assert all(0 <= p <= 1 for p in probs) and max(probs) > 0
    assert all(r["maxq_pkts"] != "" and r["early_drops"] != "" for r in pie)
    runs = [("pie", tcp, stats)]

    for kind in ("codel", "fq_codel"):
        rows, ktcp, kstats, _span = _sampled(tmp_path, kind, OTHER_S)
        band(f"{kind} rows", len(rows), lo=math.floor(0.5 * OTHER_S / 0.01) + 1)
        delays = [int(r["delay_us"]) for r in rows]  # every row has it (int() of "" fails)
        print(f"{kind}: {len(rows)} rows, sampled delay median "
              f"{statistics.median(delays) / 1e3:.1f} ms, max {max(delays) / 1e3:.1f} ms")
        assert max(delays) > 0
        assert all(r["marks"] != "" and r["early_drops"] != "" for r in rows)
        runs.append((kind, ktcp, kstats))

    for kind, tcp, stats in runs:
        check_sockets_and_grid(kind, tcp, stats)


def check_sockets_and_grid(kind, tcp, stats):
    """One sampler's flow and grid (the run through ``kind``)."""
    # an RTT is either sampled (> 0) or not yet (empty: the handshake's first rows)
    srtt = [int(r["srtt_us"]) for r in tcp if r["srtt_us"] != ""]
    assert len(srtt) > 0.9 * len(tcp) and min(srtt) > 0
    assert len({r["flow"] for r in tcp}) == 1  # the iperf3 run's one data connection
    band(f"sampler period p50, {kind}", stats["period_p50_ms"], 10 - 1.0, 10 + 1.0, "ms")
    binary, why = qdisc_helper_binary(build=False)
    print(f"queue sampler: {stats['qdisc_sampler']}; CPU per tick: queue "
          f"{(stats.get('qdisc_sampler_stats') or {}).get('cpu_per_tick_us')} us (C), "
          f"sockets {stats.get('tcp_cpu_s')} s over {stats.get('tcp_samples')} ticks")
    # the VM phase requires the compiled sampler (run_tests.sh builds it on the host; the
    # VM has no compiler): the Python fallback costs 0.3-0.7 of a vCPU under TCG
    # (docs/design/health.md) and is not what the VM runs are measured with
    assert binary, f"the compiled queue sampler is missing in the VM: {why}"
    assert stats["qdisc_sampler"] == "c"
