"""The command line a user reads with pleasure: complete help,
validation before output, errors that name what is missing, compare writing HTML only
when asked, a time estimate from the points' durations."""
import argparse
import os
import subprocess
import sys

import pytest

from bufferbloat.cli import main, parser
from bufferbloat.run.sweep import POINT_OVERHEAD_S, time_left

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNS = os.path.join(ROOT, "tests", "fixtures", "runs")


def _subparsers(p):
    (action,) = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    return action.choices


def _cli(argv, cwd):
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-m", "bufferbloat"] + argv, cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


def test_every_option_of_every_command_is_explained():
    subs = _subparsers(parser())
    assert {"check", "list", "describe", "run", "sweep", "show", "plot", "report",
            "compare", "export", "run-all"} <= set(subs)
    missing = []
    for name, sp in subs.items():
        assert sp.description and len(sp.description) > 30, name
        assert "examples:" in (sp.epilog or ""), name
        for action in sp._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            text = action.help or ""
            if not text.strip() or "``" in text:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, f"options without help: {missing}"


@pytest.mark.parametrize("name", [None] + sorted(_subparsers(parser())))
def test_help_reads_whole(name, capsys):
    argv = ["--help"] if name is None else [name, "--help"]
    with pytest.raises(SystemExit) as info:
        parser().parse_args(argv)
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "``" not in out and ":mod:" not in out and ":func:" not in out
    assert "examples:" in out
    if name is None:
        for sub in _subparsers(parser()):
            assert sub in out
        # the description ends with a sentence, not mid-way
        assert parser().description.rstrip().endswith(".")


def test_check_refuses_an_unknown_scenario_before_any_output(capsys):
    assert main(["check", "--scenario", "nosuch"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "unknown scenario 'nosuch'" in err


def test_export_of_a_missing_run_names_the_run(tmp_path):
    rc, out, err = _cli(["export", "--flent", "/nonexistent/run"], cwd=tmp_path)
    assert rc == 2 and out == ""
    assert "/nonexistent/run: no such run" in err and "-o" not in err


def test_compare_writes_html_only_when_asked(tmp_path):
    a, b = os.path.join(RUNS, "a2_fifo"), os.path.join(RUNS, "a2_pie")
    rc, out, _ = _cli(["compare", a, b], cwd=tmp_path)
    assert rc == 0 and "compare:" in out
    assert list(tmp_path.iterdir()) == []
    rc, out, _ = _cli(["compare", a, b, "--html", "c.html"], cwd=tmp_path)
    assert rc == 0 and (tmp_path / "c.html").is_file()


def test_describe_into_a_closed_pipe_has_no_traceback(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run(f"{sys.executable} -m bufferbloat describe a1_fifo | head -1",
                          shell=True, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("a1_fifo")
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_time_left_sums_the_remaining_points_durations():
    # before any point: the durations plus the assumed overhead each
    secs, how = time_left([("a1", 20.0), ("a1", 20.0), ("c1", 60.0)], [])
    assert secs == pytest.approx(100 + 3 * POINT_OVERHEAD_S)
    assert "3 points" in how and "assumed" in how
    # then the median measured overhead, whatever the order the points came in
    secs, how = time_left([("a1", 30.0), ("a1", 30.0)], [("a1", 4.0), ("a1", 100.0),
                                                          ("a1", 6.0)])
    assert secs == pytest.approx(60 + 2 * 6.0)
    assert "median of 3" in how


def test_time_left_takes_each_points_own_scenarios_median():
    """A C point at 80 flows costs ~70 s beyond its traffic where an A point costs ~10:
    the points left cost their own scenario's median, a scenario not yet measured the
    median of all."""
    done = [("a1", 10.0), ("a1", 12.0), ("a1", 8.0), ("c1", 50.0), ("c1", 70.0)]
    secs, how = time_left([("c1", 120.0), ("c1", 120.0)], done)
    assert secs == pytest.approx(240 + 2 * 60.0)
    assert "+ 60 s each" in how and "median of 2" in how
    secs, how = time_left([("a1", 30.0), ("c1", 120.0), ("e1", 10.0)], done)
    assert secs == pytest.approx(160 + 10.0 + 60.0 + 12.0)   # e1: the median of all 5
    assert "10-60 s each" in how and "else of all" in how
    assert time_left([], done) == (0.0, "no points left")


def test_the_estimate_does_not_jump_when_a_point_is_slow(tmp_path):
    """run_points' progress: the estimate after each point is the remaining points'
    durations plus the median overhead, so one slow point moves it by little (the old
    average of past runs jumped with it)."""
    from bufferbloat.run import sweep
    from bufferbloat.run.plan import plan_points
    from bufferbloat.scenarios import catalogue
    scn = catalogue()["a1_fifo"]
    todo = [(scn, {"buffer_pkts": str(n)}, {"buffer_pkts": str(n)}, 1)
            for n in (20, 30, 40, 50, 60)]
    logs, clock = [], [0.0]
    walls = iter([25.0, 25.0, 200.0, 25.0, 25.0])

    def fake_run_point(run, run_dir=None, log=None):
        clock[0] += next(walls)
        os.makedirs(run_dir, exist_ok=True)
        with open(os.path.join(run_dir, "result.json"), "w") as f:
            f.write('{"status": "ok"}')

    real = sweep.time.monotonic
    sweep.time.monotonic = lambda: clock[0]
    try:
        sweep.run_points(plan_points(todo, duration_s=10.0), str(tmp_path), fake_run_point,
                         str(tmp_path / "index.json"), {}, log=logs.append,
                         stall_limit=None)
    finally:
        sweep.time.monotonic = real
    import re
    left = [float(m.group(1)) for m in (re.search(r"~(\d+) s left", x) for x in logs) if m]
    assert len(left) == 5
    assert left[0] == pytest.approx(5 * (10 + POINT_OVERHEAD_S))
    # after 25, 25, 200 s points (overheads 15, 15, 190): median 15 -> 2 x (10 + 15)
    assert left[3] == pytest.approx(2 * (10 + 15))
    assert all(b < a for a, b in zip(left, left[1:]))


def test_run_all_prints_what_the_points_it_ran_cost():
    from bufferbloat.commands.run_all import cost_line
    index = [{"duration_s": 20, "wall_s": 30.0},
             {"duration_s": 10, "wall_s": 25.0},
             {"duration_s": 20, "wall_s": 999.0, "resumed": True},   # not run now
             {"duration_s": 20, "status": "failed"}]                  # no wall time
    line = cost_line(index)
    assert line == ("cost: 2 points run, 30 s of traffic, 55 s of point wall time: "
                    "overhead ratio 1.83 (point wall / traffic)")
    assert cost_line([{"duration_s": 20, "wall_s": 5.0, "resumed": True}]) is None
