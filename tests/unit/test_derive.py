"""Knobs a sweep fills from another point's result (bufferbloat/run/derive.py): study D's
streams at a fraction of the matching bulk run's goodput. The fake run_point records
like the engine (identity, status) and writes the metric the rule reads."""
import json
import os

import pytest

from bufferbloat.core.errors import UsageError
from bufferbloat.results.records_writer import RunWriter
from bufferbloat.run import derive, identity, plan, sweep
from bufferbloat.scenarios import catalogue

SCN = catalogue()["d1_cca_paths"]     # 15 Mbit/s and below: never scaled in the VM
QUIET = dict(log=lambda *_: None)


def fake_runner(calls, goodput=9.0, scaling=None):
    def run_point(run, run_dir=None, log=None):
        calls.append(dict(run.overrides, rep=run.rep))
        config, rep = run.config, run.rep
        w = RunWriter(run_dir)
        w.record.update(identity.record_fields(config), scaling=scaling,
                        knobs=config["knobs"])
        w.close("ok")
        with open(os.path.join(run_dir, "metrics.json"), "w") as f:
            json.dump({"metrics": [{"scope": "network", "name": "all",
                                    "metric": "goodput_up_mbit",
                                    "value": goodput + rep, "unit": "Mbit/s"}]}, f)
        return run_dir
    return run_point


def test_a_stream_without_its_bulk_goodput_is_refused():
    with pytest.raises(UsageError, match="bulk_goodput_mbit"):
        SCN.build({"load": "stream50"})
    topo, knobs, traffic = SCN.build({"load": "stream50", "bulk_goodput_mbit": 8})
    stream = next(t for t in traffic if t["name"] == "stream")
    assert stream["rate_mbit"] == 8 and stream["rate_scale"] == 0.5


def test_needs_provides_and_order():
    assert derive.needs(SCN, {"load": "stream25"}) == SCN.derived
    assert derive.needs(SCN, {"load": "stream25", "bulk_goodput_mbit": 3}) == {}
    assert derive.needs(SCN, {"load": "onoff"}) == {}
    assert derive.provides(SCN, {"load": "bulk"})
    assert derive.provides(SCN, {})                 # bulk is the default load
    todo = plan.plan_points([(SCN, {"load": v}, {"load": v}, 1)
                             for v in ("stream50", "onoff", "bulk")])
    assert [p.overrides["load"] for p in derive.providers_first(todo)] == [
        "bulk", "stream50", "onoff"]


def test_sweep_runs_bulk_first_and_paces_the_streams_at_its_goodput(tmp_path):
    calls = []
    index, failed = sweep.run_sweep(SCN, {"load": ["stream50", "stream25", "bulk"]}, 2,
                                    str(tmp_path), fake_runner(calls), quick=True,
                                    base={"variant": "fiber"}, **QUIET)
    assert failed == 0
    assert [c["load"] for c in calls[:2]] == ["bulk", "bulk"]
    for c in calls[2:]:
        # the matching bulk run: the same repetition (its goodput: 9 + rep)
        assert c["bulk_goodput_mbit"] == pytest.approx(9.0 + c["rep"])
    with open(index) as f:
        done = json.load(f)["done"]
    keys = {(e["varied"]["load"], e["rep"]): e["run_key"] for e in done}
    assert len(set(keys.values())) == 6          # the derived value is in the identity
    # a second run of the same sweep reuses every point (same bulk goodput, same keys)
    again = []
    sweep.run_sweep(SCN, {"load": ["stream50", "stream25", "bulk"]}, 2, str(tmp_path),
                    fake_runner(again), quick=True, base={"variant": "fiber"}, **QUIET)
    assert again == []


def test_the_goodput_is_taken_back_to_the_study_units_of_a_scaled_run(tmp_path):
    calls = []
    sweep.run_sweep(SCN, {"load": ["bulk", "stream50"]}, 1, str(tmp_path),
                    fake_runner(calls, goodput=4.0, scaling={"factor": 0.5}), quick=True,
                    **QUIET)
    assert calls[1]["bulk_goodput_mbit"] == pytest.approx(5.0 / 0.5)


def test_a_stream_whose_bulk_run_is_missing_fails_not_guesses(tmp_path):
    calls = []
    index, failed = sweep.run_sweep(SCN, {"load": ["stream50"]}, 1, str(tmp_path),
                                    fake_runner(calls), quick=True, **QUIET)
    assert failed == 1 and calls == []
    with open(index) as f:
        entry = json.load(f)["done"][0]
    assert entry["status"] == "failed" and "load=bulk" in entry["error"]
    assert "bulk_goodput_mbit" in entry["error"]
