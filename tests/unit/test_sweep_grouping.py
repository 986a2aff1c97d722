"""Plots and the report group runs by configuration: runs of another profile, duration or
rate scaling never share a table, a mean or a figure, and what a set is says so on it;
runs of one sweep point whose recorded configurations differ are not averaged."""
import json
import os
import shutil

from bufferbloat.plots import report, sweep, sweep_figures, sweep_tables

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   "fixtures", "runs", "sweep_fifo_buffer")


def _tree(tmp_path, edit):
    """A copy of the fixture sweep (2 points x 2 reps, full profile, 6 s) without its
    index, each rep-2 record changed by ``edit(record)``."""
    root = tmp_path / "runs"
    shutil.copytree(FIX, root)
    os.unlink(root / "index.json")
    for point in ("buffer_pkts=20", "buffer_pkts=100"):
        path = root / point / "rep-2" / "result.json"
        rec = json.loads(path.read_text())
        edit(rec)
        path.write_text(json.dumps(rec))
    return str(root)


def _edit_rep1(root, edit):
    """Change each point's rep-1 record by ``edit(record)``."""
    for point in ("buffer_pkts=20", "buffer_pkts=100"):
        path = os.path.join(root, point, "rep-1", "result.json")
        with open(path) as f:
            rec = json.load(f)
        edit(rec)
        with open(path, "w") as f:
            json.dump(rec, f)


def _quick(rec):
    rec["profile"], rec["duration_s"] = "quick", 20.0


def test_quick_and_full_runs_never_share_a_set(tmp_path):
    pts = sweep.load_points(_tree(tmp_path, _quick))
    sets = sweep.by_scenario(pts)
    assert sorted(sets) == ["a1_fifo-full-6s", "a1_fifo-quick-20s"]
    for name, group in sets.items():
        assert len(group) == 2 and len({p.setting for p in group}) == 1
        rows = sweep_tables.table_rows(group)
        assert [r["reps"] for r in rows] == [1, 1]
        label = "quick profile, 20 s" if "quick" in name else "full profile, 6 s"
        assert {r["setting"] for r in rows} == {label}
        figs = sweep_figures.draw_all(group)
        assert figs
        for fig in figs.values():
            assert label in fig._suptitle.get_text()
            assert label in " ".join(t.get_text() for t in fig.texts)
    # the report: one section per set, each titled with its setting
    html = open(report.write_report(_tree(tmp_path / "r", _quick))).read()
    assert html.count('<section class="study"') == 2
    assert "a1_fifo-quick-20s" in html and "quick profile, 20 s" in html
    assert "full profile, 6 s" in html
    assert "2 runs, 2 points, quick profile, 20 s" in html


def test_a_different_scaling_is_a_different_set(tmp_path):
    def scaled(rec):
        rec["scaling"] = {"factor": 0.5, "max_rate_mbit": 0.75, "changed": {}}
    sets = sweep.by_scenario(sweep.load_points(_tree(tmp_path, scaled)))
    assert sorted(sets) == ["a1_fifo-full-6s", "a1_fifo-full-6s-x0.5"]
    assert "rates scaled x0.5" in sweep.setting_label(sets["a1_fifo-full-6s-x0.5"])


def test_one_setting_keeps_the_scenario_name(tmp_path):
    sets = sweep.by_scenario(sweep.load_points(_tree(tmp_path, lambda rec: None)))
    assert list(sets) == ["a1_fifo"]
    assert [r["reps"] for r in sweep_tables.table_rows(sets["a1_fifo"])] == [2, 2]


def test_same_point_other_configuration_is_not_averaged(tmp_path):
    def edited(rec):
        rec["config_key"] = "b" * 64

    def original(rec):
        rec["config_key"] = "a" * 64
    root = _tree(tmp_path, edited)
    _edit_rep1(root, original)
    pts = sweep.load_points(root)
    rows = sweep_tables.table_rows(pts)
    assert len(rows) == 4 and all(r["reps"] == 1 for r in rows)
    assert {p.varied["config"] for p in pts} == {"a" * 12, "b" * 12}


def test_configurations_apart_are_labelled_by_what_differs(tmp_path):
    """B's default changed from its dumbbell to its testbed between runs: each
    configuration's label names the recorded parameters that differ, not a hash."""
    def testbed(rec):
        rec["config_key"] = "b" * 64
        rec["params"].update(delay_ms=0.25, aqm_both_ways=False, reverse_qdisc="fq_codel")

    def dumbbell(rec):
        rec["config_key"] = "a" * 64
        rec["params"].update(delay_ms=5.0, aqm_both_ways=True, reverse_qdisc=None)
    root = _tree(tmp_path, testbed)
    _edit_rep1(root, dumbbell)
    pts = sweep.load_points(root)
    # one label per configuration, shared by its points (a figure's series), never the
    # two of one point alike
    assert {p.varied["config"] for p in pts} == {
        "aqm_both_ways=true, delay_ms=5, reverse_qdisc=unset",
        "aqm_both_ways=false, delay_ms=0.25, reverse_qdisc=fq_codel"}
    assert len(sweep_tables.table_rows(pts)) == 4


def test_the_table_gives_n_and_the_interval_of_each_points_mean(tmp_path):
    """Each point's row: n healthy repetitions and the Student-t 95 % interval of the
    mean latency, throughput and queue delay over them (2 reps here: t = 12.71)."""
    import math

    from bufferbloat.core.uncertainty import mean_interval
    pts = sweep.load_points(_tree(tmp_path, lambda rec: None))
    rows = sweep_tables.table_rows(pts)
    assert len(rows) == 2
    for row in rows:
        reps = [p for p in sweep.by_key(pts)[row["point"]] if p.averaged]
        rtts = [p.value("rtt_mean_ms") for p in reps]
        assert row["n"] == len(reps) == 2
        ci = mean_interval(rtts)
        assert row["latency_mean_ci_low_ms"] == ci["ci_low"]
        assert row["latency_mean_ci_low_ms"] <= row["latency_mean_ms"] \
            <= row["latency_mean_ci_high_ms"]
        half = (row["latency_mean_ci_high_ms"] - row["latency_mean_ci_low_ms"]) / 2
        sd = math.sqrt(sum((x - ci["mean"]) ** 2 for x in rtts))       # n - 1 = 1
        assert math.isclose(half, 12.7062 * sd / math.sqrt(2), rel_tol=1e-4)
    text = sweep_tables.table_csv(rows)
    assert "n,latency_mean_ci_low_ms" in text.splitlines()[0]
    assert "n=2: " in sweep_tables.table_markdown(rows)
