"""A scaled run says which of its numbers hold at the study's rate and
where the evidence is (docs/design/scaling.md, measured by bench/bench_scaling.py): in
``describe`` for the scenarios the TCG VM scales, in a scaled run's summary and in its
report's configuration; never for a run at the study's rate."""
import os

from bufferbloat.describe import describe
from bufferbloat.net import scaling
from bufferbloat.scenarios import catalogue

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CAT = catalogue()


def test_the_evidence_file_exists_and_names_every_scaled_scenario():
    with open(os.path.join(ROOT, scaling.EVIDENCE)) as f:
        text = f.read()
    scaled = [n for n, scn in CAT.items() if _vm_scaling(scn)]
    assert set(scaled) >= {"e1_aqm_kflows", "b1_pie_tupdate", "b2_pie_target"}
    for family in {CAT[n].family for n in scaled}:
        assert f"**Family {family}**" in text, family   # its section


def _vm_scaling(scn):
    return scn.build(max_rate_mbit=scaling.per_direction_cap(scn))[0].scaling


def test_describe_names_what_holds_for_scaled_scenarios_only():
    for name, scn in CAT.items():
        text = "\n".join(describe(scn))
        if _vm_scaling(scn):
            assert scaling.EVIDENCE in text and "hold at the study's rate" in text, name
            assert "these do not" in text, name
        else:
            assert scaling.EVIDENCE not in text, name


def test_a_scaled_runs_lines_and_an_unscaled_ones():
    topo = CAT["e1_aqm_kflows"].build(max_rate_mbit=20)[0]
    lines = scaling.evidence_lines(topo.scaling, "E")
    assert lines[0].startswith("rate-scaled x0.25 (80 -> 20 Mbit/s")
    assert "hold at the study's rate" in lines[0] and "drop %" in lines[1]
    assert "not measured" in scaling.evidence_lines(topo.scaling, "A")[0]
    assert any(scaling.EVIDENCE in line for line in lines)
    assert scaling.evidence_lines(None) == []
    assert scaling.evidence_lines(CAT["a1_fifo"].build(max_rate_mbit=20)[0].scaling) == []


def test_the_summary_and_the_report_of_a_scaled_run_carry_it(tmp_path):
    from bufferbloat import summary
    from bufferbloat.plots.report import config_pairs
    from bufferbloat.results.records import load_run
    from bufferbloat.results.records_writer import RunWriter
    topo = CAT["e1_aqm_kflows"].build(max_rate_mbit=20)[0]
    w = RunWriter(str(tmp_path / "r"))
    w.record.update(scenario={"name": "e1_aqm_kflows", "family": "E"}, scaling=topo.scaling,
                    params=dict(topo.params), duration_s=10, profile="quick")
    w.close("ok")
    run = load_run(str(tmp_path / "r"))
    text = "\n".join(summary.lines(run, rows=[]))
    assert scaling.EVIDENCE in text and "80 -> 20 Mbit/s" in text
    pairs = dict(config_pairs(run))
    assert scaling.EVIDENCE in pairs["rate scaling"]
