"""What runs cost beyond their traffic (bufferbloat/results/cost.py, ``bufferbloat
cost``), from their own records: sums, medians and the costliest phases, every attempt
counted, a run without a wall time counted apart."""
import pytest

from bufferbloat.cli import main
from bufferbloat.results import cost
from bufferbloat.results.records_writer import RunWriter


def rec(traffic, wall, verdict="healthy", status="ok", **phases):
    return {"status": status, "duration_s": traffic, "wall_s": wall,
            "health": {"verdict": verdict}, "phases_s": {"traffic": traffic, **phases}}


def test_a_set_sums_its_runs_and_names_its_costliest_phases():
    runs = [rec(60, 75, build=2.0, stop=5.0, metrics=1.0),
            rec(60, 80, build=3.0, stop=9.0, metrics=1.5, idle_rtt=1.1),
            rec(60, 90, "degraded", build=2.5, stop=7.0, metrics=2.0)]
    row = cost.row("d1", runs)
    assert (row["runs"], row["counted"], row["healthy"], row["degraded"]) == (3, 3, 2, 1)
    assert row["traffic_s"] == 180 and row["wall_s"] == 245
    assert row["ratio"] == pytest.approx(245 / 180)
    assert row["over_median_s"] == 20 and row["over_range_s"] == (15, 30)
    # medians a run, a phase a run lacks counted as 0; the traffic is not overhead
    assert row["phases"] == [("stop", 7.0), ("build", 2.5), ("metrics", 1.5)]


def test_runs_not_ok_and_runs_without_a_wall_time_are_counted_apart_not_guessed():
    runs = [rec(60, 70), rec(60, None), rec(60, 100, status="failed"),
            rec(60, 25, status="interrupted"), {"status": "ok", "duration_s": 60},
            rec(60, float("inf")), {"status": "running", "duration_s": 60}]
    row = cost.row("a1", runs)
    assert (row["runs"], row["counted"], row["not_ok"]) == (7, 1, 3)
    assert row["not_ok_wall_s"] == 125                   # cut short: no ratio of theirs
    assert row["ratio"] == pytest.approx(70 / 60)
    cells = cost.fmt_row(row)
    assert cells[1] == ("7 (1 failed, 100 s; 1 interrupted, 25 s; 1 running; "
                        "3 without a wall time)")
    assert cells[6] == "1.17"
    empty = cost.row("e1", [rec(60, None)])
    assert empty["ratio"] is None
    assert "no ok run with a recorded wall time" in cost.fmt_row(empty)


def test_phases_are_medians_over_the_runs_that_recorded_them():
    old = {"status": "ok", "duration_s": 60, "wall_s": 90, "health": {}}
    row = cost.row("d1", [old, rec(60, 70, build=2.0), rec(60, 80, build=4.0, stop=1.0)])
    assert row["phases"] == [("build", 3.0), ("stop", 0.5)]
    assert row["wall_s"] == 240                           # the old run's wall counts
    assert cost.fmt_row(cost.row("x", [old]))[-1] == "not recorded"
    # a record's phases of a wrong type read as none, not as a crash
    assert cost.run_cost(dict(old, phases_s=["build"]))[2] == {}


def test_the_total_is_over_every_run_of_every_set():
    rows, total = cost.table({"a": [rec(20, 30)], "b": [rec(10, 30), rec(10, 20)]})
    assert [r["name"] for r in rows] == ["a", "b"]
    assert total["traffic_s"] == 40 and total["wall_s"] == 80 and total["ratio"] == 2
    text = cost.markdown(rows, total)
    assert text.splitlines()[-1].startswith("| all sets | 3 | 3 | 0 | 40 s | 80 s | 2.00 |")


def _write(path, scenario, profile, traffic, wall):
    w = RunWriter(path)
    w.record.update(scenario={"name": scenario}, profile=profile, duration_s=traffic,
                    wall_s=wall, health={"verdict": "healthy"},
                    phases_s={"traffic": traffic, "build": wall - traffic})
    w.close("ok")


def test_the_command_prints_one_row_per_scenario_and_setting(tmp_path, capsys):
    _write(tmp_path / "a1_fifo" / "r1", "a1_fifo", "full", 60, 72)
    _write(tmp_path / "a1_fifo" / "r2", "a1_fifo", "full", 60, 78)
    _write(tmp_path / "a1_fifo" / "r3", "a1_fifo", "quick", 20, 30)
    _write(tmp_path / "e1" / "r1", "e1_aqm_kflows", "full", 15, 45)
    assert main(["cost", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    names = [line.split(" | ")[0].lstrip("| ") for line in out[2:]]
    assert names == ["a1_fifo-full-60s", "a1_fifo-quick-20s", "e1_aqm_kflows", "all sets"]
    assert "| 120 s | 150 s | 1.25 | 15.0 s (12.0-18.0) | build 15.0 s |" in out[2]
    assert "| 3.00 |" in out[4]


def test_the_command_refuses_a_directory_without_runs(tmp_path, capsys):
    assert main(["cost", str(tmp_path)]) == 2
    assert "no run directory" in capsys.readouterr().err
