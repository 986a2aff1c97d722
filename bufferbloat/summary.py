"""The end of ``bufferbloat run`` and ``sweep``: a short summary, the figures, the report.

:func:`finish` draws the run's figures into ``RUN_DIR/figures/`` and writes
``RUN_DIR/report.html`` (both from the stored results, :mod:`plots`), then returns the
summary's lines: where the run is, its status, the health verdict, the scenario's
headline metrics (:mod:`bufferbloat.results.headline`) with theory and the study's expected
shape, the flags raised (:func:`plots.flags.flags`), the paths of the figures and of the
report, and the command that prints the full metrics table (``bufferbloat show``).
"""

import os

from bufferbloat.net import scaling
from bufferbloat.results import headline
from bufferbloat.results.health import headline as health_line
from bufferbloat.results.metrics import run_rows
from bufferbloat.results.records import load_run
from bufferbloat.scenarios import catalogue

#: at most this many figure paths are printed one per line
MAX_FIGURE_LINES = 6


def render(run_dir, fmt="png", report=True):
    """Draw the run's figures (``RUN_DIR/figures/NAME.FMT``) and, with ``report``, write
    its report page; returns (figure paths, report path or None)."""
    from bufferbloat.plots.render import run_figures
    paths = list(run_figures(run_dir, None, fmt).values())
    page = None
    if report:
        from bufferbloat.plots.report import write_report
        page = write_report(run_dir)
    return paths, page


def _family(rec):
    """The study family of a run record ('A'..'E'), or None."""
    scn = rec.get("scenario")
    return scn.get("family") if isinstance(scn, dict) else None


def lines(run, rows=None, figures=(), report=None):
    """The summary of ``run`` (a Run) as terminal lines (see the module doc)."""
    from bufferbloat.plots.common import run_label
    from bufferbloat.plots.flags import flags
    rows = run_rows(run) if rows is None else rows
    rec = run.record
    out = [f"result: {run.dir}",
           f"{run_label(run)}: {rec.get('status')}, {rec.get('profile', '?')} profile, "
           f"{rec.get('duration_s', '?')} s" + (f" ({rec['error']})" if rec.get("error")
                                                 else "")]
    out.append(health_line(rec.get("health")))
    out += scaling.evidence_lines(rec.get("scaling"), _family(rec))
    items = headline.values(run, rows, catalogue=catalogue())
    if items:
        out.append("headline (value, theory for this setting, the study's expected shape):")
        out += headline.lines(items)
    raised = flags(run, rows)
    out.append(f"flags ({len(raised)}):" if raised else "flags: none (nothing contradicts "
                                                      "theory beyond its tolerance)")
    out += [f"  - {f}" for f in raised]
    if figures:
        shown = list(figures)[:MAX_FIGURE_LINES]
        out.append(f"figures ({len(figures)}):")
        out += [f"  {p}" for p in shown]
        if len(figures) > len(shown):
            out.append(f"  ... and {len(figures) - len(shown)} more in "
                       f"{os.path.dirname(shown[0])}/")
    if report:
        out.append(f"report: {report}")
    out.append(f"full metrics table: bufferbloat show {run.dir}")
    return out


def finish_sweep(sweep_dir, progress=None):
    """The end of ``bufferbloat sweep``: its report (``SWEEP/report.html``), which draws
    each run's figures (``RUN/figures/``) and the sweep's (``SWEEP/figures/``: the
    study's first); returns the lines naming them."""
    import glob

    from bufferbloat.plots.report import write_report
    page = write_report(sweep_dir, progress=progress)
    fig_dir = os.path.join(sweep_dir, "figures")
    files = sorted(glob.glob(os.path.join(fig_dir, "*.png")))
    from bufferbloat.plots import study
    from bufferbloat.plots.sweep import load_points
    names = study.declared(load_points(sweep_dir))
    first = [f for n in names for f in files
             if os.path.basename(f).endswith(f"-{study.file_name(n)}.png")]
    out = [f"figures of the sweep ({len(files)}, the study's first): {fig_dir}/"]
    out += [f"  {p}" for p in (first + [f for f in files if f not in first])
            [:MAX_FIGURE_LINES]]
    if len(files) > MAX_FIGURE_LINES:
        out.append(f"  ... and {len(files) - MAX_FIGURE_LINES} more")
    out.append("figures of each run: RUN/figures/ (bufferbloat show RUN: its metrics)")
    out.append(f"report: {page}")
    return out


def finish(run_dir, fmt="png", draw=True):
    """Render the run's figures and report (unless ``draw`` is false) and return its
    summary lines (:func:`lines`)."""
    run = load_run(run_dir)
    figures, page = render(run_dir, fmt) if draw else ((), None)
    return lines(run, figures=figures, report=page)
