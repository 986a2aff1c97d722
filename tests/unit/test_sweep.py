"""Sweeps: cartesian points, stable point directories, resumption after an interruption."""
import json
import os

import pytest

from bufferbloat import sweep
from bufferbloat.errors import UsageError
from scenarios import catalogue

SCN = catalogue()["a4_wifi_loss"]


def fake_runner(calls, interrupt_at=None):
    def run_point(scn, overrides, duration_s=None, quick=False, run_dir=None, log=None):
        calls.append(dict(overrides))
        if interrupt_at is not None and len(calls) == interrupt_at:
            os.makedirs(run_dir)
            with open(os.path.join(run_dir, "result.json"), "w") as f:
                json.dump({"status": "interrupted"}, f)
            raise KeyboardInterrupt
        os.makedirs(run_dir, exist_ok=True)
        with open(os.path.join(run_dir, "result.json"), "w") as f:
            json.dump({"status": "ok", "overrides": overrides}, f)
        return run_dir
    return run_point


def test_parse_vary_and_points():
    vary = sweep.parse_vary(["loss_pct=0.5,1,2", "variant=fifo,pie"])
    assert vary == {"loss_pct": ["0.5", "1", "2"], "variant": ["fifo", "pie"]}
    pts = sweep.points(vary, repeat=2)
    assert len(pts) == 3 * 2 * 2
    assert len({(tuple(sorted(o.items())), r) for o, r in pts}) == 12
    for bad in (["loss_pct"], ["=1,2"], ["loss_pct="]):
        with pytest.raises(UsageError):
            sweep.parse_vary(bad)
    with pytest.raises(UsageError):
        sweep.parse_vary(["a=1", "a=2"])


def test_bad_value_stops_the_sweep_before_any_point_runs(tmp_path):
    calls = []
    with pytest.raises(UsageError) as err:
        sweep.run_sweep(SCN, {"loss_pct": ["1", "150"]}, 1, str(tmp_path),
                        fake_runner(calls), log=lambda *_: None)
    assert "loss_pct" in str(err.value) and calls == []


def test_an_interrupted_sweep_reruns_only_the_missing_points(tmp_path):
    vary = {"loss_pct": ["0.5", "1", "2", "4"], "variant": ["fifo", "pie"]}
    first = []
    with pytest.raises(KeyboardInterrupt):
        sweep.run_sweep(SCN, vary, 1, str(tmp_path), fake_runner(first, interrupt_at=4),
                        log=lambda *_: None)
    assert len(first) == 4           # 3 recorded, the 4th interrupted
    second = []
    index, failed = sweep.run_sweep(SCN, vary, 1, str(tmp_path), fake_runner(second),
                                    log=lambda *_: None)
    assert failed == 0
    assert len(second) == 8 - 3      # the interrupted point runs again, done ones don't
    assert first[3] == second[0]
    assert not any(p in second for p in first[:3])
    with open(index) as f:
        done = json.load(f)["done"]
    assert len(done) == 8 and all(d["status"] == "ok" for d in done)
    assert sum(1 for d in done if d.get("resumed")) == 3
    third = []
    sweep.run_sweep(SCN, vary, 1, str(tmp_path), fake_runner(third), log=lambda *_: None)
    assert third == []


def test_a_failed_point_is_recorded_and_the_sweep_goes_on(tmp_path):
    calls = []

    def run_point(scn, overrides, duration_s=None, quick=False, run_dir=None, log=None):
        calls.append(overrides)
        if overrides["loss_pct"] == "1":
            raise RuntimeError("iperf3 crashed")
        return fake_runner([])(scn, overrides, run_dir=run_dir)
    index, failed = sweep.run_sweep(SCN, {"loss_pct": ["0.5", "1", "2"]}, 1, str(tmp_path),
                                    run_point, log=lambda *_: None)
    assert failed == 1 and len(calls) == 3
    with open(index) as f:
        done = json.load(f)["done"]
    assert [d["status"] for d in done] == ["ok", "failed", "ok"]
    assert "iperf3 crashed" in done[1]["error"]


def test_point_dirs_are_stable_and_safe(tmp_path):
    a = sweep.point_dir("r", {"b": "1", "a": "x/y"}, 2)
    assert a == sweep.point_dir("r", {"a": "x/y", "b": "1"}, 2)
    assert a == os.path.join("r", "a=x_y,b=1", "rep-2")
