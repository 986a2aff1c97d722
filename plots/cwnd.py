"""Congestion window of every TCP flow vs time (tcp.csv: one line per flow label)."""

from bufferbloat.plots.common import caption, finish_axes, new_figure, series, takes_run
from bufferbloat.plots.palette import flow_color
from bufferbloat.results.records import label_groups


@takes_run
def draw(run):
    """cwnd (packets) of each flow in tcp.csv vs t (s); None without tcp samples. One
    line per flow label, labelled ``FLOW (CCA)``."""
    tcp = series(run, "tcp")
    if tcp is None or "cwnd_pkts" not in tcp:
        return None
    fig, (ax,) = new_figure("Congestion window per flow", caption(run))
    for i, (flow, mask) in enumerate(label_groups(tcp, "flow").items()):
        cca = tcp["cca"][mask][0] if "cca" in tcp and mask.any() else ""
        ax.plot(tcp["t"][mask], tcp["cwnd_pkts"][mask], color=flow_color(i), linewidth=1,
                label=f"{flow} ({cca})" if cca else flow, gid=f"flow:{flow}")
    finish_axes(ax, "time (s)", "cwnd (packets)", "upper left")
    return fig
