"""A run is resolved once: ``--set qdisc.target_ms=5`` (or any parameter) is made into
a run by one ``scn.build`` per point, and that same object is placed, planned, handed to
the executor and run by the engine, which records it (bufferbloat/run/resolved.py).

Every ``Scenario.build`` is counted; the engine's real first step runs (``prepare``: the
kernel's checks, the record's identity) and the network step is replaced by a failure,
so that nothing is built on this kernel."""

import json
import os

import pytest

from bufferbloat import cli
from bufferbloat.commands import placement
from bufferbloat.commands import run as command_run
from bufferbloat.commands import run_all as command_run_all
from bufferbloat.commands import sweep as command_sweep
from bufferbloat.core.errors import UsageError
from bufferbloat.run import engine
from bufferbloat.run.executor import SerialExecutor
from bufferbloat.run.resolved import resolve_spec
from bufferbloat.run.scenario import Scenario
from bufferbloat.run.watch import run_one
from bufferbloat.scenarios import catalogue


class NoNetwork(RuntimeError):
    pass


@pytest.fixture
def counted(monkeypatch):
    """{'builds': n, 'placed': [run ids], 'run': [run ids]} while the test runs."""
    seen = {"builds": 0, "placed": [], "run": []}
    real_build, real_prepare, real_place = Scenario.build, engine.prepare, \
        placement.where_to_run

    def build(self, *a, **k):
        seen["builds"] += 1
        return real_build(self, *a, **k)

    def prepare(run, *a, **k):
        seen["run"].append(id(run))
        return real_prepare(run, *a, **k)

    def where_to_run(args, runs):
        seen["placed"] += [id(r) for r in runs]
        return real_place(args, runs)

    class Net:                       # this kernel builds nothing here
        features = ()
        timings = {}

        def __init__(self, topo, caps=None):
            pass

        def check(self):
            pass

    def run_network(ctx):
        raise NoNetwork("no network in a unit test")
    monkeypatch.setattr(Scenario, "build", build)
    monkeypatch.setattr(engine, "prepare", prepare)
    for module in (placement, command_run, command_sweep, command_run_all):
        monkeypatch.setattr(module, "where_to_run", where_to_run)
    monkeypatch.setattr(engine, "Network", Net)
    monkeypatch.setattr(engine, "run_network", run_network)
    monkeypatch.setattr("bufferbloat.net.capabilities.Capabilities.require",
                        lambda self, needed: None)
    monkeypatch.setattr("bufferbloat.run.where.require_here", lambda topos: None)
    monkeypatch.setattr("bufferbloat.run.where.require_root", lambda place: None)
    monkeypatch.delenv("BUFFERBLOAT_MAX_MBIT", raising=False)
    monkeypatch.delenv("BUFFERBLOAT_GUEST_ACCEL", raising=False)
    return seen


def test_run_repeat_3_resolves_each_repetition_once(tmp_path, counted):
    rc = cli.main(["run", "a2_pie", "--set", "qdisc.target_ms=5", "--repeat", "3",
                   "--time", "5", "--host", "--no-figures", "--out", str(tmp_path)])
    assert rc == 1                          # each repetition ended at the fake network
    assert counted["builds"] == 3           # one per repetition (was 2N + 1 = 7)
    assert len(counted["run"]) == 3 and counted["run"] == counted["placed"]
    records = []
    for d, _, files in os.walk(tmp_path):
        if "result.json" in files:
            with open(os.path.join(d, "result.json")) as f:
                records.append(json.load(f))
    assert sorted(r["run_config"]["rep"] for r in records) == [1, 2, 3]
    assert {r["run_config"]["qdisc"]["params"]["target_ms"] for r in records} == {5}


def test_a_sweep_on_an_executor_resolves_each_point_once(tmp_path, counted, monkeypatch):
    """The executor gets the same objects that were placed; a worker process makes the
    run again from its spec once (it runs in another process) and checks its key."""
    handed = []

    class Recording(SerialExecutor):
        def submit(self, job):
            handed.append(id(job.run))
            super().submit(job)
    monkeypatch.setattr(command_sweep, "executor_for",
                        lambda args, runs: counted["placed"].extend(id(r) for r in runs)
                        or Recording(run_one, lambda m: None))
    rc = cli.main(["sweep", "a2_pie", "--vary", "qdisc.target_ms=5,20", "--repeat", "2",
                   "--time", "5", "--host", "--no-figures", "--out", str(tmp_path)])
    assert rc == 1
    assert counted["builds"] == 4           # 2 values x 2 repetitions, once each
    assert handed == counted["run"] == counted["placed"] and len(handed) == 4
    # a worker: one build from the spec, the sweep's key checked
    from bufferbloat.run.plan import plan_sweep
    planned = plan_sweep(catalogue()["a2_pie"], {"qdisc.target_ms": ["5"]}, 1,
                         quick=True)
    spec = planned[0].run.spec()
    before = counted["builds"]
    again = resolve_spec(spec, catalogue())
    assert counted["builds"] == before + 1 and again.key == planned[0].run.key
    with pytest.raises(UsageError, match="the sweep planned"):
        resolve_spec(dict(spec, run_key="0" * 64), catalogue())


def test_a_scenario_without_a_sweep_repeats_its_one_setting(monkeypatch, tmp_path):
    """``sweep a2_pie --repeat 3``: one point (its own setting), three repetitions; without
    --repeat or --precision it is refused (exit 2) with the way out."""
    seen = {}

    def run_sweep(scn, vary, repeat, out, runner, **kw):
        seen.update(vary=vary, repeat=repeat, planned=kw["planned"])
        raise NoNetwork("planned only")

    monkeypatch.setattr("bufferbloat.run.sweep.run_sweep", run_sweep)
    monkeypatch.setattr(command_sweep, "where_to_run", lambda args, runs: "host")
    cli.main(["sweep", "a2_pie", "--quick", "--repeat", "3", "--no-figures",
              "--out", str(tmp_path)])
    assert seen["vary"] == {} and seen["repeat"] == 3
    assert [p.run.rep for p in seen["planned"]] == [1, 2, 3]
    assert len({p.run.config_key for p in seen["planned"]}) == 1
    assert cli.main(["sweep", "a2_pie", "--quick", "--out", str(tmp_path)]) == 2
