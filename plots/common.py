"""Shared helpers of the figure modules: loading, captions, saving, series plumbing.

Figures are built as :class:`matplotlib.figure.Figure` objects with the Agg canvas,
never through pyplot's global state, so drawing is thread-safe and leaves nothing open.
Every figure gets a title, axis labels with units, legends, and a caption with the run's
key parameters (:func:`caption`).
"""

import functools
import io
import math
import os

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from bufferbloat.core.atomic import write_text_atomic  # noqa: E402
from bufferbloat.plots.palette import TARGET_COLOR  # noqa: E402
from bufferbloat.results import metrics as _metrics  # noqa: E402
from bufferbloat.results import metrics_queue as _metrics_queue  # noqa: E402
from bufferbloat.results import theory  # noqa: E402
from bufferbloat.results.records import Run, load_run  # noqa: E402

FORMATS = ("png", "svg", "pdf")
#: gid of reference (theory) lines, so tests and readers can tell them from data.
THEORY_GID = "theory"
TARGET_GID = "target"
LINK_GID = "link-rate"


# ----------------------------------------------------------------------- run plumbing

def as_run(run):
    """``run`` as a :class:`Run` (a Run, or a run directory to load)."""
    return run if isinstance(run, Run) else load_run(run)


def takes_run(fn):
    """Decorator: the function's first argument may be a Run or a run directory."""
    @functools.wraps(fn)
    def wrapper(run, *args, **kwargs):
        return fn(as_run(run), *args, **kwargs)
    return wrapper


def series(run, name):
    """Series ``name`` of ``run`` or None when the run has none (or it has no rows)."""
    if not run.has(name):
        return None
    data = run.series(name)
    if not data or not any(len(v) for v in data.values()):
        return None
    return data


def leaf_name(run, dev, handle, kind, several=False):
    """A leaf's label: ``dev:kind``; with ``several`` directions' leaves in one figure,
    followed by the way its packets go (``s0-eth2:pie (h1 -> h2)``)."""
    name = ":".join(p for p in (dev, kind) if p) or handle
    if not several:
        return name
    topo = ((run.record.get("network") or {}).get("topology") or {})
    near, far = (topo.get("senders") or ["senders"])[0], topo.get("receiver") or "receiver"
    way = (near, far) if _metrics_queue.link_direction(run.record, dev) == "up" else (far, near)
    return f"{name} ({way[0]} -> {way[1]})"


def counter_increments(t, counter):
    """(t_end, delta) per sample interval of a cumulative counter (NaNs skipped, a
    counter that goes backwards counts as reset: its new value is the delta)."""
    t = np.asarray(t, dtype=float)
    v = np.asarray(counter, dtype=float)
    ok = ~(np.isnan(t) | np.isnan(v))
    t, v = t[ok], v[ok]
    if t.size < 2:
        return np.array([]), np.array([])
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    dv = np.diff(v)
    dv = np.where(dv < 0, v[1:], dv)
    return t[1:], dv


def full_queue_rtt_ms(run, rate_mbit=None):
    """FIFO theory: the RTT of a probe behind a full buffer, ms, or None
    (:func:`bufferbloat.results.theory.run_full_queue_rtt_ms`: one definition)."""
    return theory.run_full_queue_rtt_ms(run, rate_mbit)


# one definition of a run's metric rows and of reading one: bufferbloat.results.metrics'
run_metrics = _metrics.run_rows
metric_value = _metrics.metric_value
metric_values = _metrics.metric_values


# ----------------------------------------------------------------------- captions

def _num(value):
    return f"{value:g}" if isinstance(value, (int, float)) else str(value)


def buffer_text(run):
    """The bottleneck buffer: ``100 pkts`` or ``50000 B``."""
    p = run.params
    kind, qparams = run.qdisc
    pkts = p.get("buffer_pkts", qparams.get("limit_pkts"))
    nbytes = p.get("buffer_bytes", qparams.get("limit_bytes"))
    if isinstance(pkts, (int, float)):
        return f"{_num(pkts)} pkts"
    if isinstance(nbytes, (int, float)):
        return f"{_num(nbytes)} B"
    return "?"


def qdisc_text(run):
    """``pie (target 20 ms)`` / ``fifo``."""
    kind, _ = run.qdisc
    target = run.aqm_target_ms
    return f"{kind} (target {target:g} ms)" if target is not None else (kind or "?")


def caption(run):
    """The key parameters of a run in one line: qdisc, rate, base RTT, buffer, CCA,
    where it ran."""
    p = run.params
    rate = run.bottleneck_mbit
    base = run.base_rtt_ms
    machine = run.machine
    where = "VM" if machine.get("in_project_vm") else "host"
    kernel = machine.get("kernel")
    parts = [run.label,
             f"qdisc {qdisc_text(run)}",
             f"rate {_num(rate)} Mbit/s" if rate else "rate ?",
             f"base RTT {_num(base)} ms" if base is not None else "base RTT ?",
             f"buffer {buffer_text(run)}",
             f"CCA {p.get('cca', '?')}",
             f"{where} {kernel}" if kernel else where]
    return " | ".join(parts)


# ----------------------------------------------------------------------- figures

def new_figure(title, cap=None, nrows=1, ncols=1, height=4.0, width=8.0, sharex=True):
    """A Figure (Agg canvas) with ``nrows`` x ``ncols`` axes, a title and a caption
    line at the bottom. Returns (fig, axes) where axes is a flat list."""
    total_h = height * nrows
    fig = Figure(figsize=(width, total_h))
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, sharex=sharex, squeeze=False).ravel().tolist()
    fig.suptitle(title)
    if cap:
        fig.text(0.01, 0.005, cap, fontsize=7, ha="left", va="bottom", color="#444444",
                 wrap=True)
    # margins in inches (x label + caption below, title above), whatever the height
    fig.subplots_adjust(bottom=0.8 / total_h, top=1 - 0.55 / total_h, hspace=0.35)
    for ax in axes:
        ax.grid(True, alpha=0.3)
    return fig, axes


def hline(ax, y, label, gid, color, style="--"):
    """A labelled horizontal reference line (theory, target, link rate)."""
    line = ax.axhline(y, color=color, linestyle=style, linewidth=1.2, label=label)
    line.set_gid(gid)
    return line


def targets_crossed_line(ax, run):
    """The latency theory of an AQM run: the base RTT plus the target of every AQM queue
    the round trip crosses (:func:`bufferbloat.results.theory.targets_plus_base_ms`);
    nothing where there is none."""
    crossed = theory.targets_plus_base_ms(run)
    if crossed is not None:
        hline(ax, crossed, f"base RTT + the targets crossed ({crossed:g} ms)", TARGET_GID,
              TARGET_COLOR)


def legend(ax, **kw):
    """A legend when the axes has labelled artists."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(fontsize=8, loc=kw.pop("loc", "best"), **kw)


def legend_beside(fig, axes, last=()):
    """One legend for the whole figure, right of its panels: every label of ``axes``
    once (the labels in ``last``, e.g. the references, at its end), the panels narrowed
    to leave it room; None when nothing is labelled. For figures with more lines than
    a legend inside a panel can hold without hiding them."""
    seen = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    if not seen:
        return None
    order = [x for x in seen if x not in last] + [x for x in seen if x in last]
    box = fig.legend([seen[x] for x in order], order, loc="center right", fontsize=7)
    # ~0.06 inch a character at 7 points, and the marker's room
    room = 0.6 + 0.06 * max(len(x) for x in order)
    fig.subplots_adjust(right=max(0.5, 1 - room / fig.get_figwidth()))
    return box


def finish_axes(ax, xlabel, ylabel, loc="best"):
    """Label one panel, start its y axis at 0 and give it its legend."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    legend(ax, loc=loc)


def stacked_axes(axes, ylabels, xlabel="time (s)"):
    """Label stacked panels (a y label each, the x label on the last), start every y
    axis at 0 and give each its legend."""
    for ax, label in zip(axes, ylabels):
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        legend(ax, loc="upper left")
    axes[-1].set_xlabel(xlabel)


def xy_from_zero(ax, xlabel, ylabel, loc="best"):
    """Label a scatter-like plane whose axes both start at 0, and give it its legend."""
    ax.set_xlim(left=0)
    finish_axes(ax, xlabel, ylabel, loc)


def write_csv_md(out_dir, stem, csv_text, md_text):
    """``STEM.csv`` and ``STEM.md`` with these texts in ``out_dir`` (made if missing),
    each written whole (:mod:`bufferbloat.core.atomic`); returns the two paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for ext, text in (("csv", csv_text), ("md", md_text)):
        path = os.path.join(out_dir, f"{stem}.{ext}")
        write_text_atomic(path, text)
        paths.append(path)
    return paths


def include_in_ylim(ax, *values):
    """Extend the y range so reference values stay visible."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return
    lo, hi = ax.get_ylim()
    lo, hi = min([lo] + vals), max([hi] + vals)
    pad = 0.05 * (hi - lo or 1.0)
    ax.set_ylim(min(lo, 0) if lo >= 0 else lo - pad, hi + pad)


def save(fig, path, fmt=None):
    """Write ``fig`` to ``path`` (format from ``fmt`` or the extension), whole
    (:mod:`bufferbloat.core.atomic`); returns path."""
    fmt = fmt or os.path.splitext(path)[1].lstrip(".") or "png"
    if fmt not in FORMATS:
        raise ValueError(f"unknown figure format {fmt!r} (valid: {', '.join(FORMATS)})")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=100)
    write_text_atomic(path, buf.getvalue())
    return path


# ----------------------------------------------------------------------- binning

def bin_edges(t_min, t_max, width=1.0):
    """Edges of bins of ``width`` seconds covering [t_min, t_max]."""
    n = max(1, int(math.ceil((t_max - t_min) / width)))
    return t_min + width * np.arange(n + 1)


def spread_over_bins(t_start, t_end, amounts, edges):
    """Sum of ``amounts`` per bin, each amount spread uniformly over its interval
    [t_start, t_end] (e.g. iperf3's interval bytes onto a common 1 s grid)."""
    out = np.zeros(len(edges) - 1)
    for a, b, x in zip(np.asarray(t_start, float), np.asarray(t_end, float),
                       np.asarray(amounts, float)):
        if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(x)) or b <= a:
            continue
        overlap = np.clip(np.minimum(edges[1:], b) - np.maximum(edges[:-1], a), 0, None)
        out += x * overlap / (b - a)
    return out


def mean_per_bin(t, values, edges):
    """Mean of ``values`` whose time ``t`` falls in each bin (NaN for an empty bin)."""
    t = np.asarray(t, float)
    v = np.asarray(values, float)
    ok = np.isfinite(t) & np.isfinite(v)
    idx = np.digitize(t[ok], edges) - 1
    out = np.full(len(edges) - 1, np.nan)
    for i in range(len(out)):
        sel = v[ok][idx == i]
        if sel.size:
            out[i] = sel.mean()
    return out


def leaf_groups(run):
    """{(dev, handle, kind): mask} of the AQM leaf qdiscs (metrics_queue.leaf_groups), {} for a
    run without qdisc samples."""
    if series(run, "qdisc") is None:
        return {}
    return _metrics_queue.leaf_groups(run)


def run_label(run):
    """A short name of a run: scenario, then its overrides (``a1_fifo buffer_pkts=20``)."""
    scn = run.record.get("scenario")
    name = scn.get("name") if isinstance(scn, dict) else (scn or os.path.basename(run.dir))
    over = run.record.get("overrides") or {}
    extra = " ".join(f"{k}={v}" for k, v in sorted(over.items()))
    return f"{name} {extra}".strip()
