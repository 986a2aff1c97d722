"""Host kernel, Linux bridge: a full 100-packet FIFO behaves as theory says.

Theory (bufferbloat.theory): a probe behind a full FIFO of 100 x 1514-byte frames waits
100 * 1514 * 8 / rate: 807 ms at 1.5 Mbit/s, 121 ms at 10 Mbit/s (base RTT ~0 here).
Tolerances: max ping RTT within 10 % of that; goodput >= 93 % of the configured rate
(TCP's ceiling through a frame-counting shaper is 1448/1514 = 95.6 %).

The pings must catch the queue near its peak, and a cubic flow keeps this queue above 90
packets only ~3 % of the time (measured: at 1.5 Mbit/s its RTT jumps by hundreds of ms
per round trip after each timeout's slow start, and Linux's RTO fires spuriously every
few seconds; at 10 Mbit/s the queue swings by tens of packets within 100 ms). So probes
are dense, long and small: 16-byte payloads (58-byte frames) every 50 ms for 60 s at
1.5 Mbit/s (0.6 % of the link), every 20 ms for 20 s at 10 Mbit/s (0.2 %).
"""
import pytest

from bufferbloat.experiment import long_flow
from bufferbloat.network import Network
from bufferbloat.theory import full_queue_rtt_ms
from bufferbloat.topology import DumbbellTopo

@pytest.mark.parametrize("rate_mbit,ping_s,duration_s", [(1.5, 0.05, 60), (10, 0.02, 20)])
def test_full_fifo_rtt_and_goodput(rate_mbit, ping_s, duration_s, net_guard):
    topo = DumbbellTopo(bottleneck_mbit=rate_mbit, buffer_pkts=100, cca="cubic",
                        switch="bridge")
    with Network(topo) as net:
        res = long_flow(net, duration_s, ping_interval_s=ping_s, ping_size_bytes=16)
        leaf = net.bottleneck_tree()["leaf"]
    theory = full_queue_rtt_ms(topo.base_rtt_ms(), 100, rate_mbit)
    print(f"{rate_mbit} Mbit/s: max RTT {res.max_rtt_ms():.1f} ms (theory {theory:.1f}), "
          f"goodput {res.goodput_mbit:.3f} Mbit/s ({res.goodput_mbit / rate_mbit:.1%})")
    assert abs(res.max_rtt_ms() - theory) <= 0.10 * theory
    assert res.goodput_mbit >= 0.93 * rate_mbit
    # the queue built in the FIFO leaf, up to its limit
    assert leaf["kind"] == "pfifo" and leaf["drops"] > 0
    assert max(q["qlen"] for q in res.after(2)) >= 90
