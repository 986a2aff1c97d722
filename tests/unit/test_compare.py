"""``bufferbloat compare``: a FIFO run of a2 against a PIE run, and sweeps matched by point."""
import os
import re

import numpy as np
import pytest

from bufferbloat import compare
from bufferbloat.cli import main
from bufferbloat.plots.sweep import samples
from bufferbloat.results import headline
from bufferbloat.results.metrics import run_rows
from bufferbloat.results.records import load_run

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures", "runs")
# a2 in the project VM, 10 s each: FIFO 100 packets against PIE target 20 ms, 1.5 Mbit/s
FIFO = os.path.join(FIXTURES, "a2_fifo")
PIE = os.path.join(FIXTURES, "a2_pie")


def _lines(fig, prefix):
    return {line.get_gid()[len(prefix):]: line for ax in fig.axes for line in ax.lines
            if (line.get_gid() or "").startswith(prefix)}


def test_pie_lower_rtt_shows_in_the_table():
    sides = compare.load_sides([FIFO, PIE])
    direct, rows = compare.table(sides)
    assert direct
    rtt = next(r for r in rows if r["metric"] == "ping:rtt_mean_ms")
    fifo_rtt, pie_rtt = rtt["values"]
    # the table holds each run's own metric, and PIE's is a fraction of FIFO's
    assert fifo_rtt == headline.select(run_rows(load_run(FIFO)), "ping:rtt_mean_ms")
    assert pie_rtt == headline.select(run_rows(load_run(PIE)), "ping:rtt_mean_ms")
    assert pie_rtt < fifo_rtt / 3
    line = next(x for x in compare.table_lines(sides, rows) if x.startswith("ping RTT"))
    assert compare.difference(pie_rtt, fifo_rtt) in line
    assert compare.difference(pie_rtt, fifo_rtt).startswith("-")
    # one run a side: no spread to judge a difference by
    assert rtt["decisions"][0]["verdict"] == "unresolved" and line.endswith("a side)")


def test_pie_lower_rtt_shows_in_the_figures():
    sides = compare.load_sides([FIFO, PIE])
    figs = compare.figures(sides, True)
    assert set(figs) == {"rtt-cdf", "queue", "throughput"}
    cdf = _lines(figs["rtt-cdf"], "cdf:")
    (fifo_label, fifo_line), (pie_label, pie_line) = sorted(cdf.items())
    assert fifo_label.startswith("A: a2_pie") and "qdisc=fifo" in fifo_label
    assert pie_label.startswith("B: a2_pie") and "fifo" not in pie_label
    # the eCDF's x are the run's RTT samples after its warm-up, sorted
    np.testing.assert_allclose(fifo_line.get_xdata(), np.sort(samples(load_run(FIFO))[0]))
    assert np.median(pie_line.get_xdata()) < np.median(fifo_line.get_xdata()) / 3
    queue = _lines(figs["queue"], "queue:")
    fifo_q, pie_q = (queue[k].get_ydata() for k in sorted(queue))
    assert np.nanmean(pie_q) < np.nanmean(fifo_q) / 3


def test_compare_command_prints_the_table_and_writes_the_page(tmp_path, capsys):
    page = tmp_path / "cmp.html"
    assert main(["compare", FIFO, PIE, "--html", str(page)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^ping RTT, mean \(ms\)\s+\d", out, re.M)
    assert "B-A" in out and str(page) in out
    html = page.read_text()
    assert html.count("<img") == 3 and "ping RTT, mean" in html


def test_sweeps_are_matched_point_by_point(tmp_path):
    """A sweep (two repetitions per point) against another: a copy holding only its
    first repetition of each point. The points match by their setting, and each side's
    value is its own: the mean of two repetitions against the first one alone."""
    import shutil
    sweep = os.path.join(FIXTURES, "sweep_fifo_buffer")
    other = tmp_path / "sweep_rep1"
    shutil.copytree(sweep, other)
    for point in ("buffer_pkts=20", "buffer_pkts=100"):
        shutil.rmtree(other / point / "rep-2")
    os.remove(other / "index.json")
    sides = compare.load_sides([sweep, str(other)])
    direct, rows = compare.table(sides)
    assert not direct
    groups = list(dict.fromkeys(r["group"] for r in rows))
    assert groups == ["a1_fifo buffer_pkts=20", "a1_fifo buffer_pkts=100"]

    def rtt(*parts):
        return headline.select(run_rows(load_run(os.path.join(*parts))), "ping:rtt_mean_ms")
    diffs = []
    for point in ("buffer_pkts=20", "buffer_pkts=100"):
        reps = [rtt(sweep, point, d) for d in ("rep-1", "rep-2")]
        assert reps[0] != reps[1]
        a, b = next(r for r in rows if r["group"].endswith(point)
                    and r["metric"] == "ping:rtt_mean_ms")["values"]
        assert a == pytest.approx(np.mean(reps)) and b == pytest.approx(reps[0])
        assert a != b
        diffs.append(compare.difference(b, a))
    # every row: B's value is the first repetition's, where A's is the mean of two
    assert any(r["values"][0] != r["values"][1] for r in rows)
    lines = [x for x in compare.table_lines(sides, rows) if x.startswith("ping RTT")]
    assert len(lines) == 2 and all(d in x for d, x in zip(diffs, lines)), (diffs, lines)


def test_compare_refuses_one_path_or_a_path_without_runs(tmp_path, capsys):
    assert main(["compare", FIFO]) == 2
    assert main(["compare", FIFO, str(tmp_path)]) == 2
    assert "no run" in capsys.readouterr().err


def test_two_points_with_repetitions_differ_and_the_page_says_so(tmp_path):
    """Two sweep points of two repetitions each (FIFO buffer 20 against 100 packets):
    their RTTs differ by Welch's test at 0.05 over the table's comparisons; the
    terminal table and the HTML page say the same words."""
    import os
    fix = os.path.join(os.path.dirname(FIFO), "sweep_fifo_buffer")
    sides = compare.load_sides([os.path.join(fix, "buffer_pkts=20"),
                                os.path.join(fix, "buffer_pkts=100")])
    direct, rows = compare.table(sides)
    rtt = next(r for r in rows if r["metric"] == "ping:rtt_mean_ms")
    assert direct and [len(s) for s in rtt["samples"]] == [2, 2]
    decision = rtt["decisions"][0]
    assert decision["verdict"] == "differs", decision
    assert decision["p"] < 0.05 / len(rows)
    line = next(x for x in compare.table_lines(sides, rows) if x.startswith("ping RTT"))
    assert "differs (p " in line
    out = compare.compare([os.path.join(fix, "buffer_pkts=20"),
                           os.path.join(fix, "buffer_pkts=100")], str(tmp_path / "c.html"))
    assert any("Welch" in x for x in out)
    assert "differs (p " in (tmp_path / "c.html").read_text()


def test_a_run_against_a_published_reference(tmp_path):
    """scripts/make-reference.py publishes records and metrics only; compare then says,
    per headline metric, whether a run is inside the reference's spread (its own
    configuration's runs), and names a run it cannot judge and why."""
    import importlib.util
    import os
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    spec = importlib.util.spec_from_file_location(
        "make_reference", os.path.join(root, "scripts", "make-reference.py"))
    make_reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_reference)
    fix = os.path.join(os.path.dirname(FIFO), "sweep_fifo_buffer")
    ref = tmp_path / "reference"
    runs, size = make_reference.publish(fix, str(ref), "test")
    assert runs == 4 and size < make_reference.MAX_BYTES
    assert not list(ref.rglob("series")) and not list(ref.rglob("raw"))   # no series
    assert (ref / compare.REFERENCE_FILE).is_file()
    one = os.path.join(fix, "buffer_pkts=20", "rep-1")
    lines = compare.compare([one, str(ref)])
    judged = [x for x in lines if "the reference's spread" in x]
    assert judged and all("buffer_pkts=20" in x for x in judged)
    assert any(": inside the reference's spread" in x for x in judged)
    other = compare.compare([FIFO, str(ref)])                 # another configuration
    assert any("not comparable" in x for x in other)


def test_the_published_reference_is_this_codes_quick_profile():
    """reference/ (made in the project VM by scripts/make-reference.py): under 2 MB, no
    series, every run healthy and at least 5 per point, each of them the run this code
    resolves for its scenario's quick profile (same configuration key): a change to a
    scenario's setting without a remade reference fails here, naming the command."""
    import glob
    import json
    import os

    from bufferbloat.run.resolved import resolve_run
    from bufferbloat.scenarios import catalogue
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ref = os.path.join(root, "reference")
    marker = json.load(open(os.path.join(ref, compare.REFERENCE_FILE)))
    assert marker["machine"]["in_project_vm"] is True
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(ref) for f in fs)
    assert size <= 2 * 1024 * 1024
    assert not glob.glob(os.path.join(ref, "**", "series"), recursive=True)
    records = [json.load(open(p)) for p in
               glob.glob(os.path.join(ref, "*", "sweep", "**", "result.json"), recursive=True)]
    by_key = {}
    for rec in records:
        assert rec["health"]["verdict"] == "healthy", rec["run_key"]
        by_key.setdefault((rec["scenario"]["name"], json.dumps(rec["overrides"], sort_keys=True),
                           rec["config_key"]), []).append(rec)
    assert by_key and all(len(v) >= 5 for v in by_key.values())
    scenarios = catalogue()
    for (name, overrides, key), _ in by_key.items():
        now = resolve_run(scenarios[name], json.loads(overrides), quick=True).config_key
        assert now == key, (f"reference/{name} is not this code's quick {name} "
                            "(remake it: sudo scripts/make-reference.py)")
