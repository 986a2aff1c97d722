"""The end of ``run``: the headline with theory, health, flags, figure and report paths."""
import os
import shutil

import pytest

from bufferbloat import summary
from bufferbloat.results import theory
from bufferbloat.results.headline import fmt
from bufferbloat.results.records import load_run

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures", "runs")


@pytest.fixture
def fifo_run(tmp_path):
    dst = tmp_path / "a1_fifo"
    shutil.copytree(os.path.join(FIXTURES, "a1_fifo"), dst)
    return str(dst)


def test_summary_writes_figures_and_report_and_names_them(fifo_run):
    out = summary.finish(fifo_run)
    text = "\n".join(out)
    figures = [line.strip() for line in out if line.strip().endswith(".png")]
    assert figures and all(os.path.getsize(p) > 1000 for p in figures)
    # the scenario's own figures come first
    assert [os.path.basename(p) for p in figures[:4]] == ["cwnd.png", "rtt.png",
                                                          "queue.png", "web.png"]
    page = next(line.split(": ", 1)[1] for line in out if line.startswith("report: "))
    assert os.path.isfile(page) and page.endswith("report.html")
    assert text.startswith(f"result: {fifo_run}")
    assert "health:" in text and "flags" in text
    assert f"bufferbloat show {fifo_run}" in text


def test_summary_puts_theory_beside_the_headline(fifo_run):
    run = load_run(fifo_run)
    text = "\n".join(summary.lines(run))
    bound = theory.run_full_queue_rtt_ms(run)
    assert f"theory {fmt(bound, 'ms')}" in text
    assert "expected: climbs towards the full-queue bound" in text
    # the headline, not the whole table: percentiles of every scope stay in `show`
    assert "srtt_p99_ms" not in text and "qlen_p95_pkts" not in text
    assert len(text.splitlines()) < 30


def test_the_end_of_a_sweep_names_its_figures_the_studys_first(tmp_path):
    d = tmp_path / "sweep"
    shutil.copytree(os.path.join(FIXTURES, "sweep_fifo_buffer"), d)
    out = summary.finish_sweep(str(d))
    shown = [line.strip() for line in out if line.strip().endswith(".png")]
    assert [os.path.basename(p) for p in shown[:2]] == ["a1_fifo-timeseries.png",
                                                       "a1_fifo-fetch.png"]
    assert all(os.path.isfile(p) and os.path.dirname(p) == str(d / "figures")
               for p in shown)
    assert out[-1] == f"report: {d / 'report.html'}" and (d / "report.html").is_file()
    # each run's figures are under the run
    assert len(list(d.glob("*/rep-*/figures/rtt.png"))) == 4
