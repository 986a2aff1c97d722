"""No traceback for any input or fault, and every degradation said: outputs in the way,
corrupted records (index.json, result.json, metrics.json), output to a closed pipe;
warnings (one line each on stderr, ``warning: `` first) for
recomputed metrics, missing series, runs an index lists but the tree lacks, and a
recompute over a cut series. The full disk and the read-only folder are in
tests/host/test_write_faults.py (they mount a tmpfs)."""
import csv
import glob
import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import FIXTURES, ROOT

from bufferbloat.cli import main
from bufferbloat.commands.errors import exit_code, os_error_text
from bufferbloat.core.atomic import write_text_atomic

RUNS = os.path.join(FIXTURES, "runs")


def _copy(tmp_path, name, as_name=None):
    dst = tmp_path / (as_name or name)
    shutil.copytree(os.path.join(RUNS, name), dst)
    return dst


def _edit(path, change):
    with open(path) as f:
        data = json.load(f)
    with open(path, "w") as f:
        json.dump(change(data), f)


def _cli(argv, **kw):
    """The program as a user runs it: (exit code, stdout, stderr)."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, "-m", "bufferbloat"] + argv, capture_output=True,
                       text=True, env=env, timeout=300, **kw)
    return p.returncode, p.stdout, p.stderr


def _warnings(err):
    return [line for line in err.splitlines() if line.startswith("warning: ")]


def _leftovers(root):
    return [p for p in glob.glob(os.path.join(str(root), "**", "*.tmp*"), recursive=True)
            + glob.glob(os.path.join(str(root), "**", ".*.tmp"), recursive=True)]


# ------------------------------------------------------------- outputs in the way

def test_compare_into_an_existing_directory_is_refused_naming_html(tmp_path):
    (tmp_path / "existing").mkdir()
    rc, _, err = _cli(["compare", os.path.join(RUNS, "a1_fifo"), os.path.join(RUNS, "a2_pie"),
                       "--html", "existing"], cwd=tmp_path)
    assert rc == 2, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and "--html" in err and "directory" in err
    assert sorted(os.listdir(tmp_path)) == ["existing"]       # no existing.tmpPID
    assert os.listdir(tmp_path / "existing") == []


def test_export_into_a_directory_is_refused(tmp_path, capsys):
    target = tmp_path / "x.flent.gz"
    target.mkdir()
    assert main(["export", "--flent", os.path.join(RUNS, "a1_fifo"), "-o", str(target)]) == 2
    assert "directory" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["x.flent.gz"]


def test_a_failed_atomic_write_names_the_path_and_leaves_no_temporary(tmp_path):
    (tmp_path / "page.html").mkdir()          # a directory where the file should go
    with pytest.raises(OSError) as info:
        write_text_atomic(tmp_path / "page.html", "text")
    assert info.value.filename == str(tmp_path / "page.html")
    assert os.listdir(tmp_path) == ["page.html"]


def test_os_errors_read_as_one_line():
    import errno
    assert os_error_text(OSError(errno.ENOSPC, "No space left on device", "/x/r.html")) \
        == "disk full: /x/r.html"
    assert os_error_text(OSError(errno.EROFS, "Read-only file system", "/ro/c.html")) \
        == "/ro/c.html: Read-only file system"


def test_an_unexpected_exception_is_one_line_naming_where(monkeypatch, capsys):
    import bufferbloat.describe as describe
    monkeypatch.setattr(describe, "describe", lambda scn, overrides=None: {}["boom"])
    assert main(["describe", "a1_fifo"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "describe failed: KeyError" in err and "test_cli_faults.py:" in err


# ------------------------------------------------------------ a closed pipe

@pytest.mark.parametrize("argv", [["describe", "a1_fifo"], ["list"],
                                  ["show", os.path.join(RUNS, "a1_fifo")]])
def test_output_to_a_closed_pipe_is_dropped_without_a_traceback(argv):
    r, w = os.pipe()
    os.close(r)                  # the reader is gone before the first line (| head -0)
    env = dict(os.environ, PYTHONPATH=ROOT)
    try:
        p = subprocess.run([sys.executable, "-m", "bufferbloat"] + argv, stdout=w,
                           stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    finally:
        os.close(w)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""        # no BrokenPipeError, no "Exception ignored"


def test_describe_into_head_ends_quietly():
    p = subprocess.run(f"{sys.executable} -m bufferbloat describe a1_fifo | head -2",
                       shell=True, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert len(p.stdout.splitlines()) == 2
    assert p.stderr == ""


# ------------------------------------------------------- corrupted records

INDEX_CASES = {
    "done is a string": lambda d: dict(d, done="x"),
    "done holds numbers": lambda d: dict(d, done=[1, "x", None] + d["done"]),
    "vary is a list": lambda d: dict(d, vary=["buffer_pkts"]),
    "overrides is a string": lambda d: dict(d, done=[dict(e, overrides="ab")
                                                     for e in d["done"]]),
    "rep is a word": lambda d: dict(d, done=[dict(e, rep="abc") for e in d["done"]]),
    "run_dir is a number": lambda d: dict(d, done=[dict(e, run_dir=5) for e in d["done"]]),
}


@pytest.mark.parametrize("command,case", [("compare", c) for c in INDEX_CASES] + [
    ("report", "done is a string"), ("report", "vary is a list"),
    ("plot", "done holds numbers")])
def test_an_index_of_wrong_types_is_refused_naming_it(case, command, tmp_path, capsys):
    """A corrupt index is bad input: exit 2, one line naming the file, nothing written
    (the corpus in tests/host/test_bad_inputs.py holds the same rule)."""
    sweep = _copy(tmp_path, "sweep_fifo_buffer")
    _edit(sweep / "index.json", INDEX_CASES[case])
    before = sorted(p.relative_to(sweep) for p in sweep.rglob("*"))
    argv = ([command, str(sweep)] if command in ("report", "plot") else
            [command, str(sweep), os.path.join(RUNS, "a1_fifo"), "--html",
             str(tmp_path / "c.html")])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "index.json: corrupt index" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert sorted(p.relative_to(sweep) for p in sweep.rglob("*")) == before
    assert not (tmp_path / "c.html").exists()


RECORD_CASES = {
    "scenario": 5, "health": "x", "machine": "x", "overrides": "ab", "traffic": 5,
    "qdisc": "x", "tools": "x", "traffic_results": "x", "status": 5, "duration_s": "x",
    "t0_realtime": "x",
}


@pytest.mark.parametrize("field", list(RECORD_CASES))
def test_a_record_field_of_a_wrong_type_is_refused_naming_it(field, tmp_path, capsys):
    """show, report and export of a record with a field of the wrong type: exit 2, one
    line naming result.json and the field; no report written."""
    run = _copy(tmp_path, "a1_fifo")
    _edit(run / "result.json", lambda d: dict(d, **{field: RECORD_CASES[field]}))
    for argv in (["show", str(run)], ["report", str(run)],
                 ["export", "--flent", str(run), "-o", str(tmp_path / "x.flent.gz")]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "result.json: corrupt record" in err and repr(field) in err, err
        assert "Traceback" not in err
    assert not (run / "report.html").exists()
    assert not (tmp_path / "x.flent.gz").exists()


def test_a_record_without_start_or_series_is_reported(tmp_path, capsys):
    """A killed run's record may lack its start and its series list: show says the
    start is not recorded and lists the series found on disk."""
    run = _copy(tmp_path, "a1_fifo")
    _edit(run / "result.json", lambda d: {k: v for k, v in d.items()
                                          if k not in ("started", "series")})
    assert main(["show", str(run)]) == 0
    out = capsys.readouterr().out
    assert "start not recorded" in out and "started ?" not in out
    assert "series: iperf, ping, qdisc, tcp, web" in out
    assert main(["report", str(run)]) == 0
    assert "not recorded" in (run / "report.html").read_text()


METRICS_CASES = {
    "not JSON": "{",
    "metrics not a list": json.dumps({"metrics": "x"}),
    "rows not objects": json.dumps({"metrics": [1, 2]}),
    "a row without scope": json.dumps({"metrics": [{"metric": "x", "value": 1}]}),
    "a value not a number": json.dumps({"metrics": [{"scope": "a", "name": "b",
                                                     "metric": "c", "value": "x"}]}),
}


@pytest.mark.parametrize("case", list(METRICS_CASES))
def test_corrupt_metrics_are_recomputed_with_a_warning(case, tmp_path, capsys):
    run = _copy(tmp_path, "a1_fifo")
    (run / "metrics.json").write_text(METRICS_CASES[case])
    assert main(["show", str(run)]) == 0
    captured = capsys.readouterr()
    warnings = _warnings(captured.err)
    assert len(warnings) == 1 and "metrics.json" in warnings[0] \
        and "recomputed" in warnings[0], warnings
    assert "rtt_mean_ms" in captured.out          # the recomputed table, printed
    assert main(["report", str(run)]) == 0
    assert "recomputed" in (run / "report.html").read_text()


def test_intact_metrics_give_no_warning(tmp_path, capsys):
    run = _copy(tmp_path, "a1_fifo")
    assert main(["show", str(run)]) == 0
    assert _warnings(capsys.readouterr().err) == []


# ------------------------------------------------------- degradation said

def test_report_says_the_runs_an_index_lists_but_the_tree_lacks(tmp_path):
    sweep = _copy(tmp_path, "sweep_fifo_buffer")
    shutil.rmtree(sweep / "buffer_pkts=100")          # 4 listed, 2 left
    rc, out, err = _cli(["report", str(sweep)])
    assert rc == 0, err
    warnings = _warnings(err)
    assert any("lists 4 run(s); 2 of them are not in this tree" in w for w in warnings), err
    page = (sweep / "report.html").read_text()
    assert 'id="warnings"' in page and "2 of them are not in this tree" in page
    assert "Traceback" not in err


def test_plot_and_export_name_the_missing_series(tmp_path, capsys):
    run = _copy(tmp_path, "a1_fifo")
    os.unlink(run / "series" / "ping.csv")            # listed in result.json
    os.unlink(run / "series" / "tcp.csv")
    assert main(["plot", str(run)]) == 0
    warnings = _warnings(capsys.readouterr().err)
    assert any("not on disk: ping" in w for w in warnings), warnings
    assert any("not drawn" in w and "cwnd" in w and "rtt" in w for w in warnings), warnings
    assert not (run / "figures" / "cwnd.png").exists()
    other = _copy(tmp_path, "a1_fifo", "b")           # (each warning is said once a process)
    os.unlink(other / "series" / "ping.csv")
    assert main(["export", "--flent", str(other), "-o", str(tmp_path / "x.flent.gz")]) == 0
    assert any("not on disk: ping" in w for w in _warnings(capsys.readouterr().err))


def test_show_recompute_over_a_cut_series_warns(tmp_path, capsys):
    run = _copy(tmp_path, "a1_fifo")
    for path in glob.glob(str(run / "series" / "*.csv")):   # cut every series at 2.5 s
        with open(path) as f:
            rows = list(csv.reader(f))
        col = rows[0].index("t" if "t" in rows[0] else "t_start")
        with open(path, "w", newline="") as f:
            csv.writer(f).writerows([rows[0]] + [r for r in rows[1:] if float(r[col]) < 2.5])
    assert main(["show", "--recompute", str(run)]) == 0
    warnings = _warnings(capsys.readouterr().err)
    assert len(warnings) == 1 and "of a 8 s run (cut short)" in warnings[0], warnings
    assert main(["show", "--recompute", os.path.join(str(_copy(tmp_path, "a1_fifo", "b")))]) \
        == 0
    assert _warnings(capsys.readouterr().err) == []    # a whole run: nothing to say


class _Interrupted:
    """A descriptor whose ``__set_name__`` meets an interrupt, as a class body being run
    by an import does when a SIGINT lands in it."""

    def __init__(self, exc):
        self.exc = exc

    def __set_name__(self, owner, name):
        raise self.exc


@pytest.mark.parametrize("exc, rc", [(KeyboardInterrupt(), 130),
                                     (KeyboardInterrupt("SIGTERM"), 143)])
def test_an_interrupt_python_wrapped_in_its_own_error_exits_as_an_interrupt(exc, rc, capsys):
    """2026-11-30's gate: a SIGINT during matplotlib's import, after a run recorded
    complete, became "RuntimeError: Error calling __set_name__" (Python 3.11 wraps an
    exception from __set_name__) and the command exited 1, "run failed", not 130."""
    def import_a_module():
        type("TexManager", (), {"grey_arrayd": _Interrupted(exc)})
    assert exit_code("run", import_a_module) == rc
    err = capsys.readouterr().err
    assert err == "bufferbloat: interrupted\n", err
    # any other error that merely has a cause is still an error
    def fails():
        try:
            raise ValueError("inner")
        except ValueError as inner:
            raise RuntimeError("outer") from inner
    assert exit_code("run", fails) == 1
    assert "run failed: RuntimeError: outer" in capsys.readouterr().err
