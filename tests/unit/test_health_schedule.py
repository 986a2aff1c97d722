"""Health judges every part with a schedule, early and late: a part that
began before its due time is a fault of the run (``faulty``, named in ``faults`` with its
offset), never a degraded emulator; one that began late beyond the slack stays degraded."""

import pytest

from bufferbloat.results import health as hl
from bufferbloat.results import health_record
from bufferbloat.run.index import degraded, faulty
from unit.test_health import _write

ORIGIN = 3.0     # the traffic's origin, run time s (result.json traffic_start_s)


def _parts():
    """One record entry per kind of start health reads, each due 10 s after the origin
    and begun on time: an iperf3 flow (its client's launch), a UDP stream (its first
    send), ping and irtt probes (their launch), a fetch loop (its first fetch), and a
    NetPerfMeter part's flow (its own clock, nested in the part's entry)."""
    due = ORIGIN + 10.0
    return [
        {"name": "bulk", "kind": "Iperf3Flow", "flow": "bulk", "scheduled_s": due,
         "t_launch": due + 0.3, "t_start": due + 0.5, "bytes_sent": 10**6,
         "bytes_received": 10**6},
        {"name": "video", "kind": "UdpStream", "flow": "video", "stream": "video",
         "udp": True, "scheduled_s": due, "t_launch": due + 0.01, "sent": 500,
         "bytes_received": 600_000},
        {"name": "rtt", "kind": "PingProbe", "probe": "rtt", "scheduled_s": due,
         "t_launch": due + 0.02},
        {"name": "udprtt", "kind": "IrttProbe", "probe": "udprtt", "scheduled_s": due,
         "t_launch": due + 0.05},
        {"name": "pages", "kind": "WebFetcher", "fetch": "pages", "scheduled_s": due,
         "t_launch": due + 0.01},
        {"name": "npm", "kind": "NetPerfMeterRun", "flows": [
            {"flow": "npm1", "scheduled_s": due, "t_launch": due - 4.0,
             "first_on_s": due + 0.05, "t_start": due + 0.2, "bytes_sent": 10**6}]},
    ]


def _run(tmp_path, edit=None):
    """A healthy run whose traffic is :func:`_parts`; ``edit(entries)`` changes them."""
    run = _write(tmp_path / "r")
    run.record["traffic_start_s"] = ORIGIN
    run.record["traffic_results"] = _parts()
    if edit:
        edit(run.record["traffic_results"])
    return run


def _entry(entries, name):
    for e in entries:
        if e["name"] == name:
            return e["flows"][0] if "flows" in e else e
    raise KeyError(name)


def test_every_part_on_time_is_healthy(tmp_path):
    h = hl.assess(_run(tmp_path))
    assert h["verdict"] == "healthy", (h["faults"], h["problems"])
    assert h["faults"] == [] and h["problems"] == []
    early, late = h["checks"]["starts_not_early"], h["checks"]["flows_on_time"]
    assert early["ok"] and early["parts"] == 6 and early["early"] == 0
    assert late["ok"] and late["flows"] == 6 and late["no_data"] == 0  # probes carry none


@pytest.mark.parametrize("name, label", [
    ("bulk", "bulk"), ("video", "video"), ("rtt", "rtt"), ("udprtt", "udprtt"),
    ("pages", "pages"), ("npm", "npm (npm1)")])
def test_a_part_3_s_early_is_a_fault_named_with_its_offset(tmp_path, name, label):
    """Whatever the part's kind: faulty (not degraded), the part named with how early it
    began and its due time and start against the traffic's origin."""
    def early(entries):
        e = _entry(entries, name)
        e["first_on_s" if "first_on_s" in e else "t_launch"] = e["scheduled_s"] - 3.0
    h = hl.assess(_run(tmp_path, early))
    assert h["verdict"] == "faulty" and h["problems"] == [], h
    check = h["checks"]["starts_not_early"]
    assert check["ok"] is False and check["fault"] and check["early"] == 1
    assert check["value"] == pytest.approx(-3.0)
    assert len(h["faults"]) == 1
    assert (f"{label} 3.00 s early (due at origin + 10.00 s, began at origin + 7.00 s)"
            in h["faults"][0]), h["faults"]
    assert "a fault of the run" in hl.headline(h)
    assert h["checks"]["flows_on_time"]["ok"]       # early is not lateness


@pytest.mark.parametrize("name", ["bulk", "video", "rtt", "udprtt", "pages", "npm"])
def test_a_part_late_beyond_the_slack_is_degraded_as_before(tmp_path, name):
    def late(entries):
        e = _entry(entries, name)
        e["first_on_s" if "first_on_s" in e else "t_launch"] = (
            e["scheduled_s"] + health_record.MAX_START_LATE_S + 0.5)
    h = hl.assess(_run(tmp_path, late))
    assert h["verdict"] == "degraded" and h["faults"] == [], h
    check = h["checks"]["flows_on_time"]
    assert check["ok"] is False and check["late"] == 1
    assert h["checks"]["starts_not_early"]["ok"]


def test_late_within_the_slack_passes(tmp_path):
    def late(entries):
        for e in entries:
            e = e["flows"][0] if "flows" in e else e
            e["first_on_s" if "first_on_s" in e else "t_launch"] = e["scheduled_s"] + 1.9
    assert hl.assess(_run(tmp_path, late))["verdict"] == "healthy"


def test_a_fault_outranks_a_degraded_emulator(tmp_path):
    """Early and late in one run: faulty, its lateness still listed as a problem."""
    def both(entries):
        _entry(entries, "video")["t_launch"] -= 3.0
        _entry(entries, "bulk")["t_launch"] += 5.0
    h = hl.assess(_run(tmp_path, both))
    assert h["verdict"] == "faulty"
    assert len(h["faults"]) == 1 and "video" in h["faults"][0]
    assert len(h["problems"]) == 1 and "bulk +5.3 s" in h["problems"][0]


def test_a_faulty_run_is_set_apart_from_degraded_ones():
    """A sweep does not rerun a faulty run (the fault is the run's: it would recur) and
    lists it apart; it never counts as healthy."""
    index = [{"status": "ok", "health": "faulty", "run_dir": "a"},
             {"status": "ok", "health": "degraded", "run_dir": "b"},
             {"status": "ok", "health": "healthy", "run_dir": "c"}]
    assert [e["run_dir"] for e in faulty(index)] == ["a"]
    assert [e["run_dir"] for e in degraded(index)] == ["b"]
    assert set(hl.NOT_MEASURED) == {"degraded", "faulty"}


def test_a_faulty_run_is_flagged_as_the_runs_fault_and_not_averaged(tmp_path):
    """Its one flag names the fault (not the emulator); a sweep leaves it out of means
    as it does a degraded run."""
    from bufferbloat.plots.flags import flags
    from bufferbloat.plots.sweep import Point

    run = _run(tmp_path, lambda entries: _entry(entries, "video").update(t_launch=10.0))
    run.record["health"] = hl.assess(run)
    out = flags(run, rows=[])
    assert len(out) == 1 and "health: faulty" in out[0] and "video" in out[0], out
    assert Point.degraded.fget(type("P", (), {"run": run})())
