"""Departure timing of the bottleneck against an ideal link (series departures.csv,
bufferbloat/measure/departures.py): the CCDF of each backlogged gap's deviation
|gap / ideal - 1| (Mininet-HiFi's figure) per traced leaf, the host kernel's reference
curve beside it, and the health check's reading in the legend."""

import numpy as np

from bufferbloat.measure.departures import HOST_REFERENCE, deviation_ccdf
from bufferbloat.plots.common import caption, legend, new_figure, takes_run


@takes_run
def draw(run):
    """CCDF (log-log) of the backlogged gaps' deviation per traced device; None when
    the run has no departure series."""
    info = run.record.get("departures") or {}
    if not info.get("traced") or not run.has("departures"):
        return None
    d = run.series("departures")
    checks = (run.health or {}).get("checks") or {}
    fig, (ax,) = new_figure("Departures against an ideal link (backlogged gaps)",
                            caption(run))
    drawn = 0
    for dev in info.get("devs") or []:
        rate = (info.get("rates_mbit") or {}).get(dev)
        mask = d["dev"] == dev
        dev_x, ccdf = deviation_ccdf(d["t"][mask], d["len_bytes"][mask],
                                     d["backlogged"][mask], rate)
        if not dev_x.size:
            continue
        check = next((c for k, c in checks.items()
                      if k.startswith(f"departure_timing:{dev}:")), {})
        reading = (f", p99 gap error {check['value']:.2f} ms ({check['limit']}"
                   f"{', not judged' if check.get('ok') is None else ''})"
                   if check.get("value") is not None else "")
        # a deviation of 0 cannot sit on a log axis: shown at the axis' floor
        ax.step(np.maximum(dev_x, 1e-4), ccdf, where="post", linewidth=1.4,
                label=f"{dev} at {rate:g} Mbit/s, {dev_x.size} gaps{reading}")
        drawn += 1
    if not drawn:
        return None
    ref = np.array(HOST_REFERENCE["points"])
    ax.plot(ref[:, 1], ref[:, 0], color="#777777", linestyle="--", marker=".",
            label=f"host kernel, one-MTU burst, {HOST_REFERENCE['rate_mbit']} Mbit/s "
                  "(reference)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(1e-4, None)
    ax.set_xlabel("|gap / ideal gap - 1|  (ideal: the previous packet's time at the rate)")
    ax.set_ylabel("share of gaps above (CCDF)")
    legend(ax, loc="lower left")
    return fig
