"""The scenario model and the catalogue: every scenario and every sweep point validates
without building anything; bad overrides are refused with the valid keys."""
import itertools

import pytest

from bufferbloat.core.errors import UsageError
from bufferbloat.run import derive
from bufferbloat.run.scenario import Scenario
from bufferbloat.scenarios import catalogue

CAT = catalogue()


def test_catalogue_covers_every_family():
    assert {s.family for s in CAT.values()} == {"A", "B", "C", "D", "E", "F"}


@pytest.mark.parametrize("name", sorted(CAT))
def test_every_sweep_point_and_the_quick_profile_validate(name):
    scn = CAT[name]
    topo, knobs, traffic = scn.build(quick=True)
    assert traffic, "a scenario without traffic measures nothing"
    for sweep in (scn.sweep_for(False), scn.sweep_for(True)):
        assert set(scn.sweep_for(True)) <= set(scn.sweep) or not scn.sweep
        for combo in itertools.product(*sweep.values()):
            _check_point(scn, dict(zip(sweep, combo)))


def _check_point(scn, point):
    # a knob the sweep fills from another point's result (d1's streams: the bulk run's
    # goodput) is validated with a stand-in value, as the sweep does
    topo, knobs, traffic = scn.build(derive.placeholders(scn, point))
    for key, value in point.items():
        if key in knobs:
            assert knobs[key] == value
        elif key.startswith("qdisc."):
            assert topo.qdisc.params[key[6:]] == pytest.approx(value)
        elif key != "variant":
            assert topo.params[key] == value


def test_unknown_key_lists_the_valid_ones():
    with pytest.raises(UsageError) as err:
        CAT["a1_fifo"].build({"bufer_pkts": 10})
    assert "bufer_pkts" in str(err.value) and "buffer_pkts" in str(err.value)


def test_bad_knob_value_names_the_knob():
    with pytest.raises(UsageError) as err:
        CAT["a3_pie_flows"].build({"flows": 0})
    assert "flows" in str(err.value)


def test_unknown_variant_lists_the_variants():
    with pytest.raises(UsageError) as err:
        CAT["a4_wifi_loss"].build({"variant": "red"})
    assert "fifo" in str(err.value) and "pie10" in str(err.value)


def test_variant_sets_several_parameters_and_overrides_win():
    topo, knobs, _ = CAT["a4_wifi_loss"].build({"variant": "pie10", "loss_pct": 2})
    assert topo.qdisc.kind == "pie" and topo.qdisc.params["target_ms"] == 20
    assert knobs["flows"] == 10 and topo.params["loss_pct"] == 2


def test_knob_references_conditions_and_sender_expansion():
    scn = Scenario(name="t", description="t", topology="kdumbbell", params=dict(k=3),
                   knobs=dict(flows=4, extra="none"),
                   traffic=({"kind": "iperf", "src": "senders", "dst": "receiver",
                             "parallel": "$flows"},
                            {"kind": "iperf", "name": "x", "src": "h1", "dst": "receiver",
                             "rate_mbit": "bottleneck", "when": {"extra": "udp"}}))
    _, _, traffic = scn.build()
    assert [t["src"] for t in traffic] == ["h1", "h2", "h3"]
    assert all(t["dst"] == "h4" and t["parallel"] == 4 for t in traffic)
    _, _, traffic = scn.build({"extra": "udp", "bottleneck_mbit": 7})
    assert traffic[-1]["name"] == "x" and traffic[-1]["rate_mbit"] == 7


@pytest.mark.parametrize("name", ["a1_fifo", "a2_pie", "a3_pie_flows", "a4_wifi_loss",
                                  "a5_video"])
def test_family_a_fetches_one_way_or_the_other(name):
    """EXPERIMENTS.md's direction by default (h1 downloads from h2); web_server=h1 turns
    it round (the page then crosses the bottleneck s0 -> h2); one fetcher either way."""
    for server, client in (("h2", "h1"), ("h1", "h2")):
        over = {} if server == "h2" else {"web_server": server}
        _, knobs, traffic = CAT[name].build(over)
        web = [t for t in traffic if t["kind"] == "web"]
        assert [(w["server"], w["client"]) for w in web] == [(server, client)]
        assert knobs["web_server"] == server
    with pytest.raises(UsageError) as err:
        CAT[name].build({"web_server": "h3"})
    assert "web_server" in str(err.value) and "h1" in str(err.value)


def test_bad_traffic_declarations_are_caught_when_the_module_loads():
    with pytest.raises(ValueError):
        Scenario(name="t", description="t", traffic=({"kind": "ftp"},))
    with pytest.raises(ValueError):
        Scenario(name="t", description="t", traffic=({"kind": "ping", "rate": 1},))
    scn = Scenario(name="t", description="t",
                   traffic=({"kind": "ping", "src": "h9", "dst": "h2"},))
    with pytest.raises(UsageError):
        scn.build()


def test_scaling_keeps_the_study_delays():
    """80 Mbit/s, 100 packets (15 ms of queue) scaled to 20 Mbit/s: 25 packets, still
    15 ms; RED's byte thresholds scale alike; targets and delays stay."""
    scn = CAT["e1_aqm_kflows"]
    topo, _, traffic = scn.build(max_rate_mbit=20)
    assert topo.bottleneck.rate_mbit == 20 and topo.params["buffer_pkts"] == 25
    assert topo.scaling["factor"] == pytest.approx(0.25)
    topo, _, _ = scn.build({"variant": "red"}, max_rate_mbit=20)
    assert topo.qdisc.params["limit_bytes"] == 151_400 // 4
    assert topo.qdisc.params["min_bytes"] == 15_140 // 4
    assert topo.qdisc.params["max_bytes"] == 45_420 // 4
    topo, _, _ = scn.build({"variant": "pie"}, max_rate_mbit=20)
    assert topo.qdisc.params["target_ms"] == 15.0   # delays are not scaled
    # a rate below the cap is left alone
    topo, _, _ = CAT["a1_fifo"].build(max_rate_mbit=20)
    assert topo.scaling is None and topo.params["buffer_pkts"] == 100


def test_scaling_scales_traffic_rates_once():
    topo, _, traffic = CAT["b1_pie_tupdate"].build({"extra": "udp"}, max_rate_mbit=20)
    flood = [t for t in traffic if t["name"] == "flood"][0]
    assert flood["rate_mbit"] == 20               # "the link rate" is the scaled link
    scn = CAT["a5_video"]
    topo, _, traffic = scn.build({"bottleneck_mbit": 6}, max_rate_mbit=3)
    video = [t for t in traffic if t["name"] == "video"][0]
    assert video["rate_kbit"] == pytest.approx(250)
