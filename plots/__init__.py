"""Figures drawn from stored run results only (one module per figure kind).

Every figure is built from a run directory through :func:`bufferbloat.results.records.load_run`
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
departures  CCDF of the bottleneck's departure gaps vs ideal   :mod:`.departures`
=========== ================================================== ===================

Across runs: :mod:`.sweep` (a set of runs as points), :mod:`.sweep_figures` (metric vs
swept parameter, box plots, qdisc comparisons), :mod:`.sweep_tables` (CSV/Markdown
tables); warnings against theory: :func:`.flags.flags`; one HTML page:
:func:`.report.write_report`. Colours: :mod:`.palette`. Figures as files, in parallel:
:mod:`.render`; the ``plot`` and ``report`` commands: :mod:`.commands`.

Within the package, imports point one way: this ``__init__`` (the figure registry) and
the figure modules < :mod:`.render` < :mod:`.report` < :mod:`.commands`.
"""

import json
import os

from bufferbloat.core.errors import UsageError, warn
from bufferbloat.plots import (
    capacity,
    cwnd,
    departures,
    drops,
    ecdf,
    ellipsis,
    flowseries,
    operating,
    queue,
    rtt,
    sweep,
    throughput,
    totals,
    udp,
    web,
)
from bufferbloat.plots.common import FORMATS, as_run, save
from bufferbloat.plots.flags import flags
from bufferbloat.results.records_layout import RESULT_FILE
from bufferbloat.run.index import INDEX_FILE

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
    "departures": departures.draw,
    "capacity": capacity.draw,
}
FIGURES_DIR = "figures"
#: figures of each run of a sweep when its scenario names none
DEFAULT_RUN_FIGURES = ("cwnd", "rtt", "queue")

__all__ = ["FIGURES", "FORMATS", "draw_figures", "draw_run", "flags", "scenario_figures"]


def scenario_figures(run):
    """The figure names the run's scenario asks for (its ``figures`` field), known ones
    only, in its order."""
    wanted = run.scenario.get("figures")
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


def warn_missing(run, drawn):
    """Say (a warning each) the series ``run``'s record lists that are not on disk, and
    the figures its scenario asks for that were not drawn (``drawn``: the names that
    were) for lack of their series."""
    run.missing_series(say=True)
    lacking = [n for n in scenario_figures(run) if n not in drawn]
    if lacking:
        warn(f"{run.dir}: figure(s) not drawn for lack of their series: "
             f"{', '.join(lacking)} (series on disk: "
             f"{', '.join(n for n in run.series_names() if run.has(n)) or 'none'})")


def draw_run(run_dir, fmt="png", names=None, out_dir=None):
    """Redraw a run's figures from its stored results into ``RUN_DIR/figures/`` (or
    ``out_dir``) as ``NAME.FMT``; returns the paths written. Nothing is rerun."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown figure format {fmt!r} (valid: {', '.join(FORMATS)})")
    run = as_run(run_dir)
    out_dir = out_dir or os.path.join(run.dir, FIGURES_DIR)
    paths = []
    figs = draw_figures(run, names)
    warn_missing(run, figs)
    for name, fig in figs.items():
        paths.append(save(fig, os.path.join(out_dir, f"{name}.{fmt}"), fmt))
    return paths


def tree_kind(path):
    """``run`` (a run directory), ``sweep`` (an index.json with ``vary``), ``results``
    (another index.json: run-all's tree) or ``runs`` (a directory holding runs)."""
    path = str(path)
    if os.path.isfile(os.path.join(path, RESULT_FILE)):
        return "run"
    index = os.path.join(path, INDEX_FILE)
    if os.path.isfile(index):
        try:
            with open(index) as f:
                return "sweep" if "vary" in json.load(f) else "results"
        except ValueError:
            return "results"
    return "runs"


def set_dirs(path, points):
    """{set name: directory of its across-run figures}: ``PATH`` itself for a sweep
    directory; in a results tree the directory holding all of the set's runs (run-all
    puts a scenario's points under ``OUT/SCENARIO/sweep``). None for a plain directory
    of runs: its figures are drawn per run only."""
    kind = tree_kind(path)
    if kind not in ("sweep", "results"):
        return {}
    out = {}
    for name, pts in sweep.by_scenario(points).items():
        if kind == "sweep":
            out[name] = str(path)
            continue
        common = os.path.commonpath([os.path.abspath(p.run.dir) for p in pts])
        if len(pts) == 1 or os.path.isfile(os.path.join(common, RESULT_FILE)):
            common = os.path.dirname(common)
        out[name] = common
    return out


def set_targets(path, points, fallback=None):
    """[(set name, points, figures directory)] of the sets under ``path``: each set's
    directory's ``figures/`` (:func:`set_dirs`), or ``fallback`` for every set when
    given (where sets have no directory of their own: a plain directory of runs)."""
    dirs = set_dirs(path, points)
    out = []
    for scn, pts in sweep.by_scenario(points).items():
        if fallback:
            out.append((scn, pts, fallback))
        elif scn in dirs:
            out.append((scn, pts, os.path.join(dirs[scn], FIGURES_DIR)))
    return out
