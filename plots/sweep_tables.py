"""Across runs: one row per sweep point of a set of :class:`plots.sweep.Point`s, as CSV
and as Markdown (:func:`write_tables`; a study's own table beside them).
"""

import csv
import io

import numpy as np

from bufferbloat.core.uncertainty import mean_interval
from bufferbloat.plots import study_d
from bufferbloat.plots.common import write_csv_md
from bufferbloat.plots.sweep import by_key, by_scenario, samples, setting_label, stats

TABLE_COLUMNS = ("scenario", "setting", "point", "reps", "degraded", "qdisc",
                 "latency_min_ms", "latency_max_ms", "latency_mean_ms", "latency_mean_std_ms",
                 "udp_latency_mean_ms", "udp_latency_mean_std_ms",
                 "throughput_min_mbit", "throughput_max_mbit", "throughput_mean_mbit",
                 "throughput_mean_std_mbit",
                 "download_mean_mbit", "download_mean_std_mbit", "download_flow_min_mbit",
                 "download_flow_max_mbit", "upload_mean_mbit", "upload_mean_std_mbit",
                 "upload_flow_min_mbit", "upload_flow_max_mbit",
                 "qdelay_p50_ms", "qdelay_down_p50_ms", "drop_pct", "utilization",
                 "jain_fairness", "web_total_mean_s",
                 "n", "latency_mean_ci_low_ms", "latency_mean_ci_high_ms",
                 "throughput_mean_ci_low_mbit", "throughput_mean_ci_high_mbit",
                 "qdelay_p50_mean_ms", "qdelay_p50_ci_low_ms", "qdelay_p50_ci_high_ms")
#: the intervals' confidence (Student's t over the point's healthy repetitions)
CONFIDENCE = 0.95


def table_rows(points):
    """One row per sweep point (EXPERIMENTS.md style): latency range (min-max of the ICMP
    ping RTT samples after warm-up, all repetitions) and mean (mean of the runs' mean
    RTT, with its std over repetitions), the UDP (irtt) probe's mean RTT likewise,
    throughput range (min-max of the aggregate 1 s rates) and mean (the runs' aggregate
    throughput metric, with its std), download and upload goodput each (the runs' sum
    over the direction's flows, mean and std; and the range of the per-flow throughputs
    of all repetitions), queueing delay p50 of the bottleneck's AQM and of the reverse
    AQM (B's downloads), drop %, utilization, Jain's index, web fetch time (means over
    repetitions); ``n`` (the healthy repetitions averaged) and the 95 % Student-t
    interval of the mean latency, throughput and queueing delay p50 over them
    (:func:`bufferbloat.core.uncertainty.mean_interval`; empty below 2 runs)."""
    out = []
    for scn, pts in by_scenario(points).items():
        for key, reps in by_key(pts).items():
            samp = [samples(p.run) for p in reps if p.averaged] or [(np.array([]), np.array([]))]
            rtt = np.concatenate([s[0] for s in samp])
            thr = np.concatenate([s[1] for s in samp])
            lat = stats([p.value("rtt_mean_ms") for p in reps])
            udp = stats([p.value("udp_rtt_mean_ms") for p in reps])
            tput = stats([p.value("throughput_mbit") for p in reps])
            row = {"scenario": scn, "setting": setting_label(reps), "point": key,
                   "reps": len(reps),
                   "degraded": sum(p.degraded for p in reps),
                   "qdisc": reps[0].run.qdisc[0],
                   "latency_min_ms": float(rtt.min()) if rtt.size else None,
                   "latency_max_ms": float(rtt.max()) if rtt.size else None,
                   "latency_mean_ms": lat[0], "latency_mean_std_ms": lat[1],
                   "throughput_min_mbit": float(thr.min()) if thr.size else None,
                   "throughput_max_mbit": float(thr.max()) if thr.size else None,
                   "throughput_mean_mbit": tput[0], "throughput_mean_std_mbit": tput[1],
                   "udp_latency_mean_ms": udp[0], "udp_latency_mean_std_ms": udp[1]}
            for way, what in (("down", "download"), ("up", "upload")):
                mean, sd, _ = stats([p.value(f"goodput_{way}_mbit") for p in reps])
                per_flow = [v for p in reps for v in p.flow_values(way)]
                row.update({f"{what}_mean_mbit": mean, f"{what}_mean_std_mbit": sd,
                            f"{what}_flow_min_mbit": min(per_flow) if per_flow else None,
                            f"{what}_flow_max_mbit": max(per_flow) if per_flow else None})
            for col, k in (("qdelay_p50_ms", "qdelay_p50_ms"),
                           ("qdelay_down_p50_ms", "qdelay_down_p50_ms"), ("drop_pct", "drop_pct"),
                           ("utilization", "utilization"), ("jain_fairness", "jain_fairness"),
                           ("web_total_mean_s", "web_total_mean_s")):
                row[col] = stats([p.value(k) for p in reps])[0]
            row.update(_intervals(reps))
            out.append(row)
    return out


def _intervals(reps):
    """``n`` and the mean's interval of the headline columns over the healthy reps."""
    kept = [p for p in reps if p.averaged]
    out = {"n": len(kept)}
    for metric, col, unit in (("rtt_mean_ms", "latency_mean", "ms"),
                              ("throughput_mbit", "throughput_mean", "mbit"),
                              ("qdelay_p50_ms", "qdelay_p50", "ms")):
        ci = mean_interval([p.value(metric) for p in kept], CONFIDENCE)
        out[f"{col}_ci_low_{unit}"], out[f"{col}_ci_high_{unit}"] = ci["ci_low"], ci["ci_high"]
        if col == "qdelay_p50":
            out["qdelay_p50_mean_ms"] = ci["mean"]
    return out


def table_cell(value):
    """A table's cell: empty for None, 4 significant digits for a float."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def table_csv(rows):
    """The table rows as CSV text (empty cell = not available)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(TABLE_COLUMNS)
    for row in rows:
        w.writerow([table_cell(row.get(c)) for c in TABLE_COLUMNS])
    return buf.getvalue()


def table_markdown(rows):
    """The table rows as a Markdown table: latency and throughput as ``min-max (mean ±
    std)``, download and upload as ``mean ± std (per flow min-max)``."""
    head = ["scenario", "setting", "point", "reps", "qdisc",
            "ICMP latency ms: range (mean ± std)", "UDP latency ms: mean ± std",
            "throughput Mbit/s: range (mean ± std)",
            "download Mbit/s: mean ± std (per flow)", "upload Mbit/s: mean ± std (per flow)",
            "qdelay p50 ms (reverse AQM)", "drops %", "utilization", "Jain", "web fetch s",
            "n: 95 % interval of the mean latency ms, throughput Mbit/s"]

    def rng(lo, hi, mean, sd):
        if lo is None and mean is None:
            return ""
        text = f"{table_cell(lo)}-{table_cell(hi)}" if lo is not None else ""
        return f"{text} ({table_cell(mean)} ± {table_cell(sd)})" if mean is not None else text
    def way(r, what):
        mean = r.get(f"{what}_mean_mbit")
        if mean is None:
            return ""
        lo, hi = r.get(f"{what}_flow_min_mbit"), r.get(f"{what}_flow_max_mbit")
        flows = f" ({table_cell(lo)}-{table_cell(hi)})" if lo is not None else ""
        return f"{table_cell(mean)} ± {table_cell(r.get(f'{what}_mean_std_mbit'))}{flows}"

    def pm(mean, sd):
        return "" if mean is None else f"{table_cell(mean)} ± {table_cell(sd)}"
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        reps = str(r["reps"]) + (f" ({r['degraded']} degraded, not averaged)"
                                 if r.get("degraded") else "")
        cells = [r["scenario"], r["setting"], r["point"], reps, r["qdisc"],
                 rng(r["latency_min_ms"], r["latency_max_ms"], r["latency_mean_ms"],
                     r["latency_mean_std_ms"]),
                 pm(r.get("udp_latency_mean_ms"), r.get("udp_latency_mean_std_ms")),
                 rng(r["throughput_min_mbit"], r["throughput_max_mbit"],
                     r["throughput_mean_mbit"], r["throughput_mean_std_mbit"]),
                 way(r, "download"), way(r, "upload"),
                 table_cell(r["qdelay_p50_ms"]) + (f" ({table_cell(r['qdelay_down_p50_ms'])})"
                                             if r.get("qdelay_down_p50_ms") is not None
                                             else ""),
                 table_cell(r["drop_pct"]), table_cell(r["utilization"]),
                 table_cell(r["jain_fairness"]), table_cell(r["web_total_mean_s"]),
                 _ci_cell(r)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _ci_cell(r):
    """``n=5: 512-530 ms; 1.39-1.41 Mbit/s`` (empty below 2 healthy runs)."""
    parts = [f"{table_cell(r[f'{c}_ci_low_{u}'])}-{table_cell(r[f'{c}_ci_high_{u}'])} {unit}"
             for c, u, unit in (("latency_mean", "ms", "ms"),
                                ("throughput_mean", "mbit", "Mbit/s"))
             if r.get(f"{c}_ci_low_{u}") is not None]
    return f"n={r.get('n', 0)}" + (": " + "; ".join(parts) if parts else "")


def write_tables(points, out_dir, stem="table"):
    """Write ``STEM.csv`` and ``STEM.md`` of :func:`table_rows` into ``out_dir`` (and a
    study's own table beside them: D's, ``STEM-study-d``); returns the paths."""
    rows = table_rows(points)
    paths = write_csv_md(out_dir, stem, table_csv(rows), table_markdown(rows))
    scn = points[0].run.record.get("scenario") if points else None
    if isinstance(scn, dict) and scn.get("family") == "D":    # the study's own table
        paths += study_d.write_table(points, out_dir, f"{stem}-study-d")
    return paths
