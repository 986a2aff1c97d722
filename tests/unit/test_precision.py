"""``--precision``: a sweep adds repetitions to each configuration until its healthy
runs' headline metrics are within the precision, never past ``--max-reps``, counting
only healthy runs, and a resumed sweep adds nothing to a configuration that is done
(bufferbloat/run/precision.py, run/sweep.py). The runs are fakes with a known spread."""

import json
import os
import random

import pytest

from bufferbloat.core.errors import UsageError
from bufferbloat.results.metrics import METRICS_VERSION
from bufferbloat.results.records_writer import RunWriter
from bufferbloat.run import identity, sweep
from bufferbloat.run.executor import SerialExecutor
from bufferbloat.run.precision import PrecisionRule
from bufferbloat.scenarios import catalogue

SCN = catalogue()["a1_fifo"]
QUIET = dict(log=lambda *_: None, stall_limit=None)


@pytest.fixture(autouse=True)
def no_rate_cap(monkeypatch):
    monkeypatch.delenv("BUFFERBLOAT_MAX_MBIT", raising=False)
    monkeypatch.delenv("BUFFERBLOAT_GUEST_ACCEL", raising=False)


def fake_runner(calls, sd_of, degraded=lambda run: False, seed=1):
    """Runs whose headline metrics are 100 ms RTT (and 1 s fetches, 1.4 Mbit/s, 80 ms
    of queue) with a relative spread ``sd_of(buffer)``."""
    rng = random.Random(seed)

    def run_point(run, run_dir=None, log=None):
        calls.append((run.overrides.get("buffer_pkts"), run.rep))
        sd = sd_of(run.overrides.get("buffer_pkts"))
        w = RunWriter(run_dir)
        w.record.update(identity.record_fields(run.config),
                        scenario={"name": run.name, "headline": list(run.scn.headline)})
        w.record["health"] = {"verdict": "degraded" if degraded(run) else "healthy",
                              "problems": [], "checks": {}}
        w.close("ok")
        rows = [{"scope": s, "name": n, "metric": m, "value": v * rng.gauss(1, sd),
                 "unit": ""}
                for s, n, m, v in (("ping", "p", "rtt_mean_ms", 100.0),
                                   ("web", "all", "total_mean_s", 1.0),
                                   ("network", "all", "aggregate_throughput_mbit", 1.4),
                                   ("link", "l", "qdelay_mean_ms", 80.0))]
        with open(os.path.join(run_dir, "metrics.json"), "w") as f:
            json.dump({"metrics_version": METRICS_VERSION, "metrics": rows}, f)
        return run_dir
    return run_point


def _index(path):
    with open(path) as f:
        return json.load(f)


def test_repetitions_are_added_until_precise_and_never_past_max_reps(tmp_path):
    calls = []
    rule = PrecisionRule(5, min_reps=3, max_reps=12).check()
    runner = fake_runner(calls, lambda b: 0.002 if b == "20" else 0.2)
    index, failed = sweep.run_sweep(SCN, {"buffer_pkts": ["20", "100"]}, None,
                                    str(tmp_path), runner, quick=True, precision=rule,
                                    **QUIET)
    assert failed == 0
    reps = {b: sorted(r for bb, r in calls if bb == b) for b in ("20", "100")}
    assert reps["20"] == [1, 2, 3]                     # precise at the first stage
    assert reps["100"] == list(range(1, 13))           # 20 % spread: stops at 12
    judged = _index(index)["precision"]["configs"]
    assert sorted(v["why"] for v in judged.values()) == ["max-reps", "precise"]
    precise = next(v for v in judged.values() if v["why"] == "precise")
    rtt = precise["metrics"]["ping:rtt_mean_ms"]
    assert rtt["half_width"] <= 0.05 * rtt["mean"] and rtt["n"] == 3
    # resumed: nothing more runs, the counts are kept
    again = []
    sweep.run_sweep(SCN, {"buffer_pkts": ["20", "100"]}, None, str(tmp_path),
                    fake_runner(again, lambda b: 0.2), quick=True, precision=rule, **QUIET)
    assert again == []
    assert len(_index(index)["done"]) == 15


def test_only_healthy_runs_count(tmp_path):
    calls = []
    rule = PrecisionRule(5, min_reps=3, max_reps=8).check()
    runner = fake_runner(calls, lambda b: 0.002, degraded=lambda run: run.rep == 2)
    sweep.run_sweep(SCN, {"buffer_pkts": ["20"]}, None, str(tmp_path), runner,
                    quick=True, precision=rule, **QUIET)
    assert [r for _, r in calls] == [1, 2, 3, 4]       # rep 2 degraded: one more


def test_bad_precision_options_are_refused():
    for rule in (PrecisionRule(0), PrecisionRule(5, min_reps=1),
                 PrecisionRule(5, min_reps=6, max_reps=5), PrecisionRule(5, confidence=1.5)):
        with pytest.raises(UsageError):
            rule.check()


@pytest.mark.parametrize("argv,said", [
    (["sweep", "a1_fifo", "--min-reps", "3"], "only go with --precision"),
    (["sweep", "a1_fifo", "--precision", "5", "--repeat", "3"], "cannot be combined"),
    (["sweep", "d1_cca_paths", "--precision", "5"], "not available for d1_cca_paths"),
    (["sweep", "a1_fifo", "--precision", "0"], "--precision"),
    (["run-all", "--precision", "5", "--min-reps", "9", "--max-reps", "4"], "--max-reps 4"),
])
def test_bad_precision_on_the_command_line_exits_2_before_anything(tmp_path, capsys, argv,
                                                                    said):
    from bufferbloat import cli
    assert cli.main(argv + ["--out", str(tmp_path / "out")]) == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


class TwoWorkers(SerialExecutor):
    """The serial executor given two slots (as two Dask workers are): jobs submitted
    while a slot is free are in flight together; ``together`` records them."""

    def __init__(self, run_one):
        super().__init__(run_one, log=lambda *_: None)
        self.together = []

    def room(self):
        return 2 - len(self.queue)

    def submit(self, job):
        super().submit(job)
        self.together.append([(j.run.overrides.get("buffer_pkts"), j.run.rep)
                              for j in self.queue])


def test_a_points_repetitions_are_spread_over_the_workers(tmp_path):
    """On two workers, one configuration's repetitions run side by side (its first
    min-reps, then the ones the rule adds), and the counts are those of a serial sweep."""
    from bufferbloat.run import watch
    calls = []
    rule = PrecisionRule(5, min_reps=3, max_reps=6).check()
    workers = TwoWorkers(watch.run_one)
    index, failed = sweep.run_sweep(SCN, {"buffer_pkts": ["100"]}, None, str(tmp_path),
                                    fake_runner(calls, lambda b: 0.2), quick=True,
                                    precision=rule, executor=workers, **QUIET)
    assert failed == 0
    assert sorted(r for _, r in calls) == list(range(1, 7))       # max-reps, as serially
    pairs = [t for t in workers.together if len(t) == 2]
    assert pairs, "never two repetitions in flight"
    assert any({r for _, r in t} & {4, 5, 6} for t in pairs)   # the added ones too
    assert _index(index)["precision"]["configs"]
