"""Family D: Reno, Cubic, Vegas and BBR over different paths (variant lan: 10 Mbit/s,
base RTT 10 ms; wan: 10 Mbit/s, 100 ms; lossy: 10 Mbit/s, 40 ms, 1 % loss), each with a
bulk flow (the default), with unlimited or limited sender buffers (sndbuf_bytes)."""
from bufferbloat.scenario import Scenario

SCENARIO = Scenario(
    name="d1_cca_paths", family="D",
    description="Reno/Cubic/Vegas/BBR over lan/wan/lossy paths, bulk flow",
    params=dict(bottleneck_mbit=10, delay_ms=2.5, qdisc="fifo", buffer_pkts=100,
                cca="cubic"),
    traffic=({"kind": "iperf", "name": "bulk", "src": "h1", "dst": "h2"},
             {"kind": "ping", "name": "ping", "src": "h1", "dst": "h2",
              "interval_s": 0.1}),
    variants={"lan": dict(delay_ms=2.5, loss_pct=0),
              "wan": dict(delay_ms=25, loss_pct=0),
              "lossy": dict(delay_ms=10, loss_pct=1)},
    duration_s=60, quick_duration_s=15, warmup_s=5,
    sweep={"cca": ["reno", "cubic", "vegas", "bbr"], "variant": ["lan", "wan", "lossy"]},
    quick_sweep={"cca": ["reno", "cubic", "vegas", "bbr"], "variant": ["lan"]},
    figures=("cwnd", "rtt", "queue"),
)
