"""Figures drawn from stored run results only (one module per figure kind).

Every figure is built from a run directory through :func:`bufferbloat.results.load_run`
(never from a live run), as a matplotlib Figure on the Agg canvas, and saved as PNG (SVG
or PDF on request). Per run (:data:`FIGURES`, name -> ``draw(run) -> Figure | None``):

=========== ================================================== ===================
name        what                                               module
=========== ================================================== ===================
cwnd        cwnd of every flow vs time                         :mod:`.cwnd`
rtt         ping RTT vs time, base/full-queue RTT, target      :mod:`.rtt`
queue       AQM leaf queue length, packets and bytes           :mod:`.queue`
qdelay      queueing delay (backlog/rate, AQM's own), target   :mod:`.queue`
drops       drops, early drops, ECN marks per second; PIE prob :mod:`.drops`
throughput  per-flow and aggregate throughput, link rate       :mod:`.throughput`
fairness    per-flow mean throughput, Jain's index             :mod:`.throughput`
web         web fetch times, failures marked                   :mod:`.web`
udp         UDP throughput / one-way delay / loss              :mod:`.udp`
totals      RRUL download/upload/latency totals                :mod:`.totals`
ellipsis    latency vs throughput mean + covariance ellipse    :mod:`.ellipsis`
ecdf        eCDFs of RTT and throughput                        :mod:`.ecdf`
operating   mean operating point per flow                      :mod:`.operating`
owd         srtt / ping RTT and the application's one-way delay :mod:`.flowseries`
flows       in flight, srtt and throughput per flow vs time    :mod:`.flowseries`
=========== ================================================== ===================

Across runs: :mod:`.sweep` (metric vs swept parameter, box plots, qdisc comparisons,
CSV/Markdown tables); warnings against theory: :func:`.flags.flags`; one HTML page:
:func:`.report.write_report`. Colours: :mod:`.palette`.
"""

import os

from bufferbloat.errors import UsageError

from . import (cwnd, drops, ecdf, ellipsis, flowseries, operating, queue, rtt, sweep,
               throughput, totals, udp, web)
from .common import FORMATS, as_run, save
from .flags import flags

FIGURES = {
    "cwnd": cwnd.draw,
    "rtt": rtt.draw,
    "queue": queue.draw,
    "qdelay": queue.draw_qdelay,
    "drops": drops.draw,
    "throughput": throughput.draw,
    "fairness": throughput.draw_fairness,
    "web": web.draw,
    "udp": udp.draw,
    "totals": totals.draw,
    "ellipsis": ellipsis.draw,
    "ecdf": ecdf.draw,
    "operating": operating.draw,
    "owd": flowseries.draw_owd,
    "flows": flowseries.draw_flows,
}
FIGURES_DIR = "figures"

__all__ = ["FIGURES", "FORMATS", "draw_figures", "draw_run", "draw_sweep", "flags",
           "cli_plot", "cli_report", "scenario_figures"]


def scenario_figures(run):
    """The figure names the run's scenario asks for (its ``figures`` field), known ones
    only, in its order."""
    scn = run.record.get("scenario")
    wanted = scn.get("figures") if isinstance(scn, dict) else None
    return [name for name in (wanted or []) if name in FIGURES]


def draw_figures(run, names=None):
    """{name: Figure} of ``run`` (Run or directory): the scenario's figures first, then
    every other figure its data allows (``names`` restricts the list). Figures whose
    data the run lacks are left out."""
    run = as_run(run)
    order = list(dict.fromkeys(scenario_figures(run) + list(FIGURES)))
    if names is not None:
        unknown = set(names) - set(FIGURES)
        if unknown:
            raise UsageError(f"unknown figure(s) {', '.join(sorted(unknown))} "
                             f"(valid: {', '.join(FIGURES)})")
        order = [n for n in order if n in names]
    out = {}
    for name in order:
        fig = FIGURES[name](run)
        if fig is not None:
            out[name] = fig
    return out


def draw_run(run_dir, fmt="png", names=None, out_dir=None):
    """Redraw a run's figures from its stored results into ``RUN_DIR/figures/`` (or
    ``out_dir``) as ``NAME.FMT``; returns the paths written. Nothing is rerun."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown figure format {fmt!r} (valid: {', '.join(FORMATS)})")
    run = as_run(run_dir)
    out_dir = out_dir or os.path.join(run.dir, FIGURES_DIR)
    paths = []
    for name, fig in draw_figures(run, names).items():
        paths.append(save(fig, os.path.join(out_dir, f"{name}.{fmt}"), fmt))
    return paths


def draw_sweep(path, fmt="png", out_dir=None):
    """Draw the across-runs figures of a sweep or results directory (every set of runs
    of one scenario: metrics vs swept parameters, box plots, qdisc comparison, ellipsis)
    into ``PATH/figures/`` (or ``out_dir``) as ``SCENARIO-NAME.FMT``, with the tables
    ``SCENARIO-table.csv`` and ``.md``; returns the paths written. Raises UsageError when
    ``path`` holds no run."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown figure format {fmt!r} (valid: {', '.join(FORMATS)})")
    out_dir = out_dir or os.path.join(str(path), FIGURES_DIR)
    paths = []
    for scn, points in sweep.by_scenario(sweep.load_points(path)).items():
        for name, fig in sweep.draw_all(points).items():
            paths.append(save(fig, os.path.join(out_dir, f"{scn}-{name}.{fmt}"), fmt))
        paths += sweep.write_tables(points, out_dir, stem=f"{scn}-table")
    return paths


def cli_plot(path, fmt="png"):
    """``bufferbloat plot DIR [--format F]``: for a run directory, its figures
    (:func:`draw_run`); for a sweep or results directory, the across-runs figures and
    tables (:func:`draw_sweep`). Prints the paths written; exit code 0 (1 when there was
    no data to draw). Raises UsageError for a path holding no run."""
    if os.path.isfile(os.path.join(str(path), "result.json")) or not os.path.isdir(str(path)):
        paths = draw_run(path, fmt)            # load_run's UsageError for a non-run path
    else:
        paths = draw_sweep(path, fmt)
    for p in paths:
        print(p)
    if not paths:
        print(f"{path}: no series to draw")
        return 1
    return 0


def cli_report(path):
    """``bufferbloat report DIR``: write the HTML report of a run, sweep or results
    tree and print its path; exit code 0. Raises UsageError for any other path."""
    from .report import write_report
    html = write_report(path)
    print(html)
    return 0
