"""Per-flow time series of studies D and E: the transport's RTT next to the application's
one-way delay (NetPerfMeter's messages), and in-flight, srtt and throughput per flow."""


from bufferbloat.plots.common import caption, new_figure, series, stacked_axes, takes_run
from bufferbloat.plots.palette import flow_color
from bufferbloat.plots.throughput import flow_rates
from bufferbloat.results.records import label_groups


@takes_run
def draw_owd(run):
    """Top: each flow's srtt (ms, tcp.csv) and each ping probe's RTT; bottom: the one-way
    delay (ms) of every message of each NetPerfMeter flow (npm_msg.csv) at its send
    time. None without npm_msg.csv."""
    msg = series(run, "npm_msg")
    if msg is None:
        return None
    tcp, ping = series(run, "tcp"), series(run, "ping")
    fig, (ax_r, ax_o) = new_figure("RTT and one-way delay per flow", caption(run), nrows=2,
                                   height=6.0)
    flows = list(label_groups(msg, "flow"))
    colors = {f: flow_color(i) for i, f in enumerate(flows)}
    if tcp is not None and "srtt_us" in tcp:
        for flow, mask in label_groups(tcp, "flow").items():
            ax_r.plot(tcp["t"][mask], tcp["srtt_us"][mask] / 1e3, linewidth=1,
                      color=colors.get(flow, "0.4"), label=f"{flow} srtt", gid=f"srtt:{flow}")
    if ping is not None:
        for probe, mask in label_groups(ping, "probe").items():
            ax_r.plot(ping["t"][mask], ping["rtt_ms"][mask], ".", markersize=2, color="0.3",
                      label=f"{probe} ping", gid=f"probe:{probe}")
    for flow, mask in label_groups(msg, "flow").items():
        ax_o.plot(msg["t_sent"][mask], (msg["t_recv"][mask] - msg["t_sent"][mask]) * 1e3,
                  ".", markersize=2, color=colors[flow], label=f"{flow} one-way",
                  gid=f"owd:{flow}")
    stacked_axes((ax_r, ax_o), ("RTT (ms)", "one-way delay (ms)"))
    return fig


@takes_run
def draw_flows(run):
    """Three panels per flow of tcp.csv against time: packets in flight, srtt (ms), and
    goodput (Mbit/s, bytes_acked over 1 s bins: :func:`plots.throughput.flow_rates`).
    None without in-flight samples."""
    tcp = series(run, "tcp")
    if tcp is None or "in_flight_pkts" not in tcp:
        return None
    fig, (ax_i, ax_r, ax_t) = new_figure("In flight, srtt and goodput per flow",
                                         caption(run), nrows=3, height=7.5)
    goodput = {f: r for f, r in flow_rates(run).items() if r[2] == "goodput"}
    for i, (flow, mask) in enumerate(label_groups(tcp, "flow").items()):
        t, color = tcp["t"][mask], flow_color(i)
        ax_i.plot(t, tcp["in_flight_pkts"][mask], linewidth=1, color=color, label=flow,
                  gid=f"inflight:{flow}")
        ax_r.plot(t, tcp["srtt_us"][mask] / 1e3, linewidth=1, color=color, label=flow,
                  gid=f"srtt:{flow}")
        if flow in goodput:
            centres, mbit, _ = goodput[flow]
            ax_t.step(centres + 0.5, mbit, where="pre", color=color, label=flow,
                      gid=f"flow:{flow}")
    stacked_axes((ax_i, ax_r, ax_t), ("in flight (packets)", "srtt (ms)",
                                       "goodput (Mbit/s)"))
    return fig
