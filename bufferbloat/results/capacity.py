"""A varying link's record: ``series/capacity.csv`` from the replay loop's counters
(``link-trace.csv``, :mod:`bufferbloat.measure.linkloop`), its metrics and the health
check of the replay.

Window ``k`` (10 ms) runs from the loop's read ``k`` to its read ``k+1``:
``capacity_bytes`` is what the trace allowed in it (its rate x 10 ms),
``delivered_bytes`` what the HTB class sent between the two reads, ``backlogged`` 1 when
the leaf held a queue at both reads. A window without both reads (a missed tick) is
left out. The utilisation compares delivered bytes with the capacity of the time
actually between the reads (a late read makes a longer window, not a faster link).
"""

import csv
import json
import os

from bufferbloat.core.stats import percentile
from bufferbloat.results.records import bottleneck_dev_name

CAPACITY_CSV = "capacity.csv"
#: windows of 100 ms: what the acceptance bands of docs/guide/varying-links.md judge
AGG_WINDOWS = 10


def read_loop_rows(path):
    """The loop's rows: dicts of floats/ints, in window order."""
    with open(path, newline="") as f:
        rows = []
        for r in csv.DictReader(f):
            rows.append({"t": float(r["t_s"]), "k": int(r["window"]),
                         "rate": int(r["rate_bps"]), "sent": int(r["sent_bytes"]),
                         "backlog": int(r["backlog_bytes"]), "drops": int(r["drops"])})
    return rows


def windows(rows, period_s=0.01):
    """Per window with both reads: dicts with ``t_s``, ``capacity_bytes`` (nominal),
    ``offered_bytes`` (at the rate over the time between the reads),
    ``delivered_bytes``, ``backlogged`` and ``burst_growth`` (how much a saved burst
    grew with the rate's last change)."""
    out = []
    prev = None
    for a, b in zip(rows, rows[1:]):
        # HTB keeps its tokens as time: a burst saved at the rate before goes out at
        # this window's, (this rate / that rate) x its bytes
        growth = max(1.0, a["rate"] / prev) if prev else 1.0
        prev = a["rate"]
        if b["k"] != a["k"] + 1:
            continue
        out.append({"t_s": round(a["k"] * period_s, 6), "burst_growth": growth,
                    "capacity_bytes": a["rate"] * period_s / 8,
                    "offered_bytes": a["rate"] * (b["t"] - a["t"]) / 8,
                    "delivered_bytes": b["sent"] - a["sent"],
                    "backlogged": int(a["backlog"] > 0 and b["backlog"] > 0)})
    return out


def write_capacity_csv(wins, path):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_s", "capacity_bytes", "delivered_bytes", "backlogged"])
        for x in wins:
            w.writerow([f"{x['t_s']:.2f}", f"{x['capacity_bytes']:.1f}",
                        x["delivered_bytes"], x["backlogged"]])
    return path


def ratios(wins, agg=AGG_WINDOWS):
    """delivered / offered of every run of ``agg`` consecutive, backlogged windows
    (aligned on multiples of ``agg``)."""
    groups = {}
    for x in wins:
        groups.setdefault(round(x["t_s"] * 100) // agg, []).append(x)
    out = []
    for g in sorted(groups):
        xs = groups[g]
        if len(xs) == agg and all(x["backlogged"] for x in xs):
            offered = sum(x["offered_bytes"] for x in xs)
            if offered > 0:
                out.append(sum(x["delivered_bytes"] for x in xs) / offered)
    return out


def metrics(wins, burst_bytes=1600, loop_stats=None, agg=AGG_WINDOWS):
    """Utilisation of the offered capacity over backlogged windows, the 100 ms ratios'
    percentiles, the queue's drain time percentiles, and the replay's health."""
    back = [x for x in wins if x["backlogged"]]
    offered = sum(x["offered_bytes"] for x in back)
    rs = ratios(wins, agg)
    dev = [abs(r - 1) for r in rs]
    over = [x for x in wins if x["delivered_bytes"] > x["offered_bytes"]
            + burst_bytes * x.get("burst_growth", 1.0) + 1514]
    st = loop_stats or {}
    ticks = (st.get("ticks") or 0) + (st.get("missed_ticks") or 0)
    missed_pct = 100.0 * (st.get("missed_ticks") or 0) / ticks if ticks else None
    return {
        "windows": len(wins), "backlogged_windows": len(back),
        "utilisation": round(sum(x["delivered_bytes"] for x in back) / offered, 4)
        if offered else None,
        "ratio_windows": len(rs),
        "ratio_p5": _pct(rs, 5), "ratio_p50": _pct(rs, 50), "ratio_p95": _pct(rs, 95),
        "ratio_dev_p95": _pct(dev, 95),
        "over_capacity_windows": len(over),
        "missed_ticks": st.get("missed_ticks"), "missed_ticks_pct":
            None if missed_pct is None else round(missed_pct, 3),
        "change_errors": st.get("change_errors"),
    }


def drain_delay_ms(rows):
    """Per read, the time the backlog takes to drain at the rate then set, ms: the
    queue's delay as a varying link makes it (percentiles of it in the metrics)."""
    return [r["backlog"] * 8 / r["rate"] * 1e3 for r in rows if r["rate"] > 0]


def health(m, max_missed_pct=1.0):
    """Problems of the replay, as sentences (empty: healthy)."""
    out = []
    if m.get("missed_ticks_pct") is not None and m["missed_ticks_pct"] > max_missed_pct:
        out.append(f"the capacity loop missed {m['missed_ticks_pct']:.2f} % of its ticks "
                   f"(over {max_missed_pct:g} %): the link changed late")
    if m.get("over_capacity_windows"):
        out.append(f"{m['over_capacity_windows']} windows delivered more than their "
                   "capacity plus one burst")
    if m.get("change_errors"):
        out.append(f"{m['change_errors']} rate changes failed")
    return out


def _pct(xs, q):
    return round(percentile(sorted(xs), q), 4) if xs else None


def record(series_dir, burst_bytes=1600, name="link-trace", out=CAPACITY_CSV):
    """Write ``out`` (``capacity.csv``) and return the metrics of a run's replay (None
    without one); ``name``: the loop's files (``link-trace-up`` for the reverse
    direction, written to ``capacity-up.csv``)."""
    path = os.path.join(series_dir, f"{name}.csv")
    if not os.path.exists(path):
        return None
    rows = read_loop_rows(path)
    wins = windows(rows)
    write_capacity_csv(wins, os.path.join(series_dir, out))
    try:
        with open(os.path.join(series_dir, f"{name}.json")) as f:
            st = json.load(f)
    except (OSError, ValueError):
        st = None
    m = metrics(wins, burst_bytes, st)
    delays = sorted(drain_delay_ms(rows))
    m.update({f"drain_delay_p{q}_ms": _pct(delays, q) for q in (50, 95, 99)})
    m["health"] = health(m)
    return m


#: the health check's bands (docs/guide/varying-links.md)
MIN_UTILISATION = 0.95
MAX_MISSED_PCT = 1.0
#: checks of a constant link that a varying one makes meaningless (an ideal link at one
#: rate): not judged, the replay's own check judges the link instead
CONSTANT_LINK_CHECKS = ("work_conservation:", "departure_timing:")


#: record key -> (its health check, the direction's words): each direction that varies
REPLAY_CHECKS = {"link_trace": ("link_replay", "the varying bottleneck"),
                 "link_trace_up": ("link_replay_up", "the varying reverse link")}


def _on_device(name, dev):
    """Whether check ``name`` (``kind:DEV:...``) is about device ``dev``."""
    parts = name.split(":")
    return len(parts) > 1 and parts[1] == dev


def health_checks(record, checks):
    """A varying link's health checks (``link_replay``; ``link_replay_up`` for the
    reverse direction's ``link_trace_up``), and the constant-link checks in ``checks``
    of the devices whose rate varied marked not judged (in place): the bottleneck's
    egress (``record['bottleneck_dev']``) for ``link_trace``, the other devices for
    ``link_trace_up``. {} for constant links."""
    out = {}
    bdev = bottleneck_dev_name(record)
    for key, (check, words) in REPLAY_CHECKS.items():
        lt = record.get(key)
        if not isinstance(lt, dict):
            continue
        for name, c in checks.items():
            if not name.startswith(CONSTANT_LINK_CHECKS) or c.get("ok") is None:
                continue
            if bdev and _on_device(name, bdev) != (key == "link_trace"):
                continue
            c.update(ok=None, not_judged=f"the link's rate varied ({key}): the "
                     f"replay's own check ({check}) judges it")
        out[check] = _replay_check(lt.get("metrics") or {}, words)
    return out


def _replay_check(m, words):
    util, missed = m.get("utilisation"), m.get("missed_ticks_pct")
    ok = None
    if util is not None and missed is not None:
        ok = (util >= MIN_UTILISATION and missed <= MAX_MISSED_PCT
              and not m.get("over_capacity_windows") and not m.get("change_errors"))
    # what failed, named: a verdict line that says only "0.9856 (required >= 0.95, ...)"
    # leaves the reader to guess it was the replay's missed ticks
    failed = [text for bad, text in (
        (util is not None and util < MIN_UTILISATION, f"utilisation {util}"),
        (missed is not None and missed > MAX_MISSED_PCT, f"missed ticks {missed} %"),
        (bool(m.get("over_capacity_windows")),
         f"{m.get('over_capacity_windows')} window(s) above capacity plus one burst"),
        (bool(m.get("change_errors")), f"{m.get('change_errors')} rate change error(s)"))
        if bad]
    what = (f"{words} delivered this share of its offered capacity while "
            "backlogged" + (f" (failed: {'; '.join(failed)})" if failed else ""))
    return {"value": util, "limit": f">= {MIN_UTILISATION:g}, missed ticks <= "
            f"{MAX_MISSED_PCT:g} %, never above capacity plus one burst", "ok": ok,
            "missed_ticks_pct": missed, "over_capacity_windows": m.get("over_capacity_windows"),
            "change_errors": m.get("change_errors"), "what": what}
