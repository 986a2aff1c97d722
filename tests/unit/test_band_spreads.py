"""bench/band_spreads.py: each band's spread and false-fail rate from archived test
records (tests.retries.observe writes the values)."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests import record, retries


@pytest.fixture(autouse=True)
def _made_up_entries_dropped(request):
    with record.kept_apart(request.node.nodeid):
        yield

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location(
    "band_spreads", os.path.join(ROOT, "bench", "band_spreads.py"))
bs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bs)


def test_its_rule_is_the_suites():
    assert bs.CONFIRM == retries.CONFIRM
    for p in (0.001, 0.02, 0.3):
        assert bs.false_fail_rate(p) == pytest.approx(retries.false_fail_rate(p))


def test_observe_records_the_value_and_says_whether_it_is_within():
    record.begin("obs")
    assert retries.observe("ratio", 7.0, lo=5) is True
    assert retries.observe("ratio", 4.0, lo=5) is False
    assert retries.observe("delay", None, hi=30) is False
    got = record.entry("obs")["values"]
    assert got[0] == {"name": "ratio", "value": 7.0, "lo": 5, "hi": None, "unit": ""}
    assert len(got) == 3


def test_the_clopper_pearson_bound():
    # one-sided 95 %: no miss in 10: 1 - 0.05^(1/10) = 0.2589; 1 in 20: 0.2161, where
    # (1 - p)^20 + 20 p (1 - p)^19 = 0.05
    assert bs.binom_upper(0, 10) == pytest.approx(1 - 0.05 ** 0.1, abs=1e-6)
    assert bs.binom_upper(1, 20) == pytest.approx(0.2161, abs=1e-3)
    assert bs.binom_upper(3, 3) == 1.0


def _records(tmp_path, values, lo=None, hi=None):
    for i, v in enumerate(values):
        data = {"tests": {"tests/vm/t.py::test_x": {"values": [
            {"name": "band", "value": v, "lo": lo, "hi": hi, "unit": "ms"}]}}}
        (tmp_path / f"2026-{i:03d}-acceptance-vm.json").write_text(json.dumps(data))


def test_ten_clean_samples_far_inside_calibrate_by_the_model_and_say_what_alone(tmp_path):
    """Ten values ~10 sd inside the bound: the normal model's predictive tail is ~0, so
    the band is calibrated; the distribution-free bound is stated beside it: ten clean
    samples alone show no better than 1 - 0.05^(1/10) = 0.26."""
    _records(tmp_path, [10.0 + 0.1 * (i % 3) for i in range(10)], lo=5.0)
    bands = bs.samples(bs.record_files([str(tmp_path)]))
    s = bs.spread(bands[("test_x", "band")])
    assert s["n"] == 10 and s["misses"] == 0 and s["margin_sd"] > 10
    assert s["p"] < 1e-6 and s["false_fail"] < 1e-3
    assert s["p_free"] == pytest.approx(1 - 0.05 ** 0.1, abs=1e-6)
    lines = bs.table(bands, 10, markdown=True)
    assert lines[2].endswith("| yes |") and lines[-1].startswith("1 bands, 1 calibrated")
    assert "| 0.2589 |" in lines[2]


def test_the_predictive_tail_is_students_with_n_minus_1_degrees(tmp_path):
    """n = 10 samples, bound 2.8214 sd sqrt(1 + 1/10) below their mean: t(9)'s 0.99
    quantile is 2.8214 (tables), so one attempt misses with p = 0.01 and the sequential
    rule fails correct code with 0.01 (1 - 0.99^2) = 2e-4: calibrated. At 1.8331 (the
    0.95 quantile) p = 0.05 and the rule's rate 4.9e-3: not. Nine samples are not
    enough (n < 10), and a sample beyond the bound is never calibrated."""
    vals = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    mean = sum(vals) / 10
    sd = (sum((v - mean) ** 2 for v in vals) / 9) ** 0.5
    lo = mean - 2.8214 * sd * 1.1 ** 0.5
    s = bs.spread({"values": vals, "lo": lo, "hi": None})
    assert s["p_model"] == pytest.approx(0.01, abs=2e-5)
    assert s["false_fail"] == pytest.approx(0.01 * (1 - 0.99 ** 2), rel=1e-2)
    assert bs.calibrated(s, 10) == "yes"
    wide = bs.spread({"values": vals, "lo": mean - 1.8331 * sd * 1.1 ** 0.5, "hi": None})
    assert wide["p_model"] == pytest.approx(0.05, abs=5e-5)
    assert bs.calibrated(wide, 10) == "no (rate above 1/1000)"
    assert bs.calibrated(bs.spread({"values": vals[:9], "lo": 0.0, "hi": None}),
                         10) == "no (n < 10)"
    missed = bs.spread({"values": vals, "lo": 1.5, "hi": None})
    assert missed["misses"] == 1 and missed["p"] >= 0.1
    assert bs.calibrated(missed, 10) == "no (1 missed)"


@pytest.mark.parametrize("n, verdict", [(40, "no (1 missed)"), (50, "yes (1 missed)")])
def test_one_miss_is_calibrated_only_when_its_share_alone_keeps_the_rate_low(n, verdict):
    """One miss among n samples: p is at least 1/n, and the sequential rule's rate
    p (1 - (1 - p)^2) is under 1/1000 from n = 45 on (1/40: 1.2e-3; 1/50: 7.9e-4),
    however far the other samples sit from the bound."""
    vals = [10.0 + 0.01 * (i % 7 - 3) for i in range(n - 1)] + [5.0]
    s = bs.spread({"values": vals, "lo": 8.0, "hi": None})
    assert s["misses"] == 1 and s["p"] == pytest.approx(1 / n)
    assert bs.calibrated(s, 10) == verdict


def test_a_band_whose_bound_moves_with_its_run_is_judged_against_each_runs_bound(tmp_path):
    """A bound computed from the run (a stopped sender's window): each sample is judged
    against its own. Values that track their bound 1 below it never miss, however far
    the bounds move (the first record's bound would call half of them misses), and the
    gap's spread, not the values', makes the model's p; the table shows the range."""
    his = [2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0, 18.0, 20.0]
    vals = [h - 1.0 + 0.01 * (i % 3) for i, h in enumerate(his)]
    data = {"tests": {"tests/vm/t.py::test_x": {"values": [
        {"name": "band", "value": v, "lo": None, "hi": h, "unit": "s"}
        for v, h in zip(vals, his)]}}}
    (tmp_path / "2026-000-acceptance-vm.json").write_text(json.dumps(data))
    b = bs.samples(bs.record_files([str(tmp_path)]))[("test_x", "band")]
    s = bs.spread(b)
    assert s["misses"] == 0 and s["margin_sd"] > 50 and s["p_model"] < 1e-9
    fixed = bs.spread(dict(b, los=None, his=None))     # the first record's bound only
    assert fixed["misses"] == 9
    assert "- .. [2, 20] s" in bs.table({("test_x", "band"): b}, 10, markdown=False)[1]


def test_a_bound_older_records_lacked_is_modelled_over_the_samples_that_had_it():
    """A lower bound added after 5 records: the lower side is modelled over the 10
    samples that had it (close to it: p well above 1/1000), not dropped as if absent."""
    vals = [1.0 + 0.1 * (i % 4) for i in range(15)]
    b = {"values": vals, "lo": None, "hi": 100.0, "los": [None] * 5 + [0.9] * 10,
         "his": [100.0] * 15}
    s = bs.spread(b)
    assert s["misses"] == 0 and 1e-3 < s["p_model"] < 0.5
    assert bs.spread(dict(b, los=[None] * 15))["p_model"] < 1e-9


def test_entries_that_are_not_a_tests_are_not_bands(tmp_path):
    """An entry named without a pytest node id (a unit test's made-up "obs" in records
    written before tests.record.kept_apart) is skipped."""
    data = {"tests": {"obs": {"values": [{"name": "ratio", "value": 7.0, "lo": 5}]},
                      "tests/vm/t.py::test_x": {"values": [
                          {"name": "band", "value": 1.0, "lo": 0, "hi": None}]}}}
    (tmp_path / "2026-000-acceptance-vm.json").write_text(json.dumps(data))
    assert set(bs.samples(bs.record_files([str(tmp_path)]))) == {("test_x", "band")}


def test_a_band_near_its_bound_is_said_to_fail_often(tmp_path):
    """Values whose mean sits one sd above the bound miss ~16 % of attempts."""
    vals = [5.0 + d for d in (-1.0, 1.0, 0.5, 1.5, 2.5, 0.0, 1.0, 2.0, 1.2, 0.8, 0.9, 0.6)]
    _records(tmp_path, vals, lo=5.0)
    s = bs.spread(bs.samples(bs.record_files([str(tmp_path)]))[("test_x", "band")])
    assert 0.1 < s["p_model"] < 0.3 and s["misses"] == 1
    assert s["false_fail"] > 0.01


def test_the_command_prints_the_table_and_refuses_a_missing_path(tmp_path):
    _records(tmp_path, [1.0, 2.0, 3.0], hi=10.0)
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "band_spreads.py"),
                          str(tmp_path), "--markdown"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "3 record files, 0 kept records, 0 bands seeded from summaries; 1 bands with " \
        "values" in out.stdout
    assert "| test_x | band | 3 |" in out.stdout
    bad = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "band_spreads.py"),
                          str(tmp_path / "nothing")], capture_output=True, text=True)
    assert bad.returncode == 2 and "no such record" in bad.stderr


def test_made_up_entries_stay_out_of_the_session_record(request):
    """The entries these tests make under made-up names were archived with the real
    tests' (bench/band_spreads.py listed "obs ratio" as a band): no longer."""
    with record.kept_apart(request.node.nodeid):
        record.begin("made-up")
        retries.observe("x", 1.0, lo=0)
        assert record.entry("made-up")["values"][0]["value"] == 1.0
    assert "made-up" not in record._state["tests"]
    assert record._state["current"] == request.node.nodeid


def test_each_familys_degraded_share_is_summed_and_set_against_its_rate(tmp_path):
    for i, fams in enumerate(({"b": {"degraded": 3, "runs": 4}, "c": {"degraded": 0,
                                                                    "runs": 7}},
                              {"b": {"degraded": 1, "runs": 6}})):
        (tmp_path / f"r{i}.json").write_text(json.dumps(
            {"tier": "acceptance", "phase": "vm", "tests": {},
             "degraded_by_family": fams}))
    files = bs.record_files([str(tmp_path)])
    counts = bs.degraded_counts(files)
    assert counts == {"b": [4, 10], "c": [0, 7]}
    lines = bs.family_table(counts)
    b = next(line for line in lines if line.startswith("b "))
    c = next(line for line in lines if line.startswith("c "))
    # B's 0.4 share is above its rate in use; C's 0 is covered
    assert b.split()[:4] == ["b", "4", "10", "0.4"] and b.endswith("NO")
    assert retries.DEGRADED_RATE["b"] < 0.4
    assert c.endswith("yes")


def _phase_record(path, phase, tests):
    path.write_text(json.dumps({"tier": "acceptance", "phase": phase, "tests": {
        node: {"values": [{"name": "band", "value": 1.0, "lo": 0.0, "hi": None}]}
        for node in tests}}))


def test_wanting_names_each_phases_tests_short_of_samples(tmp_path):
    """--wanting: the test functions of one phase with a band under --min-n samples,
    parameters dropped (-k selects every case), as one -k expression; exit 3 when none
    wants any (bench/calibrate_bands.sh stops on it)."""
    for i in range(3):
        _phase_record(tmp_path / f"{i}-acceptance-vm.json", "vm",
                      ["tests/vm/t.py::test_often"] + (["tests/vm/t.py::test_rare[a-1]",
                                                        "tests/vm/t.py::test_rare[b-2]"]
                                                       if i == 0 else []))
        _phase_record(tmp_path / f"{i}-acceptance-host.json", "host",
                      ["tests/host/h.py::test_host_only"])
    bands = bs.samples(bs.record_files([str(tmp_path)]))
    assert bands[("test_often", "band")]["phases"] == {"vm"}
    assert bs.wanting(bands, "vm", 3) == ["test_rare"]
    assert bs.wanting(bands, "vm", 4) == ["test_often", "test_rare"]
    assert bs.wanting(bands, "host", 3) == []
    cmd = [sys.executable, os.path.join(ROOT, "bench", "band_spreads.py"), str(tmp_path)]
    out = subprocess.run(cmd + ["--wanting", "vm", "--min-n", "4"],
                         capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == "test_often or test_rare\n", out.stderr
    none = subprocess.run(cmd + ["--wanting", "host", "--min-n", "3"],
                          capture_output=True, text=True)
    assert none.returncode == 3 and none.stdout == ""
    both = subprocess.run(cmd + ["--wanting", "vm", "--markdown"], capture_output=True,
                          text=True)
    assert both.returncode == 2 and "not allowed with" in both.stderr


@pytest.mark.parametrize("args, says", [
    (["--rounds", "x"], "whole numbers"), (["--rounds", "0"], "at least 1"),
    (["--min-n", "1"], "at least 2"), (["--minutes", "-3"], "whole numbers"),
    (["--both"], "unknown option")])
def test_the_calibration_driver_refuses_bad_input_before_running_anything(args, says):
    out = subprocess.run([os.path.join(ROOT, "bench", "calibrate_bands.sh")] + args,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and says in out.stderr, out
    assert "=== calibrate" not in out.stdout


def test_a_side_the_newest_record_drops_is_no_longer_judged(tmp_path):
    """A FIFO's peak backlog at its 100-packet limit in every run: sd 0 on the ceiling,
    so a band with that ceiling misses with p = 1 by the model. The test made the
    ceiling a contract (asserted apart) and records the floor only: from the newest
    record on, the ceiling is no side of the band, for the older samples too."""
    for i in range(10):
        data = {"tests": {"tests/host/t.py::test_fifo": {"values": [
            {"name": "peak", "value": 100.0, "lo": 90, "hi": 100 if i < 9 else None}]}}}
        (tmp_path / f"2026-{i:03d}-gate-host.json").write_text(json.dumps(data))
    bands = bs.samples(bs.record_files([str(tmp_path)]))
    s = bs.spread(bands[("test_fifo", "peak")], ("test_fifo", "peak"))
    assert s["p"] == 0.0 and s["misses"] == 0
    assert bs.bounds(bands[("test_fifo", "peak")])[1] == [None] * 10
    assert "| 90 .. - |" in bs.table(bands, 10, markdown=True)[2]
    older = dict(bands[("test_fifo", "peak")], his=[100] * 10)
    assert bs.spread(older)["p"] == 1.0


def test_a_bound_restated_in_the_code_judges_every_sample(tmp_path, monkeypatch):
    """E's RED utilization floor went from 0.9 to 0.75 (theory); a 0.786 recorded under
    0.9 was a miss then, and is judged against the floor the test has now."""
    key = ("test_u", "utilization")
    monkeypatch.setitem(bs.RESTATED, key, {"lo": (0.75, "from theory")})
    for i, (v, lo) in enumerate(((0.99, 0.9), (0.786, 0.9), (0.97, 0.75))):
        data = {"tests": {"tests/vm/t.py::test_u": {"values": [
            {"name": "utilization", "value": v, "lo": lo, "hi": None}]}}}
        (tmp_path / f"2026-{i:03d}-acceptance-vm.json").write_text(json.dumps(data))
    bands = bs.samples(bs.record_files([str(tmp_path)]))
    assert bs.spread(bands[key], key)["misses"] == 0
    assert bs.spread(bands[key])["misses"] == 1          # each run's own bound
    assert "0.75 .. - (restated)" in bs.table(bands, 10, markdown=False)[1]


def _summary(xs, lo=None, hi=None, test="test_x", band="band", phase="vm"):
    mean = sum(xs) / len(xs)
    sd = (sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5
    return {"summary": {"test": test, "band": band, "phase": phase, "n": len(xs),
                        "mean": mean, "sd": sd, "min": min(xs), "max": max(xs),
                        "lo": lo, "hi": hi, "unit": "ms", "misses": 0, "source": "t"}}


@pytest.mark.parametrize("lo, hi", [(5.0, None), (None, 12.5), (6.0, 13.0)])
def test_a_summary_seed_counts_as_the_samples_it_summarises(tmp_path, lo, hi):
    """Twelve values, the first five kept only as a summary (n, mean, sd, min, max: an
    archive lost with its machine) and seven as records: the pooled spread equals the
    twelve values' own, to rounding."""
    xs = [10.0, 10.4, 9.7, 11.2, 10.1, 9.9, 10.6, 10.3, 9.5, 10.8, 10.0, 11.0]
    whole = tmp_path / "whole"
    part = tmp_path / "part"
    whole.mkdir()
    part.mkdir()
    _records(whole, xs, lo=lo, hi=hi)
    _records(part, xs[5:], lo=lo, hi=hi)
    want = bs.spread(bs.samples(bs.record_files([str(whole)]))[("test_x", "band")])
    b = bs.samples(bs.record_files([str(part)]), [_summary(xs[:5], lo, hi)])[
        ("test_x", "band")]
    assert bs.count(b) == 12
    got = bs.spread(b)
    for k in ("n", "mean", "sd", "min", "max", "margin_sd", "p_model", "misses"):
        assert got[k] == pytest.approx(want[k], rel=1e-9, abs=1e-15), k
    # a seed alone is a band too, and its phase is known before any record of it
    alone = bs.samples([], [_summary(xs[:5], lo, hi)])[("test_x", "band")]
    assert alone["phases"] == {"vm"} and bs.spread(alone)["n"] == 5
    assert bs.wanting({("test_x", "band"): alone}, "vm", 10) == ["test_x"]


def test_a_seed_outside_its_bound_is_a_miss_and_a_restated_bound_judges_it(monkeypatch):
    seed = _summary([0.786, 0.95, 0.97], lo=0.9, test="test_u", band="utilization")
    key = ("test_u", "utilization")
    b = bs.samples([], [seed])[key]
    assert bs.spread(b, key)["misses"] == 1 and bs.calibrated(bs.spread(b, key), 3) != "yes"
    monkeypatch.setitem(bs.RESTATED, key, {"lo": (0.75, "from theory")})
    assert bs.spread(b, key)["misses"] == 0


def test_a_printed_table_seeds_what_it_printed(tmp_path):
    """--markdown's table read back (--seed-markdown): a band with fixed bounds becomes
    a summary whose spread is the table's, to its 4 significant digits; a band whose
    bound varied from run to run is not seeded (its gaps cannot be rebuilt); the
    degraded counts come along."""
    _records(tmp_path, [10.0, 10.4, 9.7, 11.2, 10.1], lo=5.0)
    for i, v in enumerate((3.0, 3.5, 2.5)):
        data = {"tests": {"tests/vm/t.py::test_m": {"values": [
            {"name": "moving", "value": v, "lo": 1.0 + i, "hi": None}]}},
                "degraded_by_family": {"a": {"degraded": 1, "runs": 4}}}
        (tmp_path / f"2026-1{i:02d}-acceptance-vm.json").write_text(json.dumps(data))
    files = bs.record_files([str(tmp_path)])
    bands = bs.samples(files)
    text = "\n".join(bs.table(bands, 10, True) + bs.family_table(bs.degraded_counts(files)))
    seeds = bs.summaries_from_markdown(text, "t", lambda test: "vm")
    assert [s["summary"]["band"] for s in seeds if "summary" in s] == ["band"]
    assert seeds[-1] == {"families": {"a": {"degraded": 3, "runs": 12}}, "source": "t"}
    got = bs.spread(bs.samples([], seeds)[("test_x", "band")])
    want = bs.spread(bands[("test_x", "band")])
    for k in ("n", "mean", "sd", "min", "max", "margin_sd"):
        assert got[k] == pytest.approx(want[k], rel=1e-3), k
    assert bs.degraded_counts([], seeds) == {"a": [3, 12]}


def test_kept_records_count_once_and_survive_the_archive(tmp_path):
    """--keep trims each record to its bands' values into the kept file, once: kept
    again, nothing is added; read back without the record files (a fresh machine), the
    bands and degraded counts are the records'; a record file and its kept line count
    once."""
    recs = tmp_path / "recs"
    recs.mkdir()
    _records(recs, [10.0, 10.4, 9.7])
    data = json.loads((recs / "2026-000-acceptance-vm.json").read_text())
    data.update(phase="vm", degraded_by_family={"b": {"degraded": 1, "runs": 2}},
                load_max=[1.0, 1.0, 1.0])
    data["tests"]["tests/vm/t.py::test_x"]["duration_s"] = 3.0
    (recs / "2026-000-acceptance-vm.json").write_text(json.dumps(data))
    path = str(tmp_path / "kept.jsonl")
    files = bs.record_files([str(recs)])
    assert bs.keep(files, path) == 3 and bs.keep(files, path) == 0
    kept = bs.read_kept(path)
    assert [k["record"] for k in kept] == sorted(os.path.basename(f) for f in files)
    assert "load_max" not in kept[0] and "duration_s" not in json.dumps(kept)
    alone = bs.samples([], kept)[("test_x", "band")]
    both = bs.samples(files, kept)[("test_x", "band")]
    assert alone["values"] == both["values"] == [10.0, 10.4, 9.7]
    assert alone["phases"] == {"vm", "?"}
    assert bs.degraded_counts([], kept) == bs.degraded_counts(files, kept) == {"b": [1, 2]}


def test_wanting_a_phase_nothing_was_recorded_in_exits_4(tmp_path):
    """A fresh machine: no record of the VM phase, so which of its tests have bands is
    unknown; --wanting says so (exit 4) and bench/calibrate_bands.sh runs it whole."""
    _phase_record(tmp_path / "0-acceptance-host.json", "host", ["tests/host/h.py::test_h"])
    cmd = [sys.executable, os.path.join(ROOT, "bench", "band_spreads.py"), str(tmp_path)]
    out = subprocess.run(cmd + ["--wanting", "vm"], capture_output=True, text=True)
    assert out.returncode == 4 and out.stdout == "", out.stderr
    assert subprocess.run(cmd + ["--wanting", "host"], capture_output=True,
                          text=True).returncode == 0


def test_a_band_its_tests_newest_passing_record_lacks_is_retired(tmp_path):
    """B.1's p95 assert became a medians' ratio: the old band's samples stay in the
    archive, but from the first passing record without it the band is retired (no row,
    wanting nothing); a failed record that stopped before a band retires nothing."""
    def rec(i, names, outcome="passed"):
        data = {"tests": {"tests/vm/t.py::test_b1": {"outcome": outcome, "values": [
            {"name": n, "value": 1.0, "lo": 0.5, "hi": 1.5} for n in names]}}}
        (tmp_path / f"2026-{i:03d}-acceptance-vm.json").write_text(json.dumps(data))
    rec(0, ["old", "kept"])
    rec(1, ["kept"], outcome="failed")
    assert set(bs.samples(bs.record_files([str(tmp_path)]))) == {
        ("test_b1", "old"), ("test_b1", "kept")}
    rec(2, ["kept", "new"])
    bands = bs.samples(bs.record_files([str(tmp_path)]),
                       [_summary([1.0, 1.1], test="test_b1", band="older")])
    assert set(bands) == {("test_b1", "kept"), ("test_b1", "new")}
    assert len(bands[("test_b1", "kept")]["values"]) == 3
