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


def test_ten_samples_far_inside_are_not_enough_to_claim_one_in_a_thousand(tmp_path):
    """Ten values 10 sd inside the bound: the normal tail says ~0, but ten clean samples
    can only show p <= 0.26 (3/n): the false-fail rate stays above 1/1000; at 3,000
    samples the bound falls to 0.001 and the rate to ~2e-6."""
    _records(tmp_path, [10.0 + 0.1 * (i % 3) for i in range(10)], lo=5.0)
    bands = bs.samples(bs.record_files([str(tmp_path)]))
    s = bs.spread(bands[("test_x", "band")])
    assert s["n"] == 10 and s["misses"] == 0 and s["margin_sd"] > 10
    assert s["p"] == pytest.approx(1 - 0.05 ** 0.1, abs=1e-6)
    assert s["false_fail"] > 1e-3
    lines = bs.table(bands, 10, markdown=True)
    assert "no (rate above 1/1000)" in lines[2] and lines[-1].startswith("1 bands, 0")


def test_a_band_near_its_bound_is_said_to_fail_often(tmp_path):
    """Values whose mean sits one sd above the bound miss ~16 % of attempts."""
    vals = [5.0 + d for d in (-1.0, 1.0, 0.5, 1.5, 2.5, 0.0, 1.0, 2.0, 1.2, 0.8, 0.9, 0.6)]
    _records(tmp_path, vals, lo=5.0)
    s = bs.spread(bs.samples(bs.record_files([str(tmp_path)]))[("test_x", "band")])
    assert 0.1 < s["p_normal"] < 0.3 and s["misses"] == 1
    assert s["false_fail"] > 0.01


def test_the_command_prints_the_table_and_refuses_a_missing_path(tmp_path):
    _records(tmp_path, [1.0, 2.0, 3.0], hi=10.0)
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "band_spreads.py"),
                          str(tmp_path), "--markdown"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "3 records, 1 bands with values" in out.stdout
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
