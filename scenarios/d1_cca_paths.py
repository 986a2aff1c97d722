"""Family D: Reno, Cubic, Vegas and BBR over three paths modelled on the study's networks,
with the study's traffic tool, NetPerfMeter: bulk (one saturated flow), on-off (ONE
connection that sends 1 s and idles 5 s, so its window carries from one burst to the
next; ``slow_start_after_idle`` 1, the kernel's default, restarts it, 0 keeps it), and
streams paced at 50/25 % of the goodput the matching bulk run measured (same CCA, path
and sender buffer: a sweep runs the bulk points first and reads their goodput back,
``bulk_goodput_mbit``; a stream without it is refused), with unlimited or limited sender
buffers (``sndbuf_bytes``: 0 = the kernel's autotuning, or e.g. 65536).

The paths (variants). The study's three networks differ mainly in capacity and
buffering: one is shaped to 3 Mbit/s downstream, goodputs differ about 5x between the
slowest and the fastest, and bulk RTTs reach seconds on the deepest-buffered one. The
variants keep that ordering, data flowing h1 -> h2 (downstream) through the bottleneck:

| variant | rate | base RTT | buffer | full-buffer queueing delay |
|---|---|---|---|---|
| ``fiber`` | 15 Mbit/s | 10 ms | 128 pkts | 103 ms |
| ``cellular`` | 5 Mbit/s | 60 ms | 600 pkts | 1.45 s |
| ``dsl`` | 3 Mbit/s | 40 ms | 64 pkts | 258 ms |

so bulk goodput orders fiber > cellular > dsl (about 5x from dsl to fiber) and bulk RTT
cellular (seconds) > dsl > fiber. (The earlier 10 Mbit/s paths lan / wan / lossy stay
as variants outside the sweep, and so does ``cellular_trace``: the cellular path with its
capacity varying around 5 Mbit/s, a seeded synthetic walk, ``link_schedule``.) Every run records the application's one-way delay of
every message (npm_msg.csv; the hosts share one clock) next to the TCP RTT (tcp.csv)
and ping's.
"""
from bufferbloat.net import tracegen
from bufferbloat.run.scenario import Scenario

#: the cellular_trace variant's capacity: 60 s of a seeded log-rate walk around 5 Mbit/s
#: in 0.5 s steps (bufferbloat trace walk --mbit 5 --seed 1 makes the same kind of file)
_WALK = tracegen.random_walk(60, 5, seed=1, step_s=0.5)
_MEAN = sum(m for _, m in _WALK) / len(_WALK)
#: (scaled so that its mean over the 60 s is the path's 5 Mbit/s exactly)
CELLULAR_WALK = ",".join(f"{s:g}:{m * 5 / _MEAN:.3f}" for s, m in _WALK)

#: the study's on-off pattern: on 1 s, off 5 s
ON_OFF_S = (1, 5)
#: the streams' frames per second (a video-like stream; each frame the rate's share).
#: NetPerfMeter schedules a frame one period after the previous one was sent, so a late
#: wake-up is lost: 25 fps came out 3.6 % short in the TCG VM, 10 fps exact, 50 and 100
#: fps 10-25 % short
STREAM_FPS = 20

SCENARIO = Scenario(
    name="d1_cca_paths", family="D",
    description="Reno/Cubic/Vegas/BBR x fiber/cellular/dsl x bulk/on-off/streams x sndbuf "
                "(NetPerfMeter)",
    params=dict(bottleneck_mbit=15, delay_ms=2.5, qdisc="fifo", buffer_pkts=128,
                cca="cubic"),
    traffic=({"kind": "netperfmeter", "name": "bulk", "src": "h1", "dst": "h2",
              "when": {"load": "bulk"}},
             {"kind": "netperfmeter", "name": "onoff", "src": "h1", "dst": "h2",
              "on_off_s": ON_OFF_S, "when": {"load": "onoff"}},
             {"kind": "netperfmeter", "name": "stream", "src": "h1", "dst": "h2",
              "rate_mbit": "$bulk_goodput_mbit", "rate_scale": 0.5,
              "frame_rate_hz": STREAM_FPS,
              "when": {"load": "stream50"}},
             {"kind": "netperfmeter", "name": "stream", "src": "h1", "dst": "h2",
              "rate_mbit": "$bulk_goodput_mbit", "rate_scale": 0.25,
              "frame_rate_hz": STREAM_FPS,
              "when": {"load": "stream25"}},
             {"kind": "ping", "name": "ping", "src": "h1", "dst": "h2",
              "interval_s": 0.1}),
    knobs=dict(load="bulk", bulk_goodput_mbit=None),
    variants={"fiber": dict(bottleneck_mbit=15, delay_ms=2.5, buffer_pkts=128, loss_pct=0),
              "cellular": dict(bottleneck_mbit=5, delay_ms=15, buffer_pkts=600,
                               loss_pct=0),
              # the cellular path whose capacity varies: a seeded synthetic walk around
              # its 5 Mbit/s (docs/guide/varying-links.md), outside the sweep
              "cellular_trace": dict(bottleneck_mbit=5, delay_ms=15, buffer_pkts=600,
                                     loss_pct=0, link_schedule=CELLULAR_WALK),
              "dsl": dict(bottleneck_mbit=3, delay_ms=10, buffer_pkts=64, loss_pct=0),
              "lan": dict(bottleneck_mbit=10, delay_ms=2.5, buffer_pkts=100, loss_pct=0),
              "wan": dict(bottleneck_mbit=10, delay_ms=25, buffer_pkts=100, loss_pct=0),
              "lossy": dict(bottleneck_mbit=10, delay_ms=10, buffer_pkts=100, loss_pct=1)},
    duration_s=60, quick_duration_s=15, warmup_s=5,
    sweep={"cca": ["reno", "cubic", "vegas", "bbr"],
           "variant": ["fiber", "cellular", "dsl"],
           "load": ["bulk", "onoff", "stream50", "stream25"], "sndbuf_bytes": [0, 65536]},
    quick_sweep={"cca": ["reno", "cubic", "vegas", "bbr"], "variant": ["fiber"]},
    # the streams' rate: the matching bulk run's goodput (bufferbloat/run/derive.py)
    derived={"bulk_goodput_mbit": {"when": {"load": ("stream50", "stream25")},
                                   "from": {"load": "bulk"},
                                   "metric": ("network", "all", "goodput_up_mbit")}},
    figures=("cwnd", "rtt", "owd", "queue"),
    study="D: Reno, Cubic, Vegas and BBR over fiber, cellular and dsl paths with "
          "NetPerfMeter's bulk, on-off and paced traffic and two send buffers",
    expect="Bulk goodput orders fiber > cellular > dsl (about 5x from dsl to fiber); "
           "Reno and Cubic fill each path's FIFO (RTT up to base + 103 ms on fiber, "
           "seconds on cellular) while Vegas and BBR keep it near the base RTT; streams "
           "get their rate at a one-way delay near half the base RTT plus the queue; "
           "on-off keeps its window across bursts only with slow_start_after_idle 0.",
    headline=(
        {"metric": "network:all:goodput_up_mbit", "label": "goodput",
         "theory": "goodput_ceiling_mbit",
         "expect": "bulk: near the ceiling; streams: their rate"},
        {"metric": "flow:srtt_mean_ms", "label": "TCP srtt, mean", "theory": "rtt_ms",
         "expect": "Reno/Cubic: up to the full-queue RTT; Vegas/BBR: near the base RTT"},
        {"metric": "flow:owd_mean_ms",
         "label": "one-way delay (NetPerfMeter's: send buffer included), mean",
         "expect": "the path's one-way delay plus the wait in the sender's socket buffer "
                   "(docs/reference/one-way-delay.md)"},
        {"metric": "flow:path_owd_mean_ms", "label": "the path's one-way delay, mean",
         "expect": "half the base RTT plus the queue the CCA keeps"},
        {"metric": "flow:sndbuf_wait_mean_ms", "label": "wait in the send buffer, mean",
         "expect": "seconds with an autotuned buffer behind a deep FIFO; small with "
                   "64 kB"},
        {"metric": "flow:retransmits", "label": "retransmissions",
         "expect": "Reno/Cubic overflow the FIFO; Vegas rarely"},
    ),
    reproduce=(
        {"figure": "cwnd and RTT over time per CCA (one run each)",
         "command": "bufferbloat run d1_cca_paths --set cca=CCA --set variant=PATH",
         "files": "results/d1_cca_paths/STAMP/figures/{cwnd,rtt}.png"},
        {"figure": "the TCP RTT next to the application's one-way delay, per run",
         "command": "bufferbloat run d1_cca_paths --set cca=CCA --set variant=PATH",
         "files": "results/d1_cca_paths/STAMP/figures/owd.png"},
        {"figure": "goodput and srtt per CCA (mean over runs, 95 % CI), a column per path, "
                   "one line per load and send buffer",
         "command": "bufferbloat sweep d1_cca_paths",
         "plot": "cca"},
        {"figure": "the bag plot of srtt against one-way delay per CCA, every message of "
                   "every run",
         "command": "bufferbloat sweep d1_cca_paths",
         "plot": "srtt-owd-bag"},
        {"figure": "the study's table: goodput, srtt, one-way delay and ssthresh changes "
                   "per CCA x path x load x sender buffer",
         "command": "bufferbloat sweep d1_cca_paths",
         "files": "results/d1_cca_paths/sweep/figures/d1_cca_paths-table-study-d.{csv,md}"},
    ),
)
