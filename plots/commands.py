"""The ``plot``, ``report`` and ``cost`` commands' work: each run's figures and each
set's, drawn in parallel (:mod:`.render`), the report page (:mod:`.report`) and the
cost table of a results tree (:mod:`bufferbloat.results.cost`). On top of the package:
nothing in ``plots`` imports this module."""

import os

from bufferbloat.core.errors import UsageError
from bufferbloat.plots import (
    DEFAULT_RUN_FIGURES,
    draw_run,
    render,
    scenario_figures,
    set_targets,
    sweep,
    warn_missing,
)
from bufferbloat.plots.common import FORMATS
from bufferbloat.plots.report import write_report
from bufferbloat.results import cost
from bufferbloat.results.records import find_runs, load_run
from bufferbloat.results.records_layout import RESULT_FILE


def draw_sweep(path, fmt="png", out_dir=None, points=None, progress=None, reuse=False):
    """Draw the across-runs figures of a sweep or results directory (every set of runs
    of one scenario: the study's figures, metrics vs swept parameters, box plots, qdisc
    comparison, ellipsis) as ``SCENARIO-NAME.FMT`` with the tables
    ``SCENARIO-table.csv``/``.md`` and ``SCENARIO-headline.csv``/``.md``, into each
    set's directory's ``figures/`` (:func:`set_dirs`; ``out_dir`` for all of them when
    given); returns the paths written. Raises UsageError when ``path`` holds no run."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown figure format {fmt!r} (valid: {', '.join(FORMATS)})")
    points = sweep.load_points(path) if points is None else points
    sets = [(pts, target, scn, fmt, reuse, True)
            for scn, pts, target in set_targets(path, points, out_dir)]
    paths = []
    for done in render.draw_sets(sets, progress):
        paths += list(done["study"].values()) + list(done["more"].values()) + done["tables"]
    return paths


def draw_runs(runs, fmt="png", all_figures=False, progress=None, reuse=False):
    """Each run's figures into its ``figures/`` (the scenario's own, or every figure the
    data allow with ``all_figures``), in worker processes; returns the paths."""
    jobs = [(run.dir, None if all_figures else
             (scenario_figures(run) or list(DEFAULT_RUN_FIGURES)), fmt, reuse)
            for run in runs]
    done = render.draw_runs(jobs, progress)
    for run, drawn in zip(runs, done):
        warn_missing(run, drawn)
    return [p for drawn in done for p in drawn.values()]


def cli_plot(path, fmt="png", progress=None):
    """``bufferbloat plot DIR [--format F]``: for a run directory, its figures
    (:func:`draw_run`); for a sweep or results directory, each run's figures and the
    across-runs figures and tables of each set (:func:`draw_sweep`, in the set's
    directory); for any other directory holding runs, each run's figures only (nothing
    is written into the directory itself). Prints the paths written; exit code 0 (1
    when there was no data to draw). Raises UsageError for a path holding no run."""
    if fmt not in FORMATS:
        raise UsageError(f"invalid value for --format: {fmt!r} (allowed: "
                         f"{', '.join(FORMATS)})")
    if os.path.isfile(os.path.join(str(path), RESULT_FILE)) or not os.path.isdir(str(path)):
        paths = draw_run(path, fmt)            # load_run's UsageError for a non-run path
    else:
        points = sweep.load_points(path)       # UsageError: no run below
        paths = draw_runs([p.run for p in points], fmt, progress=progress)
        paths += draw_sweep(path, fmt, points=points, progress=progress)
    for p in paths:
        print(p)
    if not paths:
        print(f"{path}: no series to draw")
        return 1
    return 0


def cli_report(path, progress=None):
    """``bufferbloat report DIR``: write the HTML report of a run, sweep or results
    tree (``progress(text)`` as it goes) and print its path; exit code 0. Raises
    UsageError for any other path."""
    html = write_report(path, progress=progress)
    print(html)
    return 0


def cost_groups(path):
    """{set name: [records]} of the runs under ``path``, one set per scenario and
    setting as the report groups them (:func:`sweep.by_scenario`). Raises UsageError
    when ``path`` holds no run."""
    found = find_runs(path) if os.path.isdir(str(path)) else []
    if not found:
        raise UsageError(f"{path}: no run directory (result.json) here or below")
    points = [sweep.Point(load_run(d), {}) for d in found]
    return {name: [p.run.record for p in pts]
            for name, pts in sweep.by_scenario(points).items()}


def cli_cost(path):
    """``bufferbloat cost DIR``: print, per set of runs under DIR, what they cost beyond
    their traffic (:mod:`bufferbloat.results.cost`) as a Markdown table; exit code 0.
    Raises UsageError for a path holding no run."""
    rows, total = cost.table(cost_groups(path))
    print(cost.markdown(rows, total), end="")
    return 0
