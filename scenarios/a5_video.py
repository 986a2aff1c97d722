"""Family A.5: a UDP "video" stream (0.5 Mbit/s, 1200-byte packets) during the middle
third of the run, next to the long TCP flow, for FIFO, PIE and PIE + 10 flows. The
stream crosses the bottleneck (h1 -> h2, the direction of the s0 -> h2 bottleneck), so
it competes with TCP there: its jitter, loss and one-way latency are recorded, and the
TCP flow's cwnd, RTT and throughput show what happens while it is on."""
from bufferbloat.scenario import Scenario

from ._common import A_KNOBS, A_NET, A_TRAFFIC, A_VARIANTS

SCENARIO = Scenario(
    name="a5_video", family="A",
    description="UDP video stream in the middle third next to TCP (fifo/pie/pie10)",
    params=dict(A_NET, qdisc="fifo", buffer_pkts=100),
    traffic=A_TRAFFIC + ({"kind": "udp", "name": "video", "src": "h1", "dst": "h2",
                          "rate_kbit": "$udp_rate_kbit", "size_bytes": "$udp_size_bytes",
                          "start": 1 / 3, "stop": 2 / 3},),
    knobs=dict(A_KNOBS, udp_rate_kbit=500, udp_size_bytes=1200), variants=A_VARIANTS,
    duration_s=60, quick_duration_s=30, warmup_s=5,
    sweep={"variant": ["fifo", "pie", "pie10"]},
    figures=("cwnd", "rtt", "queue", "udp"),
)
