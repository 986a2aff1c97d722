"""What runs cost beyond their traffic, from their own records (docs/design/cost.md).

Every run records its traffic time (``duration_s``), its wall time from the start of its
set-up to its last write (``wall_s``) and where that time went (``phases_s``: build,
idle_rtt, prepare, sampler_start, connect, traffic, grace, stop, collect, metrics,
health, teardown, ...). :func:`table` sums a set's runs that ended ``ok``: their point
wall time against their traffic (the overhead ratio the benches print), the median
time a run spent beyond its traffic and the phases that took the most of it. Every ok
attempt counts (a degraded run that was run again cost its time too). The runs that did
not end ok (failed, interrupted: their traffic was cut short, so no ratio) are counted
apart with the wall time they took; a run without a wall time is never guessed.
"""
import math
import statistics

#: the phases a set's row names, the costliest first (by their median over its runs)
PHASES_SHOWN = 3
#: phases that are not overhead: the traffic itself
NOT_OVERHEAD = ("traffic",)


def _number(value):
    """A finite number >= 0, or None."""
    if isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) and out >= 0 else None


def run_cost(record):
    """(traffic s, wall s, {phase: s}) of one run's record, or None when the run did
    not end ``ok`` or its record lacks a duration or a wall time."""
    if record.get("status") != "ok":
        return None
    traffic, wall = _number(record.get("duration_s")), _number(record.get("wall_s"))
    if traffic is None or wall is None or traffic <= 0:
        return None
    phases = record.get("phases_s")
    phases = {k: v for k, v in ((k, _number(v)) for k, v in phases.items())
              if v is not None} if isinstance(phases, dict) else {}
    return traffic, wall, phases


def row(name, records):
    """One set's cost: {name, runs, counted (ok, with a duration and a wall time),
    not_ok (runs that did not end ok: failed, interrupted, or still running),
    statuses ({status: (runs, their wall s)} of those), not_ok_wall_s (their wall time),
    healthy, degraded, traffic_s, wall_s, ratio, over_median_s, over_range_s, phases:
    [(phase, median s)] over the counted runs that recorded their phases}."""
    costs = [c for c in map(run_cost, records) if c is not None]
    verdicts = [(r.get("health") or {}).get("verdict") for r in records]
    not_ok = [r for r in records if r.get("status") != "ok"]
    statuses = {}
    for r in not_ok:
        status = str(r.get("status"))
        count, wall = statuses.get(status, (0, 0.0))
        statuses[status] = (count + 1, wall + (_number(r.get("wall_s")) or 0.0))
    out = {"name": name, "runs": len(records), "counted": len(costs),
           "not_ok": len(not_ok), "statuses": statuses,
           "not_ok_wall_s": sum(w for w in (_number(r.get("wall_s")) for r in not_ok)
                                if w is not None),
           "healthy": verdicts.count("healthy"), "degraded": verdicts.count("degraded"),
           "traffic_s": sum(c[0] for c in costs), "wall_s": sum(c[1] for c in costs),
           "ratio": None, "over_median_s": None, "over_range_s": None, "phases": []}
    if not costs:
        return out
    out["ratio"] = out["wall_s"] / out["traffic_s"]
    over = [c[1] - c[0] for c in costs]
    out["over_median_s"] = statistics.median(over)
    out["over_range_s"] = (min(over), max(over))
    timed = [c[2] for c in costs if c[2]]
    names = {k for phases in timed for k in phases} - set(NOT_OVERHEAD)
    medians = {k: statistics.median([phases.get(k, 0.0) for phases in timed])
               for k in names}
    out["phases"] = sorted(medians.items(), key=lambda kv: (-kv[1], kv[0]))[:PHASES_SHOWN]
    return out


def table(groups):
    """The rows of ``groups`` ({set name: [records]}, in order) and their total
    (named ``all sets``; its phases over every counted run)."""
    rows = [row(name, recs) for name, recs in groups.items()]
    every = [r for recs in groups.values() for r in recs]
    return rows, row("all sets", every)


def _runs_cell(r):
    text = str(r["runs"])
    notes = []
    untimed = r["runs"] - r["not_ok"] - r["counted"]
    for status, (count, wall) in sorted(r["statuses"].items()):
        # a run still going has no wall time yet
        notes.append(f"{count} {status}" + ("" if status == "running" else f", {wall:,.0f} s"))
    if untimed:
        notes.append(f"{untimed} without a wall time")
    return text + (f" ({'; '.join(notes)})" if notes else "")


def fmt_row(r):
    """The table's cells of one row (strings)."""
    if r["ratio"] is None:
        return [r["name"], _runs_cell(r), f"{r['healthy']}", f"{r['degraded']}",
                "-", "-", "-", "-", "no ok run with a recorded wall time"]
    lo, hi = r["over_range_s"]
    return [r["name"], _runs_cell(r), f"{r['healthy']}", f"{r['degraded']}",
            f"{r['traffic_s']:,.0f} s", f"{r['wall_s']:,.0f} s", f"{r['ratio']:.2f}",
            f"{r['over_median_s']:.1f} s ({lo:.1f}-{hi:.1f})",
            ", ".join(f"{k} {v:.1f} s" for k, v in r["phases"]) or "not recorded"]


HEADER = ["set", "runs", "healthy", "degraded", "traffic (sum over ok runs)",
          "point wall (sum)", "ratio (wall / traffic)",
          "beyond the traffic, a run: median (range)", "costliest phases (median a run)"]


def markdown(rows, total):
    """The table as Markdown (rows, then the total)."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in rows + ([total] if len(rows) > 1 else []):
        lines.append("| " + " | ".join(fmt_row(r)) + " |")
    return "\n".join(lines) + "\n"
