"""The stall watchdog on a real network (host kernel, FIFO): a sweep whose first point runs
past its stall limit ends that point mid-traffic — its network removed, its processes
gone, its record ``failed`` with the reason and the series it sampled — reports it
``stalled``, and runs the second point to the end."""
import json
import os
import time

from bufferbloat.net.cleanup import STATE_PATH
from bufferbloat.run import engine, sweep
from bufferbloat.scenarios import catalogue
from tests.timing import EMULATED_CPU

#: the stall limit counts from the point's start: under TCG its build, idle RTT probe and
#: sampler take ~10 s before the traffic (docs/design/cost.md), so the limit there is later and
#: the traffic longer, for the watchdog to fire mid-traffic as on a host
TRAFFIC_S = 40 if EMULATED_CPU else 12
LIMIT_S = 20.0 if EMULATED_CPU else 5.0


def test_a_stalled_point_is_ended_and_the_next_one_runs(tmp_path, net_guard):
    scn = catalogue()["a1_fifo"]
    lines = []

    def limit(config):        # the first point "never ends": its limit is below its time
        return LIMIT_S if config["params"]["buffer_pkts"] == 20 else None
    t0 = time.monotonic()
    index, failed = sweep.run_sweep(scn, {"buffer_pkts": ["20", "50"]}, 1, str(tmp_path),
                                    engine.run_resolved, duration_s=TRAFFIC_S,
                                    base={"delay_ms": "0"}, log=lines.append,
                                    stall_limit=limit)
    wall = time.monotonic() - t0
    log = "\n".join(lines)
    with open(index) as f:
        done = json.load(f)["done"]
    assert [d["status"] for d in done] == ["stalled", "ok"], log
    assert failed == 1 and "STALLED" in log
    assert not os.path.exists(STATE_PATH)                 # the stalled network is gone
    with open(os.path.join(done[0]["run_dir"], "result.json")) as f:
        stalled = json.load(f)
    assert stalled["status"] == "failed" and stalled["error"].startswith("PointStalled")
    # ended mid-traffic (its traffic phase cut short, the whole point ended before its
    # traffic's time), with what it sampled kept
    phases = stalled["phases_s"]
    assert 0 < phases["traffic"] < TRAFFIC_S - 2, phases
    assert stalled["wall_s"] < TRAFFIC_S, stalled["wall_s"]
    with open(os.path.join(done[0]["run_dir"], "series", "qdisc.csv")) as f:
        assert len(f.read().splitlines()) > 10
    with open(os.path.join(done[1]["run_dir"], "result.json")) as f:
        second = json.load(f)
    assert second["status"] == "ok" and second["params"]["buffer_pkts"] == 50
    assert wall < LIMIT_S + TRAFFIC_S + 60, wall
