"""CAKE (sch_cake, an unlimited leaf under the HTB shaper) in the project VM, against
theory, with the suite's own runner and its health verdict (as test_families_vm.py).

1. Delay: CAKE's COBALT keeps each flow queue's sojourn near its target, rtt/20 = 5 ms at
   the default rtt 100 ms. A single cubic flow at 10 Mbit/s (base RTT 20 ms) saw-tooths
   around the target: CoDel's control law lets the queue rise above the target for up to
   an interval before it drops, and empties it after a drop, so the median sojourn is of
   the order of the target: asserted within [2, 15] ms (CAKE's own avg_delay and the
   backlog x 8 / rate the sampler measures). The same flow behind a FIFO of 100 packets
   fills it: 100 x 1514 x 8 / 10e6 = 121 ms of queue at its peak (docs/design/platform.md
   measured 121); cubic's saw-tooth (x0.7 of BDP 16 + 100 packets) leaves it between
   ~65 and 100 packets, so its median is well above half the peak (measured 73 ms).
   CAKE's median must be below a quarter of FIFO's. Measured: avg_delay p50 5.8 ms,
   backlog delay p50 6.1 ms.
2. Per-host isolation: 1 flow from h1 and 4 from h2 to one receiver. CAKE divides a
   flow's quantum by its host's count of bulk flows; with ``dual-srchost`` that count is
   the source host's (1 for h1's flow, 4 for h2's), so each host gets half while both
   stay backlogged (theory 0.5). A lone cubic flow under COBALT drains its queue after
   each drop, and CAKE, work-conserving, gives that moment's share to h2's flows: h1
   measured 0.434. Asserted: h1's share of the goodput within 0.1 of a half (0.4-0.6),
   which per-flow sharing (0.2) fails. Its default
   ``triple-isolate`` divides by the larger of the source's and the destination's
   counts: every flow here goes to the one receiver (count 5), so it shares per flow and
   h1 gets 1/5 (measured 0.200 in the VM); asserted 0.2 +- 0.05, which per-host sharing
   would fail.
"""
import dataclasses
import json
import os

import pytest

from bufferbloat.results.health import headline
from bufferbloat.results.records import load_run
from bufferbloat.run.engine import run_point
from bufferbloat.run.watch import RETRY_DEGRADED
from bufferbloat.scenarios import catalogue
from tests.retries import band, require_healthy, run_until_healthy_counted

#: physics and timing bands on emulated runs: the acceptance tier judges them
#: (sudo ./run_tests.sh --acceptance, tests/retries.py); the gate leaves them out
pytestmark = pytest.mark.acceptance


CAT = catalogue()
RATE_MBIT = 10
TARGET_MS = 5.0                        # CAKE's default: rtt 100 ms / 20
FIFO_QUEUE_MS = 100 * 1514 * 8 / (RATE_MBIT * 1e6) * 1e3   # 121 ms


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cake"))


def healthy_run(out, scn, overrides, time_s):
    """A healthy run of ``scn`` (a degraded one is run again, as a sweep does) and its
    metric rows."""
    run_dir, _aside = run_until_healthy_counted(
        lambda: run_point(scn, overrides, duration_s=time_s, out_root=out, quick=True,
                          log=print), RETRY_DEGRADED,
        log=lambda line: print(f"{scn.name} {overrides}: {line}"))
    run = load_run(run_dir)
    print(f"{scn.name} {overrides}: {headline(run.record.get('health'))}")
    assert run.record["status"] == "ok"
    health = run.record["health"]
    require_healthy(health, f"{scn.name} {overrides}")
    with open(os.path.join(run_dir, "metrics.json")) as f:
        return run, json.load(f)["metrics"]


def metric(rows, scope, name_part, name):
    vals = [r["value"] for r in rows if r["scope"] == scope and name_part in r["name"]
            and r["metric"] == name]
    assert vals, f"no {scope}/{name_part}/{name}"
    return vals[0]


def test_one_flow_keeps_cakes_delay_near_its_target_far_below_fifo(out):
    base = dict(bottleneck_mbit=RATE_MBIT)
    cake, crows = healthy_run(out, CAT["a1_fifo"], dict(base, qdisc="cake",
                                                         buffer_pkts=None), 20)
    _, frows = healthy_run(out, CAT["a1_fifo"], dict(base, buffer_pkts=100), 20)
    q = cake.series("qdisc")
    kinds = set(q["kind"].tolist())
    assert {"cake", "cake_tin"} <= kinds, kinds          # the leaf and its tins sampled
    tins = q["kind"] == "cake_tin"
    assert len(set(q["handle"][tins].tolist())) == 3     # diffserv3: three tins
    aqm = metric(crows, "link", "cake", "aqm_delay_p50_ms")
    sojourn = metric(crows, "link", "cake", "qdelay_p50_ms")
    fifo = metric(frows, "link", "fifo", "qdelay_p50_ms")
    print(f"CAKE 1 flow at {RATE_MBIT} Mbit/s: avg_delay p50 {aqm:.1f} ms, backlog delay "
          f"p50 {sojourn:.1f} ms (target {TARGET_MS:g}); FIFO-100 {fifo:.0f} ms (theory "
          f"{FIFO_QUEUE_MS:.0f})")
    band("CAKE avg_delay p50", aqm, 2, 15, "ms")
    band("CAKE backlog delay p50", sojourn, hi=15, unit="ms")
    band("CAKE backlog delay p50 over FIFO-100's", sojourn / max(fifo, 1e-9), hi=1 / 4)
    band("FIFO-100 backlog delay p50", fifo, lo=0.5 * FIFO_QUEUE_MS, unit="ms")


def _host_share(out, flow_mode):
    e1 = CAT["e1_aqm_kflows"]
    scn = dataclasses.replace(
        e1, name=f"cake_hosts_{flow_mode}", variants={}, sweep={}, quick_sweep={},
        params=dict(k=2, rtt_ms="20", bottleneck_mbit=RATE_MBIT, qdisc="cake", cca="cubic"),
        traffic=({"kind": "iperf", "name": "one", "src": "h1", "dst": "receiver"},
                 {"kind": "iperf", "name": "four", "src": "h2", "dst": "receiver",
                  "parallel": 4},
                 {"kind": "ping", "name": "ping", "src": "h1", "dst": "receiver",
                  "interval_s": 0.1}))
    _run, rows = healthy_run(out, scn, {"qdisc.flow_mode": flow_mode}, 20)
    flows = {r["name"]: r["value"] for r in rows
             if r["scope"] == "flow" and r["metric"] == "throughput_mbit"}
    one = sum(v for k, v in flows.items() if k.startswith("one"))
    four = sum(v for k, v in flows.items() if k.startswith("four"))
    share = one / (one + four)
    print(f"CAKE {flow_mode}: h1 (1 flow) {one:.2f} Mbit/s, h2 (4 flows) {four:.2f} "
          f"Mbit/s: h1's share {share:.3f}; {flows}")
    # the link stays used
    band(f"throughput, h1 + h2, {flow_mode}", one + four, lo=0.85 * RATE_MBIT, unit="Mbit/s")
    return share


def test_two_hosts_share_equally_with_dual_srchost(out):
    band("h1's share, dual-srchost", _host_share(out, "dual-srchost"), 0.4, 0.6)


def test_triple_isolate_shares_per_flow_towards_one_receiver(out):
    band("h1's share, triple-isolate", _host_share(out, "triple-isolate"), 0.2 - 0.05,
         0.2 + 0.05)
