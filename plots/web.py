"""Web fetch times (web.csv): every fetch at its start time, the warm-up's greyed, failed
and cut fetches marked; the title counts what the metrics count."""

import numpy as np

from bufferbloat.plots.common import caption, finish_axes, new_figure, takes_run
from bufferbloat.plots.palette import flow_color
from bufferbloat.results import headline
from bufferbloat.results.metrics import traffic_start_s
from bufferbloat.results.metrics_latency import web_fetches


def warmup_cut_s(run):
    """The time (s since t0) before which the metrics leave samples out: the traffic's
    start plus the record's warm-up (:func:`bufferbloat.results.metrics.compute_metrics`'s
    cut)."""
    return traffic_start_s(run) + run.warmup_s


def fetch_title(fetches, warmup_s):
    """``Web fetch times after the 5 s warm-up:`` and, on a second line, ``3 ok, 1.2 ±
    0.3 s; 0 failed, 1 cut by the run's end (2 in the warm-up, not counted)``: the counts and the mean ± std of the
    successful fetches that the metrics (web:all:*) report."""
    ok, times = int(fetches["ok"].sum()), fetches["total_s"][fetches["ok"]]
    head = (f"Web fetch times after the {warmup_s:.3g} s warm-up" if warmup_s
            else "Web fetch times")
    mean = (f", {headline.fmt(float(np.mean(times)))} ± "
            f"{headline.fmt(float(np.std(times)), 's')}" if times.size else "")
    text = (f"{head}:\n{ok} ok{mean}; {int(fetches['failed'].sum())} failed, "
            f"{int(fetches['cut'].sum())} cut by the run's end")
    if fetches["warmup"]:
        text += f" ({fetches['warmup']} in the warm-up, not counted)"
    return text


@takes_run
def draw(run):
    """Total fetch time (s) of every fetch vs its start t (s), one marker series per
    fetch label (gid ``fetch:LABEL``: the successful fetches after the warm-up, those the
    metrics count); failed fetches as red crosses (``failed:LABEL``), fetches cut by the
    run's end as open triangles (``cut:LABEL``), both at the time they ran; the warm-up's
    fetches grey (``warmup``). None without web.csv rows."""
    every = web_fetches(run)
    if every is None:
        return None
    cut_s = warmup_cut_s(run)
    counted = web_fetches(run, cut_s)
    fig, (ax,) = new_figure(fetch_title(counted, run.warmup_s), caption(run))
    early = every["t"] < cut_s
    if early.any():
        ax.plot(every["t"][early], np.nan_to_num(every["total_s"][early]), linestyle="none",
                marker="o", markersize=4, color="0.7", gid="warmup",
                label=f"in the warm-up ({int(early.sum())}, not counted)")
    if run.warmup_s:
        ax.axvspan(traffic_start_s(run), cut_s, color="#eeeeee", zorder=0)
    total = np.nan_to_num(counted["total_s"])
    for i, fetch in enumerate(dict.fromkeys(counted["fetch"].tolist())):
        mask = counted["fetch"] == fetch
        for kind, style in (("ok", dict(linestyle="-", marker="o", markersize=4,
                                         color=flow_color(i))),
                            ("failed", dict(linestyle="none", marker="x", markersize=8,
                                            color="#ff0000")),
                            ("cut", dict(linestyle="none", marker="^", markersize=8,
                                         markerfacecolor="none", color="darkorange"))):
            sel = mask & counted[kind]
            if sel.any() or kind == "ok":
                label = {"ok": f"{fetch} ({int(sel.sum())} ok)",
                         "failed": f"{fetch} failed ({int(sel.sum())})",
                         "cut": f"{fetch} cut by the run's end ({int(sel.sum())})"}[kind]
                ax.plot(counted["t"][sel], total[sel], label=label,
                        gid=f"{'fetch' if kind == 'ok' else kind}:{fetch}", **style)
    finish_axes(ax, "fetch start time (s)", "fetch time (s)", "upper left")
    return fig
