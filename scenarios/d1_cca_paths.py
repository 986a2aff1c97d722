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
    study="D: Reno, Cubic, Vegas and BBR over lan, wan and lossy paths, with bulk, "
          "on-off and rate-limited traffic and two send buffers",
    expect="Bulk: every CCA fills the lan and wan links; Reno and Cubic fill the "
           "100-packet FIFO (RTT up to base + 121 ms) while Vegas and BBR keep it near "
           "the base RTT; on the lossy path Reno and Cubic lose most goodput, BBR least; "
           "streams get their rate; a 64 kB send buffer caps the wan path at ~5 Mbit/s.",
    headline=(
        {"metric": "network:all:aggregate_throughput_mbit", "label": "goodput",
         "theory": "goodput_ceiling_mbit",
         "expect": "bulk: near the ceiling on lan/wan; less on the lossy path"},
        {"metric": "flow:srtt_mean_ms", "label": "TCP srtt, mean", "theory": "rtt_ms",
         "expect": "Reno/Cubic: up to the full-queue RTT; Vegas/BBR: near the base RTT"},
        {"metric": "ping:rtt_mean_ms", "label": "ping RTT, mean", "theory": "base_rtt_ms",
         "expect": "the queue the CCA keeps, on top of the base RTT"},
        {"metric": "flow:retransmits", "label": "retransmissions",
         "expect": "Reno/Cubic overflow the FIFO; Vegas rarely"},
    ),
    reproduce=(
        {"figure": "cwnd and RTT over time per CCA (one run each)",
         "command": "bufferbloat run d1_cca_paths --set cca=CCA --set variant=PATH",
         "files": "results/d1_cca_paths/STAMP/figures/{cwnd,rtt}.png"},
        {"figure": "goodput and srtt per CCA (mean ± std over runs), one line per path and "
                   "traffic",
         "command": "bufferbloat sweep d1_cca_paths",
         "plot": "cca"},
    ),
)
