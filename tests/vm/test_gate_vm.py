"""The gate's VM points: one quick point of each experiment family (A-E) through the
whole pipeline in the project VM, checked for what correct code always gives, however
slow the emulator was: a complete record (its configuration, identity, tools, kernel,
network read back, series, metrics, the qdiscs sampled at the configured period) with a
health verdict whose every check says why,
every labelled flow in tcp.csv, and every scheduled part started at the traffic's
origin plus its start: never early, late by at most a slack sized for TCG.

No physics band is judged here (the acceptance tier does: tests/vm/test_families_vm.py
and the others marked ``acceptance``). A run the emulator fell behind on is a complete
record too: it is counted in the session's degraded ledger (tests/retries.py), never
failed for it. Each point runs at its quick profile's duration (about 105 s of traffic in all).
"""
import json
import os

import numpy as np
import pytest

from bufferbloat.results.records import load_run
from bufferbloat.run.engine import run_point
from bufferbloat.scenarios import catalogue
from tests.retries import SESSION, current_test, family_of

#: a part may start this much after its due time under TCG, on a loaded machine (the
#: health verdict calls more than 2 s late degraded, bufferbloat.results.health.
#: MAX_START_LATE_S; a web part held back 4.4 s by its server's start-up was the worst
#: seen, since fixed); it may never start before it
LATE_SLACK_S = 5.0
#: clock granularity between the schedule's thread and our own launch stamps
EARLY_SLACK_S = 0.05
#: NetPerfMeter's flows start on the tool's own clock (``first_on_s``): its processes
#: start their measurements within a tick or two of each other, up to 0.5 s measured
#: (health.MAX_OWN_CLOCK_EARLY_S is the verdict's limit, 1 s)
OWN_CLOCK_EARLY_S = 1.0

#: (scenario, overrides, labelled TCP flows expected in tcp.csv): each at its quick
#: profile's duration (a5 30 s, b2 20, c1 30, d1 15, e1 10)
POINTS = {
    "a": ("a5_video", {"variant": "pie"}, 1),
    "b": ("b2_pie_target", {}, None),
    "c": ("c1_red_vs_pie", {"variant": "pi", "flows": 20}, 20),
    "d": ("d1_cca_paths", {"cca": "cubic", "variant": "fiber"}, None),
    "e": ("e1_aqm_kflows", {"variant": "fq_codel"}, None),
}

CAT = catalogue()
RECORD_KEYS = ("status", "scenario", "overrides", "profile", "duration_s", "params",
               "qdisc", "traffic", "machine", "tools", "network", "sysctls", "series",
               "traffic_results", "sampler", "health", "run_config", "run_key",
               "traffic_start_s", "departures")


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return str(tmp_path_factory.mktemp("gate"))


def _scheduled(record):
    """Every scheduled thing the record gives: (name, due run time, started run time or
    None, how early its clock allows it to read), from the parts' summaries and their
    flows."""
    found = []
    for s in record.get("traffic_results") or []:
        if not isinstance(s, dict):
            continue
        for x in [s] + [f for f in s.get("flows") or [] if isinstance(f, dict)]:
            if x.get("scheduled_s") is None:
                continue
            key = next((k for k in ("first_on_s", "t_launch", "t_start")
                        if isinstance(x.get(k), (int, float))), None)
            found.append((x.get("flow") or x.get("name") or s.get("kind"), x["scheduled_s"],
                          key and x[key],
                          OWN_CLOCK_EARLY_S if key == "first_on_s" else EARLY_SLACK_S))
    return found


@pytest.mark.parametrize("family", sorted(POINTS))
def test_one_quick_point_of_each_family_is_complete(out, family):
    name, overrides, flows = POINTS[family]
    duration_s = CAT[name].quick_duration_s
    run_dir = run_point(CAT[name], dict(overrides), out_root=out, quick=True, log=lambda line: print(f"{name}: {line}"))
    run = load_run(run_dir)
    rec = run.record
    health = rec.get("health") or {}
    SESSION.note(current_test(), [(run_dir, [str(p) for p in health.get("problems") or []])]
                 if health.get("verdict") == "degraded" else [], runs=1,
                 family=family_of(name))
    print(f"{name} {overrides}: verdict {health.get('verdict')}, "
          f"problems {health.get('problems')}")

    # the record: complete, its identity and configuration those asked for
    assert rec["status"] == "ok", rec.get("error")
    missing = [k for k in RECORD_KEYS if k not in rec]
    assert not missing, f"record lacks {missing}"
    assert rec["scenario"]["name"] == name if isinstance(rec["scenario"], dict) else \
        rec["scenario"] == name
    assert all(rec["overrides"].get(k) == v for k, v in overrides.items()), rec["overrides"]
    assert rec["duration_s"] == duration_s and rec["profile"] == "quick"
    assert rec["machine"].get("kernel") or rec["machine"].get("release"), rec["machine"]
    assert rec["tools"], "no tool versions recorded"
    assert isinstance(rec["run_key"], str) and len(rec["run_key"]) >= 8

    # the verdict: one of the three, every check with its outcome, problems named
    assert health.get("verdict") in ("healthy", "degraded"), (
        f"{health.get('verdict')}: faults {health.get('faults')}, problems "
        f"{health.get('problems')}, origin passed by {rec.get('origin_passed_s')} s")
    checks = health["checks"]
    assert checks and all("ok" in c for c in checks.values()), checks
    failed = sorted(k for k, c in checks.items() if c["ok"] is False)
    if health["verdict"] == "healthy":
        assert not failed, failed
    else:
        assert failed and health["problems"], health

    # the series: every file the record lists is there and has rows; metrics written
    for series, rel in rec["series"].items():
        path = rel if os.path.isabs(str(rel)) else os.path.join(run_dir, str(rel))
        if isinstance(rel, str) and rel.endswith(".csv"):
            assert os.path.getsize(path) > 0, f"{series}: {path} empty"
    with open(os.path.join(run_dir, "metrics.json")) as f:
        assert json.load(f)["metrics"], "no metrics"
    tcp = run.series("tcp")
    t = np.asarray(tcp["t"], dtype=float)
    assert len(t) and np.all(np.isfinite(t)), "tcp.csv has no sample or a bad time"
    if flows is not None:
        labels = sorted({str(f) for f in tcp["flow"]})
        assert len(labels) >= flows, f"{len(labels)} flows in tcp.csv, {flows} configured"

    # the sampler ticks at the configured period: per qdisc, the median spacing of its
    # rows (a missed tick widens one gap, not the median: TCG misses a few %)
    q = run.series("qdisc")
    period = rec["sample_period_s"]
    keys = sorted({(str(d), str(h)) for d, h in zip(q["dev"], q["handle"])})
    assert keys, "qdisc.csv has no rows"
    for dev, handle in keys:
        mine = np.array([t for t, d, h in zip(q["t"], q["dev"], q["handle"])
                         if (str(d), str(h)) == (dev, handle)], dtype=float)
        gap = float(np.median(np.diff(np.sort(mine))))
        assert abs(gap - period) <= 0.25 * period, \
            f"{dev} {handle}: sampled every {gap * 1e3:.1f} ms, configured {period * 1e3:g} ms"

    # the schedule: every part at origin + its start, never early
    origin = rec["traffic_start_s"]
    sched = _scheduled(rec)
    assert sched, "no scheduled part in the record"
    for what, due, started, early_slack in sched:
        assert due >= origin - EARLY_SLACK_S, f"{what} due at {due:.3f} s, before the " \
            f"traffic's origin {origin:.3f} s"
        assert started is not None, f"{what} never started"
        assert started >= due - early_slack, f"{what} started {due - started:.2f} s early"
        assert started <= due + LATE_SLACK_S, f"{what} started {started - due:.2f} s late"
    if name == "a5_video":
        _the_stream_at_its_time(run, rec, origin, duration_s)


def _the_stream_at_its_time(run, rec, origin, duration_s):
    """A.5's stream: its first packet sent at origin + start x duration, never
    before; it runs its (stop - start) x duration, plus half a second (a stream that
    starts late ends as late: it sends its count from its first packet)."""
    spec = next(s for s in rec["traffic"]
                if s.get("kind") == "udp" and s.get("name") == "video")
    udp = run.series("udp")
    sent = np.sort(np.asarray(udp["t_sent"], dtype=float))
    assert len(sent), "the stream sent nothing"
    start, stop = origin + spec["start"] * duration_s, origin + spec["stop"] * duration_s
    print(f"stream due {start:.3f}-{stop:.3f} s, sent {sent[0]:.3f}-{sent[-1]:.3f} s")
    assert sent[0] >= start - EARLY_SLACK_S, f"stream started {start - sent[0]:.2f} s early"
    assert sent[0] <= start + LATE_SLACK_S, f"stream started {sent[0] - start:.2f} s late"
    assert sent[-1] - sent[0] <= stop - start + 0.5, \
        f"stream ran {sent[-1] - sent[0]:.2f} s, its part is {stop - start:.2f} s"
