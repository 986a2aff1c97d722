"""Host kernel, Linux bridge: a full 100-packet FIFO behaves as theory says.

Theory (bufferbloat.results.theory.full_queue_rtt_ms): a probe behind a full FIFO of 100 x
1514-byte frames waits 100 * 1514 * 8 / rate: 807 ms at 1.5 Mbit/s, 121 ms at 10 Mbit/s
(base RTT ~0 here). The FIFO is limited in packets, so the pings queued in it take slots
too: with one ping every I seconds, a queue of T ms holds T/I pings, and the full-queue
RTT a ping can see is T = 100 t / (1 + (t - t_ping) / I): 747 ms at 1.5 Mbit/s with
I = 0.1 s, 118 ms at 10 Mbit/s with I = 0.05 s. (Dense pings lower it a lot: every 50 ms
at 1.5 Mbit/s, 699 ms; measured 725-736.)

Tolerances: max ping RTT within 10 % of that; goodput >= 91.5 % of the configured rate
(TCP's ceiling through a frame-counting shaper is 1448/1514 = 95.6 %; the floor allows about
five seconds of RTO recovery with the queue drained in 120 s. It was 93 % until
2026-11-30: 6 samples at 1.5 Mbit/s, 1.422 +- 0.0125 Mbit/s, least 1.396, put it 2.2 sd
under the mean, false-fail 0.005; at 91.5 % 4 sd). A cubic flow at 1.5 Mbit/s
fills this queue only now and then (its RTT jumps by hundreds of ms after each timeout's
slow start and Linux's RTO fires every few seconds), so that run lasts 120 s.

The bottleneck is the s0 -> h2 direction (EXPERIMENTS.md, family A); the ACKs return at
host rate (reverse_mbit=1000). Measured with the reverse direction shaped at 1.5 Mbit/s
too (the default, a symmetric link): goodput 90-94 % instead of 95 %, with the same
number of retransmissions but longer idle spells (the ACK clock goes through a second
HTB); that is left as a property of the symmetric link, not hidden here.
"""
import pytest

from bufferbloat.net.network import Network
from bufferbloat.net.topology import DumbbellTopo
from bufferbloat.results.theory import full_queue_rtt_ms
from tests.recipes import long_flow
from tests.retries import band, measure_until_met, observe
from tests.timing import realtime_only

#: physics and timing bands: the acceptance tier judges them (tests/retries.py)
pytestmark = pytest.mark.acceptance

#: goodput's floor, a share of the configured rate (the module's doc)
GOODPUT_FLOOR = 0.915


@realtime_only("tests/vm/test_families_vm.py::test_a_fifo100_rtt_far_above_fifo20_and_pie_holds_its_target "
               "and tests/vm/test_vm_fidelity.py::test_pie_holds_its_target_where_fifo_bloats")
@pytest.mark.parametrize("rate_mbit,ping_s,duration_s", [(1.5, 0.1, 120), (10, 0.05, 30)])
def test_full_fifo_rtt_and_goodput(rate_mbit, ping_s, duration_s, net_guard):
    """Goodput varies from run to run on this host: at 1.5 Mbit/s, 60 s runs measured
    95.1 % (five times), 93.4 %, and 89.6-91.7 % (four runs in a row one evening, old and
    new code alike). The pattern looks like a few RTOs per minute now and then, each
    wasting up to a second of link time, but that cause is not confirmed. The peak RTT
    varies too: one CI run at 10 Mbit/s for 20 s saw 104 ms against 118 (the flow's
    cubic cycles, ~4 s each, reached the full queue between two pings' worth of it); so
    the 10 Mbit/s run lasts 30 s. A run that misses any bound is printed, counted and
    measured again: the acceptance tier's sequential rule (tests/retries.py) passes it
    only if the next two runs meet every bound, so a bug that fails half the runs fails
    it 37.5 % of the time (0.5 x (1 - 0.5^2)), one that fails most runs nearly always.
    Every run is printed. A real regression (shaper overhead, the queue outside the
    leaf) fails every run."""
    def measure():
        res, leaf, theory = _measure(rate_mbit, ping_s, duration_s)
        # the queue built in the FIFO leaf, up to its limit: a pfifo drops only when full
        assert leaf["kind"] == "pfifo"
        assert leaf["drops"] > 0
        # the 0.1 s samples show the standing queue there (the peak may fall between two)
        band(f"queue peak in the 0.1 s samples, {rate_mbit} Mbit/s",
             max(q["qlen"] for q in res.after(2)), lo=80, unit="packets")
        return res, theory

    def misses_of(measured):
        res, theory = measured
        observe(f"max RTT, {rate_mbit} Mbit/s", res.max_rtt_ms(), theory - 0.10 * theory,
                theory + 0.10 * theory, "ms")
        observe(f"goodput, {rate_mbit} Mbit/s", res.goodput_mbit, lo=GOODPUT_FLOOR * rate_mbit,
                unit="Mbit/s")
        miss = []
        if abs(res.max_rtt_ms() - theory) > 0.10 * theory:
            miss.append(f"max RTT {res.max_rtt_ms():.1f} ms not within 10 % of {theory:.1f}")
        if res.goodput_mbit < GOODPUT_FLOOR * rate_mbit:
            miss.append(f"goodput {res.goodput_mbit:.3f} below {GOODPUT_FLOOR:.1%} of "
                        f"{rate_mbit}")
        return miss

    measure_until_met(measure, misses_of, f"FIFO at {rate_mbit} Mbit/s")


def _measure(rate_mbit, ping_s, duration_s):
    topo = DumbbellTopo(bottleneck_mbit=rate_mbit, buffer_pkts=100, cca="cubic",
                        switch="bridge", reverse_mbit=1000)
    with Network(topo) as net:
        res = long_flow(net, duration_s, ping_interval_s=ping_s)
        leaf = net.bottleneck_tree()["leaf"]
    bare = full_queue_rtt_ms(topo.base_rtt_ms(), 100, rate_mbit)
    theory = full_queue_rtt_ms(topo.base_rtt_ms(), 100, rate_mbit, probe_interval_s=ping_s)
    print(f"{rate_mbit} Mbit/s: max RTT {res.max_rtt_ms():.1f} ms (theory {theory:.1f} with "
          f"the pings' share of the buffer, {bare:.1f} without), "
          f"goodput {res.goodput_mbit:.3f} Mbit/s ({res.goodput_mbit / rate_mbit:.1%})")
    return res, leaf, theory
