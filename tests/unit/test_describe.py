"""``bufferbloat describe`` and the scenarios' headline declarations."""
import os
import re

import pytest

from bufferbloat.cli import main
from bufferbloat.describe import describe, key_rows, unit_of
from bufferbloat.net.topology import DUMBBELL_PARAMS
from bufferbloat.results import headline, theory
from bufferbloat.results.records import load_run
from bufferbloat.run.plan import points
from bufferbloat.scenarios import catalogue

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures", "runs")
CATALOGUE = catalogue()


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_every_settable_key_is_described_with_its_allowed_values(name):
    scn = CATALOGUE[name]
    text = describe(scn)
    rows = {r[0]: r for r in key_rows(scn)}
    assert set(rows) == set(scn.valid_keys())
    for key in scn.valid_keys():
        assert any(re.match(rf"  {re.escape(key)}\s", line) for line in text), key
    for line in text:
        if line.startswith("  variant "):
            assert all(v in line for v in scn.variants)


def test_defaults_units_and_ranges_come_from_the_declarations():
    scn = CATALOGUE["a1_fifo"]
    rows = {r[0]: r for r in key_rows(scn)}
    buffer = next(p for p in DUMBBELL_PARAMS if p.name == "buffer_pkts")
    # the scenario's own value, the unit of its name, the declared range
    assert rows["buffer_pkts"][1:4] == (100, "packets", buffer.allowed())
    assert rows["delay_ms"][1:3] == (5, "ms")
    assert rows["qdisc.limit_pkts"][1] == 100
    # another qdisc's key says which qdisc takes it
    assert "qdisc=pie" in rows["qdisc.tupdate_ms"][4]
    assert unit_of("udp_rate_kbit") == "kbit/s" and unit_of("flows") == ""


@pytest.mark.parametrize("name", ["c1_red_vs_pie", "d1_cca_paths", "a4_wifi_loss"])
def test_sweep_sizes_are_the_sweeps(name):
    scn = CATALOGUE[name]
    text = "\n".join(describe(scn))
    full = len(points(scn.sweep_for(False), scn.repeat))
    quick = len(points(scn.sweep_for(True), 1))
    assert re.search(rf"full: .* = {full} runs", text)
    assert re.search(rf"quick: .* = {quick} runs", text)


def test_headline_theory_at_the_default_setting():
    text = "\n".join(describe(CATALOGUE["a1_fifo"]))
    bound = theory.full_queue_rtt_ms(20, 100, 1.5, probe_interval_s=0.1)
    assert f"theory rtt_ms = {headline.fmt(bound, 'ms')}" in text
    assert f"= {headline.fmt(theory.tcp_goodput_ceiling(1.5), 'Mbit/s')}" in text


def test_describe_command(capsys):
    assert main(["describe", "a2_pie"]) == 0
    out = capsys.readouterr().out
    for section in ("study:", "topology:", "traffic", "keys", "sweep", "figures",
                    "expected result:", "headline"):
        assert section in out
    assert main(["describe", "nosuch"]) == 2


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_every_scenario_declares_study_headline_and_figures(name):
    scn = CATALOGUE[name]
    assert scn.study and scn.expect and scn.headline and scn.reproduce


#: headline metrics a fixture cannot have, and why
NOT_IN_FIXTURE = {
    "a1_fifo": {"web:all:total_mean_s"},      # 8 s run: its only fetch did not finish
}


@pytest.mark.parametrize("fixture,scenario", [("a1_fifo", "a1_fifo"), ("a2_pie", "a2_pie"),
                                              ("b2_rrul", "b2_pie_target"),
                                              ("c1_red_2flows", "c1_red_vs_pie")])
def test_headline_metrics_name_metrics_a_run_has(fixture, scenario):
    """The declared selectors find values in a real run of the scenario (no typo), its
    metrics computed by this code."""
    from bufferbloat.results.metrics import compute_metrics
    run = load_run(os.path.join(FIXTURES, fixture))
    rows = compute_metrics(run, warmup_s=run.record.get("warmup_s") or 0.0)
    items = headline.values(run, rows, entries=CATALOGUE[scenario].headline)
    missing = {i["metric"] for i in items if i["value"] is None}
    assert missing == NOT_IN_FIXTURE.get(fixture, set())


def test_headline_theory_of_a_recorded_run():
    run = load_run(os.path.join(FIXTURES, "a1_fifo"))   # FIFO 100 pkts, delay 0
    items = {i["metric"]: i for i in headline.values(run, catalogue=CATALOGUE)}
    rtt = items["ping:rtt_mean_ms"]
    expected = theory.full_queue_rtt_ms(theory.base_rtt_ms(run), 100, 1.5,
                                        probe_interval_s=0.1)
    assert rtt["theory_value"] == pytest.approx(expected)
    assert rtt["ratio"] == pytest.approx(rtt["value"] / expected)
    pie = load_run(os.path.join(FIXTURES, "a2_pie"))
    items = {i["metric"]: i for i in headline.values(pie, catalogue=CATALOGUE)}
    assert items["ping:rtt_mean_ms"]["theory_value"] == pytest.approx(
        20 + theory.base_rtt_ms(pie))


def test_a_bad_headline_declaration_is_refused():
    with pytest.raises(ValueError, match="theory"):
        headline.check(({"metric": "ping:rtt_mean_ms", "label": "x", "expect": "y",
                         "theory": "nosuch"},), "t")
    with pytest.raises(ValueError, match="scope"):
        headline.check(({"metric": "pong:rtt_mean_ms", "label": "x", "expect": "y"},), "t")


def test_a_pattern_and_a_sum_select_rows():
    rows = [dict(scope="flow", name=f"rrul-{d}-{i}", metric="throughput_mbit", value=v,
                 unit="Mbit/s") for d, i, v in (("up", 1, 1.0), ("down", 1, 2.0),
                                                ("down", 2, 3.0))]
    assert headline.select(rows, "flow:rrul-down-*:throughput_mbit", "sum") == 5.0
    assert headline.select(rows, "flow:throughput_mbit") == 2.0
    assert headline.evaluate(rows, {"metric": "flow:rrul-*:throughput_mbit",
                                    "agg": "sum"}) == 6.0


def test_the_expected_shape_says_when_the_run_changed_the_studys_qdisc():
    run = load_run(os.path.join(FIXTURES, "a2_pie"))
    assert not headline.values(run, catalogue=CATALOGUE)[0]["expect"].startswith("(the study's")
    run.record["qdisc"] = dict(run.record["qdisc"], kind="fifo", params={"limit_pkts": 100})
    items = headline.values(run, catalogue=CATALOGUE)
    assert items[0]["expect"].startswith("(the study's, with pie; this run has fifo)")
    # the theory follows the run: the FIFO's full-queue RTT, not PIE's target
    assert items[0]["theory_value"] == pytest.approx(theory.run_full_queue_rtt_ms(run))
