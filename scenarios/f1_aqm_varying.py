"""Family F: FIFO, PIE, CoDel, FQ-CoDel and CAKE on a bottleneck whose capacity varies
(docs/guide/varying-links.md): one Cubic flow and pings over a 40 ms path whose 5 Mbit/s
mean capacity is either a square wave (2 s at 2 Mbit/s, 2 s at 8) or a seeded random
walk (0.5 s steps, 1-13 Mbit/s), the kernel's qdisc holding the queue while the HTB
class above it changes rate in place every 10 ms. Every qdisc gets the same 1000-packet
limit (CAKE its own memory limit)."""
from bufferbloat.net import tracegen
from bufferbloat.run.scenario import Scenario

#: 2 s at 2 Mbit/s, 2 s at 8: the FIFO's queue built at 8 drains four times slower
SQUARE = "2:2,2:8"
_WALK = tracegen.random_walk(60, 5, seed=2, step_s=0.5, high_mbit=10)
_MEAN = sum(m for _, m in _WALK) / len(_WALK)
#: a seeded log-rate walk, its mean over its 60 s scaled to 5 Mbit/s exactly
WALK = ",".join(f"{s:g}:{m * 5 / _MEAN:.3f}" for s, m in _WALK)
LINKS = {"square": SQUARE, "walk": WALK}
QDISCS = {"fifo": {}, "pie": {}, "codel": {}, "fq_codel": {}, "cake": {"buffer_pkts": None}}

SCENARIO = Scenario(
    name="f1_aqm_varying", family="F",
    description="FIFO/PIE/CoDel/FQ-CoDel/CAKE on a square-wave and a random-walk link "
                "(5 Mbit/s mean), 1 Cubic flow, 40 ms",
    params=dict(bottleneck_mbit=5, delay_ms=10, buffer_pkts=1000, cca="cubic",
                qdisc="fifo", link_schedule=SQUARE),
    traffic=({"kind": "iperf", "name": "flow", "src": "h1", "dst": "h2"},
             {"kind": "ping", "name": "ping", "src": "h1", "dst": "h2",
              "interval_s": 0.1}),
    variants={f"{q}_{link}": dict(extra, qdisc=q, link_schedule=sched)
              for link, sched in LINKS.items() for q, extra in QDISCS.items()},
    sweep={"variant": [f"{q}_{link}" for link in LINKS for q in QDISCS]},
    duration_s=60, quick_duration_s=20, warmup_s=5,
    figures=("capacity", "rtt", "queue", "qdelay"),
    study="F: the qdiscs of study E on a link whose capacity varies (a square wave of "
          "2 and 8 Mbit/s, a seeded random walk around 5 Mbit/s), 1 Cubic flow, 40 ms",
    expect="Every qdisc keeps the link used while it is backlogged (delivered / offered "
           "capacity ~1: a varying rate changes how long a queue takes to drain, not what "
           "HTB sends). On the square wave FIFO's 1000 packets fill at 8 Mbit/s and drain "
           "at 2 (a full FIFO is 6 s at 2 Mbit/s): its mean queueing delay runs to about a "
           "second, its goodput ~95 % of the 5 Mbit/s mean (the standing queue feeds each "
           "step up). The AQMs judge delay, not length: mean 5-25 ms, at least 5x below "
           "FIFO, with a p95 of ~100-150 ms from each step down, where the backlog held at "
           "8 Mbit/s takes 4x longer to leave until their next decision (CoDel's 100 ms "
           "interval, PIE's 15 ms updates). Their goodput is lower, ~65-80 % of the mean: "
           "after each step up Cubic regrows its window from ~9 packets (2 Mbit/s x (40 ms "
           "+ the target)) to 8 Mbit/s x 40 ms = 26 at ~0.5 packet per RTT (its Reno-"
           "friendly growth 3(1-b)/(1+b), b = 0.7), ~1.3 s of each 2 s high phase. The "
           "walk's first 20 s (the quick profile) average below its 60 s mean of 5 Mbit/s.",
    headline=tuple(
        dict(zip(("metric", "label", "theory", "expect"), entry)) for entry in (
            ("network:all:aggregate_throughput_mbit", "goodput", "goodput_ceiling_mbit",
             "square wave: FIFO ~95 % of the 5 Mbit/s mean, the AQMs ~65-80 % (Cubic "
             "regrows its window after each step up)"),
            ("link:qdelay_mean_ms", "queueing delay, mean", "queue_delay_ms",
             "FIFO: about a second and more; the AQMs 5-25 ms (at the rate of the "
             "moment)"),
            ("flow:srtt_mean_ms", "TCP srtt, mean", "base_rtt_ms",
             "the 40 ms base + the queue's delay"))),
    reproduce=(
        {"figure": "per run: the capacity against the delivered rate and the queue's "
                   "drain time",
         "command": "bufferbloat run f1_aqm_varying --set variant=QDISC_LINK",
         "files": "results/f1_aqm_varying/STAMP/figures/capacity.png"},
    ),
)
