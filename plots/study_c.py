"""Study C's own figures (RED vs PI at increasing load, both marking with ECN), as the
study shows them:

* :func:`draw_load` -- four panels against the number of flows, one line per qdisc with
  error bars of one standard deviation over the repetitions: throughput and utilization,
  marks + drops (% of arriving packets), mean queue length (packets) and mean queueing
  delay (ms); PI's reference queue and RED's thresholds drawn where they apply.
* :func:`draw_queue_overlay` -- the instantaneous queue (10 ms samples) of RED and PI at
  the largest load, overlaid, with PI's q_ref and RED's min/max thresholds (in packets
  of the study's 576 B).

Both take the :class:`plots.sweep.Point` list of a c1 sweep (degraded runs are left out
of means and traces as everywhere, :attr:`Point.averaged`).
"""
import numpy as np

from bufferbloat.net.qdiscs import kind_of
from bufferbloat.plots.common import THEORY_GID, finish_axes, hline, legend, new_figure
from bufferbloat.plots.palette import THEORY_COLOR, qdisc_color

#: the study's packet: a 536 B segment with 40 B of TCP/IP headers
PACKET_BYTES = 576

PANELS = (  # (scope, metric, axis label)
    ("link", "utilization", "utilization (0-1)"),
    ("link", "mark_drop_pct", "marks + drops (% of packets)"),
    ("link", "qlen_mean_pkts", "queue, mean (packets)"),
    ("link", "qdelay_mean_ms", "queueing delay, mean (ms)"),
)


def _flows(point):
    try:
        return int(point.run.record.get("knobs", {}).get("flows")
                   or point.overrides.get("flows"))
    except (TypeError, ValueError):
        return None


def _qdisc(point):
    qd = ((point.run.record.get("network") or {}).get("topology") or {}).get("qdisc") or {}
    return qd.get("kind") or point.run.params.get("qdisc") or "?", qd.get("params") or {}


def _value(point, scope, metric):
    vals = [r["value"] for r in point.rows if r.get("scope") == scope
            and r.get("metric") == metric and isinstance(r.get("value"), (int, float))]
    return float(np.mean(vals)) if vals else None


def _by_qdisc(points):
    out = {}
    for p in points:
        if p.averaged and _flows(p) is not None:
            out.setdefault(_qdisc(p)[0], []).append(p)
    return out


def _thresholds(ax, points, in_bytes=False):
    """PI's q_ref and RED's min/max thresholds, in packets (of 576 B) or bytes."""
    seen = set()
    for p in points:
        kind, par = _qdisc(p)
        scale = PACKET_BYTES if in_bytes else 1
        info = kind_of(kind)
        lines = []
        for value, unit, label, gid in (info.thresholds(par) if info is not None else ()):
            if unit == "packets":
                lines.append((value * scale, label, gid))
            else:
                lines.append((value if in_bytes else value / PACKET_BYTES, label, gid))
        for y, label, gid in lines:
            if gid not in seen:
                seen.add(gid)
                hline(ax, y, label, f"{THEORY_GID}:{gid}",
                      qdisc_color(kind) if kind != "?" else THEORY_COLOR, ":")


def draw_load(points):
    """The four load panels (see module doc); None without two loads of any qdisc."""
    groups = _by_qdisc(points)
    if not any(len({_flows(p) for p in pts}) >= 2 for pts in groups.values()):
        return None
    fig, axes = new_figure("RED vs PI against the number of flows (mean +/- 1 std over "
                           "repetitions)", None, nrows=len(PANELS), height=2.6)
    for ax, (scope, metric, label) in zip(axes, PANELS):
        for kind, pts in sorted(groups.items()):
            xs, means, sds = [], [], []
            for n in sorted({_flows(p) for p in pts}):
                vals = [v for v in (_value(p, scope, metric) for p in pts if _flows(p) == n)
                        if v is not None]
                if vals:
                    xs.append(n)
                    means.append(float(np.mean(vals)))
                    sds.append(float(np.std(vals)))
            if xs:
                ax.errorbar(xs, means, yerr=sds, marker="o", capsize=4,
                            color=qdisc_color(kind), label=kind.upper(),
                            gid=f"metric:{metric}:{kind}")
        if metric == "qlen_mean_pkts":
            _thresholds(ax, [p for pts in groups.values() for p in pts])
        if metric == "utilization":
            hline(ax, 1.0, "link rate", THEORY_GID, THEORY_COLOR, "-.")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        legend(ax, loc="upper left")
    axes[-1].set_xlabel("number of flows")
    return fig


def draw_queue_overlay(points, flows=None):
    """Instantaneous queue (packets, 10 ms samples) of each qdisc's first healthy run at
    ``flows`` (default: the largest load), overlaid; None without such runs."""
    groups = _by_qdisc(points)
    if not groups:
        return None
    flows = flows or max(_flows(p) for pts in groups.values() for p in pts)
    fig, (ax,) = new_figure(f"Instantaneous queue at {flows} flows (10 ms samples)", None)
    chosen = []
    for kind, pts in sorted(groups.items()):
        at = sorted((p for p in pts if _flows(p) == flows), key=lambda p: p.rep)
        if not at or not at[0].run.has("qdisc"):
            continue
        run = at[0].run
        q = run.series("qdisc")
        mask = q["kind"] == kind
        if not mask.any():
            continue
        ax.plot(q["t"][mask], q["qlen_pkts"][mask], linewidth=0.8, color=qdisc_color(kind),
                label=f"{kind.upper()} (rep {at[0].rep})", gid=f"queue:{kind}")
        chosen.append(at[0])
    if not chosen:
        return None
    _thresholds(ax, chosen)
    finish_axes(ax, "time (s)", "queue (packets)", "upper right")
    return fig
