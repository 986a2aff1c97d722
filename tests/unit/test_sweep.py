"""Sweeps: cartesian points, point directories keyed by the run's configuration, reuse only
of the same run, resumption after an interruption, the scenario's repetitions, the stall
watchdog. The fake run_point writes result.json through the real writer with the
identity the engine records (bufferbloat.run.identity), so reuse is decided as for real runs."""
import dataclasses
import json
import os
import re
import time

import pytest

from bufferbloat import cli
from bufferbloat.commands import placement, run_all
from bufferbloat.core.errors import UsageError
from bufferbloat.core.signals import deferred_signals
from bufferbloat.results.records_writer import RunWriter
from bufferbloat.run import identity, plan, sweep, watch
from bufferbloat.run.index import degraded
from bufferbloat.scenarios import catalogue

SCN = catalogue()["a4_wifi_loss"]
QUIET = dict(log=lambda *_: None)


@pytest.fixture(autouse=True)
def no_rate_cap(monkeypatch):
    """The tests decide the scaling cap themselves (not the machine they run on)."""
    monkeypatch.delenv("BUFFERBLOAT_MAX_MBIT", raising=False)
    monkeypatch.delenv("BUFFERBLOAT_GUEST_ACCEL", raising=False)
    monkeypatch.delenv(watch.STALL_ALLOWANCE_ENV, raising=False)


def fake_runner(calls, interrupt_at=None, fail=None, sleep_s=None, degraded=None):
    """A run_point that records like the engine (identity, status) without a network.
    ``interrupt_at``: the call that is interrupted; ``fail(overrides)``: raise for it;
    ``sleep_s(overrides)``: seconds of 'traffic' (a run that never ends: a long sleep);
    ``degraded(overrides, call number)``: the run's health verdict is degraded;
    ``keeper``: the sweep's network keeper (a serial sweep's, through the command)."""
    def run_point(run, run_dir=None, log=None, keeper=None):
        overrides, config = run.overrides, run.config
        calls.append(dict(overrides, rep=run.rep, quick=run.quick,
                          duration_s=run.asked_duration_s))
        w = RunWriter(run_dir)
        w.record.update(identity.record_fields(config), overrides=dict(overrides),
                        profile=config["profile"], duration_s=config["duration_s"])
        w.save()
        try:
            if interrupt_at is not None and len(calls) == interrupt_at:
                raise KeyboardInterrupt
            if fail is not None and fail(overrides):
                raise RuntimeError("iperf3 crashed")
            if sleep_s is not None and sleep_s(overrides):
                time.sleep(sleep_s(overrides))
        except KeyboardInterrupt:
            w.close("interrupted", "KeyboardInterrupt")
            raise
        except Exception as exc:
            w.close("failed", f"{type(exc).__name__}: {exc}")
            raise
        bad = degraded is not None and degraded(overrides, len(calls))
        w.record["health"] = {"verdict": "degraded" if bad else "healthy",
                              "problems": ["1 started late (f +2.3 s)"] if bad else [],
                              "checks": {}}
        w.close("ok")
        return run_dir
    return run_point


def _index(path):
    with open(path) as f:
        return json.load(f)


def _record(run_dir):
    with open(os.path.join(run_dir, "result.json")) as f:
        return json.load(f)


def test_parse_vary_and_points():
    vary = plan.parse_vary(["loss_pct=0.5,1,2", "variant=fifo,pie"])
    assert vary == {"loss_pct": ["0.5", "1", "2"], "variant": ["fifo", "pie"]}
    pts = plan.points(vary, repeat=2)
    assert len(pts) == 3 * 2 * 2
    assert len({(tuple(sorted(o.items())), r) for o, r in pts}) == 12
    for bad in (["loss_pct"], ["=1,2"], ["loss_pct="]):
        with pytest.raises(UsageError):
            plan.parse_vary(bad)
    with pytest.raises(UsageError):
        plan.parse_vary(["a=1", "a=2"])


def test_bad_value_stops_the_sweep_before_any_point_runs(tmp_path):
    calls = []
    with pytest.raises(UsageError) as err:
        sweep.run_sweep(SCN, {"loss_pct": ["1", "150"]}, 1, str(tmp_path),
                        fake_runner(calls), **QUIET)
    assert "loss_pct" in str(err.value) and calls == []


def test_an_interrupted_sweep_reruns_only_the_missing_points(tmp_path):
    vary = {"loss_pct": ["0.5", "1", "2", "4"], "variant": ["fifo", "pie"]}
    first = []
    with pytest.raises(KeyboardInterrupt):
        sweep.run_sweep(SCN, vary, 1, str(tmp_path), fake_runner(first, interrupt_at=4),
                        **QUIET)
    assert len(first) == 4           # 3 recorded, the 4th interrupted
    second = []
    index, failed = sweep.run_sweep(SCN, vary, 1, str(tmp_path), fake_runner(second),
                                    **QUIET)
    assert failed == 0
    assert len(second) == 8 - 3      # the interrupted point runs again, done ones don't
    assert first[3] == second[0]
    assert not any(p in second for p in first[:3])
    done = _index(index)["done"]
    assert len(done) == 8 and all(d["status"] == "ok" for d in done)
    assert sum(1 for d in done if d.get("resumed")) == 3
    # the interrupted attempt was rerun in its own place: no second directory for it
    assert not any(os.path.exists(d["run_dir"] + ".2") for d in done)
    third = []
    sweep.run_sweep(SCN, vary, 1, str(tmp_path), fake_runner(third), **QUIET)
    assert third == []


def test_the_same_command_twice_runs_nothing_the_second_time(tmp_path):
    vary = {"loss_pct": ["1", "2"]}
    first, second = [], []
    sweep.run_sweep(SCN, vary, 2, str(tmp_path), fake_runner(first), quick=True,
                    duration_s=7, base={"variant": "pie"}, **QUIET)
    stamps = {}
    index = os.path.join(str(tmp_path), SCN.name, "sweep", "index.json")
    for d in _index(index)["done"]:
        stamps[d["run_dir"]] = _record(d["run_dir"])["finished"]
    lines = []
    sweep.run_sweep(SCN, vary, 2, str(tmp_path), fake_runner(second), quick=True,
                    duration_s=7, base={"variant": "pie"}, log=lines.append)
    assert len(first) == 4 and second == []
    assert sum("already recorded" in line for line in lines) == 4
    done = _index(index)["done"]
    assert {d["run_dir"]: _record(d["run_dir"])["finished"] for d in done} == stamps


def _dirs(index_path):
    return [d["run_dir"] for d in _index(index_path)["done"]]


def test_quick_then_full_reruns_every_point_into_its_own_directories(tmp_path):
    vary = {"loss_pct": ["1", "2"]}
    quick, full = [], []
    index = os.path.join(str(tmp_path), SCN.name, "sweep", "index.json")
    sweep.run_sweep(SCN, vary, 1, str(tmp_path), fake_runner(quick), quick=True, **QUIET)
    quick_dirs = _dirs(index)
    quick_records = [_record(d) for d in quick_dirs]
    sweep.run_sweep(SCN, vary, 1, str(tmp_path), fake_runner(full), quick=False, **QUIET)
    full_dirs = _dirs(index)
    assert len(quick) == 2 and len(full) == 2 and all(not c["quick"] for c in full)
    assert not set(quick_dirs) & set(full_dirs)
    assert all("/quick-" in d for d in quick_dirs) and all("/full-" in d for d in full_dirs)
    # the quick runs are still there, untouched, and say what they are
    assert [_record(d) for d in quick_dirs] == quick_records
    assert {r["run_config"]["profile"] for r in quick_records} == {"quick"}
    assert {_record(d)["run_config"]["profile"] for d in full_dirs} == {"full"}
    entries = _index(index)
    assert all(not d.get("resumed") for d in entries["done"])
    assert entries["profile"] == "full"
    assert {c["profile"] for c in entries["configs"].values()} == {"full"}


@pytest.mark.parametrize("first, second", [
    (dict(base={"variant": "fifo"}), dict(base={"variant": "pie"})),       # --set
    (dict(base={"delay_ms": "5"}), dict(base={"delay_ms": "6"})),          # --set
    (dict(duration_s=10), dict(duration_s=None)),                           # --time
    (dict(duration_s=10), dict(duration_s=11)),                             # --time
])
def test_a_changed_set_or_time_reruns(tmp_path, first, second):
    vary = {"loss_pct": ["1", "2"]}
    a, b = [], []
    sweep.run_sweep(SCN, vary, 1, str(tmp_path), fake_runner(a), **first, **QUIET)
    before = _dirs(os.path.join(str(tmp_path), SCN.name, "sweep", "index.json"))
    lines = []
    sweep.run_sweep(SCN, vary, 1, str(tmp_path), fake_runner(b), **second, log=lines.append)
    after = _dirs(os.path.join(str(tmp_path), SCN.name, "sweep", "index.json"))
    assert len(a) == 2 and len(b) == 2
    assert not any("already recorded" in line for line in lines)
    assert not set(before) & set(after)
    assert all(_record(d)["status"] == "ok" for d in before + after)
    # a run of each configuration, each recording its own key
    assert {_record(d)["run_key"] for d in before}.isdisjoint(
        {_record(d)["run_key"] for d in after})


def test_a_changed_scaling_cap_reruns(tmp_path, monkeypatch):
    vary = {"loss_pct": ["1"]}
    runs = {}
    for cap in (None, "1", "0.5", "0.5"):
        if cap is None:
            monkeypatch.delenv("BUFFERBLOAT_MAX_MBIT", raising=False)
        else:
            monkeypatch.setenv("BUFFERBLOAT_MAX_MBIT", cap)
        calls = []
        sweep.run_sweep(SCN, vary, 1, str(tmp_path), fake_runner(calls), **QUIET)
        runs.setdefault(cap, []).append(len(calls))
        d, = _dirs(os.path.join(str(tmp_path), SCN.name, "sweep", "index.json"))
        scaling = _record(d)["run_config"]["scaling"]
        assert (scaling or {}).get("max_rate_mbit") == (float(cap) if cap else None)
    # 1.5 Mbit/s unscaled, scaled to 1, to 0.5: three runs; the same cap again: none
    assert runs == {None: [1], "1": [1], "0.5": [1, 0]}


def test_a_changed_scenario_definition_reruns(tmp_path):
    vary = {"loss_pct": ["1", "2"]}
    a, b, c = [], [], []
    sweep.run_sweep(SCN, vary, 1, str(tmp_path), fake_runner(a), **QUIET)
    edited = dataclasses.replace(SCN, params=dict(SCN.params, buffer_pkts=50))
    sweep.run_sweep(edited, vary, 1, str(tmp_path), fake_runner(b), **QUIET)
    assert len(a) == 2 and len(b) == 2
    # a change the runs do not see (the description) reruns nothing
    reworded = dataclasses.replace(edited, description="the same, said otherwise")
    sweep.run_sweep(reworded, vary, 1, str(tmp_path), fake_runner(c), **QUIET)
    assert c == []


def test_a_directory_holding_another_run_is_never_overwritten(tmp_path):
    config = identity.run_config(SCN, {"loss_pct": "1"}, rep=1)
    path = plan.point_dir(os.path.join(str(tmp_path), SCN.name, "sweep"),
                           {"loss_pct": "1"}, 1, config)
    os.makedirs(path)
    foreign = {"status": "ok", "run_key": "0" * 64, "note": "another run"}
    with open(os.path.join(path, "result.json"), "w") as f:
        json.dump(foreign, f)
    calls = []
    index, _ = sweep.run_sweep(SCN, {"loss_pct": ["1"]}, 1, str(tmp_path),
                               fake_runner(calls), **QUIET)
    assert len(calls) == 1
    assert _record(path) == foreign
    d, = _dirs(index)
    assert d == path + ".2" and _record(d)["run_key"] == identity.run_key(config)


def test_a_failed_point_is_recorded_and_the_sweep_goes_on(tmp_path):
    calls = []
    index, failed = sweep.run_sweep(SCN, {"loss_pct": ["0.5", "1", "2"]}, 1, str(tmp_path),
                                    fake_runner(calls, fail=lambda o: o["loss_pct"] == "1"),
                                    **QUIET)
    assert failed == 1 and len(calls) == 3
    done = _index(index)["done"]
    assert [d["status"] for d in done] == ["ok", "failed", "ok"]
    assert "iperf3 crashed" in done[1]["error"]
    # rerun: only the failed point runs again, in its own directory
    again = []
    sweep.run_sweep(SCN, {"loss_pct": ["0.5", "1", "2"]}, 1, str(tmp_path),
                    fake_runner(again), **QUIET)
    assert [c["loss_pct"] for c in again] == ["1"]
    assert _dirs(index)[1] == done[1]["run_dir"]


def test_point_dirs_are_stable_readable_and_safe():
    a = plan.point_dir("r", {"b": "1", "a": "x/y"}, 2)
    assert a == plan.point_dir("r", {"a": "x/y", "b": "1"}, 2)
    assert a == os.path.join("r", "a=x_y,b=1", "rep-2")
    cfg1 = identity.run_config(SCN, {"loss_pct": "1"}, quick=True, rep=1)
    cfg2 = identity.run_config(SCN, {"loss_pct": "1"}, quick=True, rep=2)
    d1 = plan.point_dir("r", {"loss_pct": "1"}, 1, cfg1)
    d2 = plan.point_dir("r", {"loss_pct": "1"}, 2, cfg2)
    short = identity.short(identity.config_key(cfg1))
    assert d1 == os.path.join("r", "loss_pct=1", f"quick-{short}", "rep-1")
    assert os.path.dirname(d1) == os.path.dirname(d2)   # repetitions share a directory


def test_a_c1_sweep_without_repeat_runs_the_scenarios_five_repetitions(tmp_path,
                                                                         monkeypatch):
    import bufferbloat.run.engine as engine
    calls = []
    monkeypatch.setattr(engine, "run_resolved", fake_runner(calls))
    monkeypatch.setattr("bufferbloat.run.where.require_here", lambda topos: None)
    rc = cli.main(["sweep", "c1_red_vs_pie", "--quick", "--host", "--no-figures",
                   "--out", str(tmp_path)])
    scn = catalogue()["c1_red_vs_pie"]
    points = len(plan.points(scn.sweep_for(True)))
    assert rc == 0 and scn.repeat == 5
    assert len(calls) == points * 5
    for varied, _ in plan.points(scn.sweep_for(True)):
        reps = sorted(c["rep"] for c in calls
                      if all(str(c[k]) == str(v) for k, v in varied.items()))
        assert reps == [1, 2, 3, 4, 5]
    calls.clear()
    rc = cli.main(["sweep", "c1_red_vs_pie", "--quick", "--repeat", "6", "--host",
                   "--no-figures", "--out", str(tmp_path)])
    assert rc == 0 and len(calls) == points      # reps 1-5 recorded: only rep 6 runs
    assert {c["rep"] for c in calls} == {6}


def test_a_stalled_point_is_ended_reported_and_the_others_complete(tmp_path):
    calls, lines = [], []
    never_ends = fake_runner(calls, sleep_s=lambda o: 3600 if o["loss_pct"] == "1" else 0)
    t0 = time.monotonic()
    index, failed = sweep.run_sweep(SCN, {"loss_pct": ["0.5", "1", "2"]}, 1, str(tmp_path),
                                    never_ends, stall_limit=lambda cfg: 0.5,
                                    log=lines.append)
    assert time.monotonic() - t0 < 30
    assert failed == 1 and len(calls) == 3
    done = _index(index)["done"]
    assert [d["status"] for d in done] == ["ok", "stalled", "ok"]
    assert done[1]["error"].startswith("stalled: ")
    assert any("STALLED" in line for line in lines)
    rec = _record(done[1]["run_dir"])      # the run itself recorded why it ended
    assert rec["status"] == "failed" and rec["error"].startswith("PointStalled")
    assert all(_record(d["run_dir"])["status"] == "ok" for d in (done[0], done[2]))


def test_the_watchdog_waits_for_a_held_teardown(tmp_path):
    """A stall during a build or teardown (deferred_signals) is delivered after it."""
    finished = []

    def run_point(run, run_dir=None, **_):
        with deferred_signals():
            time.sleep(1.0)                  # the watchdog fires at 0.3 s, in here
            finished.append(True)
        time.sleep(30)                       # ...and reaches the run once it is over
    t0 = time.monotonic()
    index, failed = sweep.run_sweep(SCN, {"loss_pct": ["1"]}, 1, str(tmp_path), run_point,
                                    stall_limit=lambda cfg: 0.3, **QUIET)
    assert finished == [True]
    assert 1.0 <= time.monotonic() - t0 < 10
    assert [d["status"] for d in _index(index)["done"]] == ["stalled"]


def test_stall_limit_is_the_duration_plus_a_stated_margin(monkeypatch):
    from bufferbloat.run.engine import FLOW_GRACE_S
    cfg = identity.run_config(SCN, quick=True)
    assert watch.stall_limit_s(cfg) == pytest.approx(
        (cfg["duration_s"] + FLOW_GRACE_S + watch.STALL_ALLOWANCE_S) * 1.5)
    monkeypatch.setenv(watch.STALL_ALLOWANCE_ENV, "0")
    assert watch.stall_limit_s(cfg) == pytest.approx((cfg["duration_s"] + FLOW_GRACE_S) * 1.5)
    monkeypatch.setenv(watch.STALL_LIMIT_ENV, "2.5")
    assert watch.stall_limit_s(cfg) == 2.5
    monkeypatch.delenv(watch.STALL_LIMIT_ENV)
    monkeypatch.setenv(watch.STALL_ALLOWANCE_ENV, "soon")
    with pytest.raises(UsageError):
        watch.stall_limit_s(cfg)


def test_run_ends_a_stalled_repetition_and_runs_the_next(tmp_path, monkeypatch, capsys):
    import bufferbloat.run.engine as engine
    calls = []
    fake = fake_runner(calls)

    def run_point(run, out_root=None, **_):
        path = os.path.join(out_root, f"rep{run.rep}")
        fake(run, run_dir=path)
        if run.rep == 1:
            time.sleep(3600)               # the first repetition never ends
        return path
    monkeypatch.setattr(engine, "run_resolved", run_point)
    monkeypatch.setattr("bufferbloat.run.where.require_here", lambda topos: None)
    monkeypatch.setenv(watch.STALL_LIMIT_ENV, "0.5")
    t0 = time.monotonic()
    rc = cli.main(["run", "a4_wifi_loss", "--repeat", "2", "--time", "5", "--host",
                   "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert time.monotonic() - t0 < 30
    assert rc == 1 and [c["rep"] for c in calls] == [1, 2]
    assert "[1/2] a4_wifi_loss (full profile, 5 s, stall limit 0.5 s)" in out
    assert "run stalled" in err and f"result: {tmp_path}/rep2" in out


def test_run_all_reports_a_stalled_point_and_completes_the_others(tmp_path, monkeypatch,
                                                                   capsys):
    """The catalogue (``run-all``, quick, one scenario) with one point whose traffic never
    ends: it is ended at the stall limit (env), reported, and the other points run."""
    import bufferbloat.run.engine as engine

    class Caps:
        def require(self, needed):
            pass
    monkeypatch.setattr(run_all, "needs", lambda runs: (Caps(), []))
    monkeypatch.setattr("bufferbloat.run.where.require_here", lambda topos: None)
    scn = catalogue()["a4_wifi_loss"]
    todo = run_all.catalogue_points(True, ["a4_wifi_loss"])
    stuck = todo[1][2]                      # the second point's varied values
    calls = []
    monkeypatch.setattr(engine, "run_resolved", fake_runner(
        calls, sleep_s=lambda o: 3600 if all(o.get(k) == v for k, v in stuck.items())
        else 0))
    monkeypatch.setenv(watch.STALL_LIMIT_ENV, "0.5")
    t0 = time.monotonic()
    rc = cli.main(["run-all", "--quick", "--only", "a4_wifi_loss", "--host",
                   "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert time.monotonic() - t0 < 60
    assert rc == 1 and len(calls) == len(todo) == len(plan.points(scn.sweep_for(True)))
    done = _index(os.path.join(str(tmp_path), "index.json"))["done"]
    assert [d["status"] for d in done].count("stalled") == 1
    assert done[1]["status"] == "stalled"
    assert all(d["status"] == "ok" for i, d in enumerate(done) if i != 1)
    assert "stall limit 0.5 s)" in out and f"[2/{len(todo)}]" in out
    assert "STALLED" in out and done[1]["run_dir"] in err


def test_a_degraded_point_is_kept_aside_and_run_again(tmp_path):
    """The emulator fell behind on a point's first attempt: that run is kept, renamed
    rep-N.degraded-1 and listed in the index; the point runs again in place and counts
    as healthy. With no retries, the degraded run is the point's result."""
    calls = []
    first = lambda o, n: o.get("loss_pct") == "1" and n == 2    # noqa: E731
    index, failed = sweep.run_sweep(SCN, {"loss_pct": ["0", "1"]}, 1, str(tmp_path),
                                    fake_runner(calls, degraded=first), retries=1,
                                    **QUIET)
    done = _index(index)["done"]
    assert failed == 0 and len(calls) == 3
    assert [d["health"] for d in done] == ["healthy", "healthy"]
    aside = done[1]["degraded_attempts"]
    assert aside == [done[1]["run_dir"] + ".degraded-1"]
    assert _record(aside[0])["health"]["verdict"] == "degraded"
    assert plan.set_aside(aside[0]) and not plan.set_aside(done[1]["run_dir"])
    assert _record(done[1]["run_dir"])["health"]["verdict"] == "healthy"
    assert "degraded_attempts" not in done[0]
    # always degraded, one retry: two attempts, the last one is the point's (marked)
    calls = []
    index, _ = sweep.run_sweep(SCN, {"loss_pct": ["2"]}, 1, str(tmp_path),
                               fake_runner(calls, degraded=lambda o, n: True), retries=1,
                               **QUIET)
    done = _index(index)["done"]
    assert len(calls) == 2 and done[-1]["health"] == "degraded"
    assert degraded(done) == [done[-1]]
    # no retries: one attempt
    calls = []
    sweep.run_sweep(SCN, {"loss_pct": ["3"]}, 1, str(tmp_path),
                    fake_runner(calls, degraded=lambda o, n: True), retries=0, **QUIET)
    assert len(calls) == 1


def test_retry_degraded_is_validated_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.setattr("bufferbloat.run.where.require_here", lambda topos: None)
    for bad in ("-1", "11"):
        assert cli.main(["sweep", "a4_wifi_loss", "--vary", "loss_pct=1", "--host",
                         "--retry-degraded", bad, "--out", str(tmp_path)]) == 2
    monkeypatch.setenv(watch.RETRY_DEGRADED_ENV, "x")
    assert cli.main(["run", "a4_wifi_loss", "--host", "--out", str(tmp_path)]) == 2
    monkeypatch.setenv(watch.RETRY_DEGRADED_ENV, "3")
    assert watch.retry_degraded_default() == 3
    assert not os.listdir(str(tmp_path))


@pytest.mark.parametrize("quick", [True, False])
def test_run_all_plans_every_point_of_the_catalogue_before_it_runs(quick):
    """run-all checks every point's topology (where it runs, what the kernel lacks)
    before anything is built. A point whose knob is derived from another point (D's
    streams: the bulk run's goodput) has no value yet then: it must be planned with a
    stand-in, not refused (the full profile once stopped here with exit 2)."""
    from bufferbloat.run import derive
    todo = run_all.catalogue_points(quick, None)
    topos = placement.topologies([p.run for p in plan.plan_points(todo, quick=quick)])
    distinct = {(s.name, tuple(sorted((k, str(v)) for k, v in o.items())))
                for s, o, _, _ in todo}
    assert len(topos) == len(distinct) > 0
    waiting = [(s, o) for s, o, _, _ in todo if derive.needs(s, o)]
    assert bool(waiting) == (not quick)     # the full profile has D's stream points


def test_every_point_says_how_it_ended_its_health_and_its_cost(tmp_path):
    """A serial sweep prints, as each point ends, its status, its health verdict and its
    wall time beyond its traffic (a long run's progress: which point, how it went)."""
    lines = []
    sweep.run_sweep(SCN, {"loss_pct": ["0", "1"]}, 1, str(tmp_path),
                    fake_runner([], sleep_s=lambda o: 0.3,
                                degraded=lambda o, n: o.get("loss_pct") == "1"),
                    quick=True, duration_s=7, log=lines.append)
    done = [line for line in lines if " done, " in line]
    assert len(done) == 2, lines
    m = re.search(r"\[1/2 done, 0 in flight\] .*: ok, healthy, (\d+) s \((-?\d+) s beyond "
                  r"its 7 s of traffic", done[0])
    assert m and int(m.group(1)) - int(m.group(2)) in (6, 7, 8), done[0]   # rounding
    assert "loss_pct=1" in done[1] and ": ok, degraded, " in done[1], done[1]


def _set_walls(entries, walls):
    """Give the recorded runs of ``entries`` these wall times (their record's wall_s)."""
    for d, wall in zip(entries, walls):
        path = os.path.join(d["run_dir"], "result.json")
        with open(path) as f:
            rec = json.load(f)
        rec["wall_s"] = wall
        with open(path, "w") as f:
            json.dump(rec, f)


def _first_estimate_on_resume(tmp_path, vary):
    """Run the quick 7 s sweep ``vary`` again in ``tmp_path``: its first progress line
    with a time left."""
    lines = []
    sweep.run_sweep(SCN, vary, 1, str(tmp_path), fake_runner([]), quick=True,
                    duration_s=7, log=lines.append)
    return next(line for line in lines if " s left" in line)


def test_a_resumed_sweep_estimates_from_what_its_recorded_points_cost(tmp_path):
    """Resuming (C's 60 points over several sessions): the points already recorded say
    what the rest will cost (their record's wall time beyond its traffic), not the
    assumed 15 s a point."""
    vary = {"loss_pct": ["0.5", "1", "2", "4"]}
    first = []
    with pytest.raises(KeyboardInterrupt):
        sweep.run_sweep(SCN, vary, 1, str(tmp_path), fake_runner(first, interrupt_at=3),
                        quick=True, duration_s=7, **QUIET)
    index = os.path.join(str(tmp_path), SCN.name, "sweep", "index.json")
    done = [d for d in _index(index)["done"] if d["status"] == "ok"]
    assert len(done) == 2
    _set_walls(done, (47.0, 67.0))                 # 40 and 60 s beyond their 7 s
    first_left = _first_estimate_on_resume(tmp_path, vary)
    assert "~114 s left: 2 points: 14 s of traffic + 50 s each beyond it, median of 2" \
        in first_left, first_left


def test_recorded_points_after_a_failed_one_are_not_counted_as_waiting(tmp_path):
    """Resuming a sweep whose first point failed: the three points recorded after it
    are not waiting (their traffic is not counted again), and their cost sets the
    estimate from the first line on."""
    vary = {"loss_pct": ["0.5", "1", "2", "4"]}
    sweep.run_sweep(SCN, vary, 1, str(tmp_path),
                    fake_runner([], fail=lambda ov: ov["loss_pct"] == "0.5"),
                    quick=True, duration_s=7, **QUIET)
    index = os.path.join(str(tmp_path), SCN.name, "sweep", "index.json")
    done = [d for d in _index(index)["done"] if d["status"] == "ok"]
    assert len(done) == 3
    _set_walls(done, (27.0, 37.0, float("nan")))   # 20, 30, and no wall time
    first_left = _first_estimate_on_resume(tmp_path, vary)
    assert "~32 s left: 1 points: 7 s of traffic + 25 s each beyond it, median of 2" \
        in first_left, first_left


def _ok_record(path, key, **extra):
    os.makedirs(path)
    with open(os.path.join(path, "result.json"), "w") as f:
        json.dump({"status": "ok", "run_key": key, **extra}, f)


def test_a_run_a_fix_made_obsolete_is_run_again_and_kept_aside_unread(tmp_path):
    """a.5's UDP stream once began at the run's t0 + its start, 2-4 s before its time
    (its key did not change with the fix): a record of it, an ok run whose stream entry
    has no t_launch, is no longer reused: the point runs again in its place, the old run
    is kept as rep-N.superseded-K, and reports no longer find it."""
    from bufferbloat.results.records import find_runs, superseded_why
    old_stream = {"kind": "UdpStream", "name": "video", "sent": 520}
    path = str(tmp_path / "variant=fifo" / "rep-1")
    _ok_record(path, "k1", traffic_results=[{"kind": "Iperf3Flow", "flow": "long"},
                                         old_stream])
    assert superseded_why(plan.read_record(path))
    assert plan.recorded(path) == ("superseded", "k1")
    assert plan.recorded_ok(path, "k1") is None
    assert find_runs(tmp_path) == [path]
    assert plan.place(path, "k1") == (path, False)
    assert not os.path.exists(path) and os.path.isdir(path + ".superseded-1")
    assert find_runs(tmp_path) == []                      # set aside: not read
    # the rerun records its stream's launch: reused from then on
    _ok_record(path, "k1", traffic_results=[dict(old_stream, t_launch=12.0, scheduled_s=12.0)])
    assert superseded_why(plan.read_record(path)) is None
    assert plan.recorded_ok(path, "k1") == path and plan.place(path, "k1") == (path, True)
    assert find_runs(tmp_path) == [path]
    # a run without a UDP stream is never superseded by this fix
    other = str(tmp_path / "other")
    _ok_record(other, "k2", traffic_results=[{"kind": "Iperf3Flow", "flow": "long"}])
    assert plan.recorded(other) == ("ok", "k2")


def test_two_values_that_make_one_run_are_refused_before_anything_runs():
    """plan_sweep resolves every point once; two values of a key that make the same run
    (20 and 20.0 packets) are refused, naming the key and both values."""
    with pytest.raises(UsageError, match=r"invalid --vary loss_pct: '1' and '1.0' are the "
                                         r"same value"):
        plan.plan_sweep(SCN, {"loss_pct": ["1", "1.0", "2"]}, 1)
    with pytest.raises(UsageError, match="both set"):
        plan.plan_sweep(SCN, {"loss_pct": ["1"]}, 1, base={"loss_pct": "2"})
    planned = plan.plan_sweep(SCN, {"loss_pct": ["1", "2"]}, 2)
    assert [(p.varied["loss_pct"], p.rep) for p in planned] == [
        ("1", 1), ("1", 2), ("2", 1), ("2", 2)]
    assert len({p.run.key for p in planned}) == 4
    assert len({p.run.config_key for p in planned}) == 2
