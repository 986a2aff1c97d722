"""Family D: Reno, Cubic, Vegas and BBR over different paths (variant lan: 10 Mbit/s,
base RTT 10 ms; wan: 10 Mbit/s, 100 ms; lossy: 10 Mbit/s, 40 ms, 1 % loss), with three
kinds of traffic (load: bulk, the default; onoff: 1 s on, 5 s off, a new connection per
burst; stream50/stream25: paced at 50/25 % of the bottleneck rate, i.e. about 52/26 % of
the bulk goodput, which is ~95 % of the rate), with unlimited or limited sender buffers
(sndbuf_bytes: 0 = the kernel's autotuning, or e.g. 65536)."""
from bufferbloat.scenario import Scenario

SCENARIO = Scenario(
    name="d1_cca_paths", family="D",
    description="Reno/Cubic/Vegas/BBR x lan/wan/lossy x bulk/on-off/streams x sndbuf",
    params=dict(bottleneck_mbit=10, delay_ms=2.5, qdisc="fifo", buffer_pkts=100,
                cca="cubic"),
    traffic=({"kind": "iperf", "name": "bulk", "src": "h1", "dst": "h2",
              "when": {"load": "bulk"}},
             {"kind": "iperf", "name": "onoff", "src": "h1", "dst": "h2", "on_off_s": (1, 5),
              "when": {"load": "onoff"}},
             {"kind": "iperf", "name": "stream", "src": "h1", "dst": "h2", "rate_pct": 50,
              "when": {"load": "stream50"}},
             {"kind": "iperf", "name": "stream", "src": "h1", "dst": "h2", "rate_pct": 25,
              "when": {"load": "stream25"}},
             {"kind": "ping", "name": "ping", "src": "h1", "dst": "h2",
              "interval_s": 0.1}),
    knobs=dict(load="bulk"),
    variants={"lan": dict(delay_ms=2.5, loss_pct=0),
              "wan": dict(delay_ms=25, loss_pct=0),
              "lossy": dict(delay_ms=10, loss_pct=1)},
    duration_s=60, quick_duration_s=15, warmup_s=5,
    sweep={"cca": ["reno", "cubic", "vegas", "bbr"], "variant": ["lan", "wan", "lossy"],
           "load": ["bulk", "onoff", "stream50", "stream25"], "sndbuf_bytes": [0, 65536]},
    quick_sweep={"cca": ["reno", "cubic", "vegas", "bbr"], "variant": ["lan"]},
    figures=("cwnd", "rtt", "queue"),
)
