"""Web fetch times (web.csv): every fetch at its start time, failures marked."""

import numpy as np

from bufferbloat.results.metrics import _truthy  # the same reading of "ok" as the metrics

from bufferbloat.results.records import label_groups

from bufferbloat.plots.common import caption, finish_axes, new_figure, series, takes_run
from bufferbloat.plots.palette import flow_color


@takes_run
def draw(run):
    """Total fetch time (s) of every fetch vs its start t (s), one marker series per
    fetch label; failed fetches (ok = 0) as red crosses at their time-out (or at 0 when
    no time was recorded). None without web.csv rows."""
    web = series(run, "web")
    if web is None:
        return None
    ok = _truthy(web["ok"]) if "ok" in web else np.ones(len(web["t"]), bool)
    fig, (ax,) = new_figure(f"Web fetch times ({int(ok.sum())} ok, "
                            f"{int((~ok).sum())} failed)", caption(run))
    for i, (fetch, mask) in enumerate(label_groups(web, "fetch").items()):
        good = mask & ok
        ax.plot(web["t"][good], web["total_s"][good], linestyle="-", marker="o",
                markersize=4, color=flow_color(i), label=f"{fetch} (ok)", gid=f"fetch:{fetch}")
        bad = mask & ~ok
        if bad.any():
            ax.plot(web["t"][bad], np.nan_to_num(web["total_s"][bad]), linestyle="none",
                    marker="x", markersize=8, color="#ff0000", label=f"{fetch} failed",
                    gid=f"failed:{fetch}")
    finish_axes(ax, "fetch start time (s)", "fetch time (s)", "upper left")
    return fig
