"""Latency and the applications' own view: per probe of ping.csv and irtt.csv (RTT,
one-way delays, loss), per stream of udp.csv (RFC 3550 jitter, loss, one-way delay,
throughput), and the web fetches of web.csv (fetch time, failures).

Part of :func:`bufferbloat.results.metrics.compute_metrics`; the definitions (warm-up cut,
percentiles, units) are :mod:`bufferbloat.results.metrics`'.
"""

import math

import numpy as np

from bufferbloat.core.stats import loss_figures
from bufferbloat.results.records import label_groups
from bufferbloat.results.rows import Rows, finite_values


def rfc3550_jitter(t_sent, t_recv):
    """RFC 3550 (section 6.4.1) interarrival jitter after the last packet, in the unit of
    the inputs. Packets are taken in arrival order; for each consecutive pair
    D = (R_j - R_i) - (S_j - S_i) and J += (|D| - J) / 16, from J = 0. Raises ValueError
    for no packets or mismatched lengths; 0 for one packet."""
    s = np.asarray(t_sent, dtype=float).ravel()
    r = np.asarray(t_recv, dtype=float).ravel()
    if s.size != r.size:
        raise ValueError(f"{s.size} send times but {r.size} receive times")
    keep = ~(np.isnan(s) | np.isnan(r))
    s, r = s[keep], r[keep]
    if s.size == 0:
        raise ValueError("jitter of no packets")
    order = np.argsort(r, kind="stable")
    transit = r[order] - s[order]
    jitter = 0.0
    for d in np.abs(np.diff(transit)):
        jitter += (d - jitter) / 16.0
    return float(jitter)


def ping_metrics(run, cutoff_s=-math.inf):
    """Per probe of ping.csv: ``rtt_{mean,p50,p95,p99,max}_ms`` and ``loss_pct`` (rows with
    an empty rtt_ms / all rows)."""
    rows = Rows()
    if not run.has("ping"):
        return rows
    p = run.series("ping")
    for probe, mask in label_groups(p, "probe").items():
        keep = mask & (p["t"] >= cutoff_s)
        rtt = p["rtt_ms"][keep]
        if rtt.size == 0:
            continue
        rows.stats("ping", probe, "rtt", "ms", rtt, maximum=True)
        rows.add("ping", probe, "loss_pct", 100.0 * np.isnan(rtt).sum() / rtt.size, "%")
    return rows


def irtt_metrics(run, cutoff_s=-math.inf):
    """Per probe label of irtt.csv (probes sent at or after the cut):
    ``rtt_{mean,p50,p95,p99,max}_ms``, ``owd_up_{mean,p50,p95}_ms`` and
    ``owd_down_{...}_ms`` (one-way delays client -> server and back) over the answered
    probes; ``loss_pct`` (probes not answered / sent), ``loss_up_pct`` (requests lost /
    sent) and ``loss_down_pct`` (replies lost / requests known to have arrived: sent -
    lost up - lost in no known direction)."""
    rows = Rows()
    if not run.has("irtt"):
        return rows
    s = run.series("irtt")
    lost = s.get("lost")
    for probe, mask in label_groups(s, "probe").items():
        keep = mask & (s["t"] >= cutoff_s)
        if not keep.any():
            continue
        rows.stats("irtt", probe, "rtt", "ms", s["rtt_ms"][keep], maximum=True)
        for way in ("up", "down"):
            rows.stats("irtt", probe, f"owd_{way}", "ms", s[f"owd_{way}_ms"][keep],
                       pcts=(50, 95))
        marks = ([""] * int(keep.sum()) if lost is None
                 else ["" if x in ("", "nan") else x for x in lost[keep].astype(str)])
        figures = loss_figures(marks)
        for key in ("loss_pct", "loss_up_pct", "loss_down_pct"):
            rows.add("irtt", probe, key, figures[key], "%")
    return rows


def _udp_sent(run, stream):
    """Packets sent on ``stream``, if its summary in the record's ``traffic_results``
    says (the sender's own count)."""
    for item in run.traffic_results:
        if item.get("stream") == stream:
            sent = item.get("sent")
            if isinstance(sent, (int, float)) and not isinstance(sent, bool):
                return int(sent)
    return None


def udp_metrics(run, cutoff_s=-math.inf):
    """Per stream of udp.csv (one row per received packet; packets sent at or after the
    cut): ``throughput_mbit`` (bytes after the first arrival x 8 / arrival span),
    ``jitter_ms`` (RFC 3550), ``loss_pct`` (1 - distinct seqs received / expected;
    expected = the stream's ``sent`` in ``traffic_results`` without warm-up, else
    max seq - min seq + 1), ``owd_{mean,p50,p95,p99,max}_ms`` (t_recv - t_sent)."""
    rows = Rows()
    if not run.has("udp"):
        return rows
    u = run.series("udp")
    for stream, mask in label_groups(u, "stream").items():
        keep = mask & (u["t_sent"] >= cutoff_s)
        if not keep.any():
            continue
        ts, tr = u["t_sent"][keep], u["t_recv"][keep]
        order = np.argsort(tr, kind="stable")
        span = tr[order][-1] - tr[order][0]
        size = u["size_bytes"][keep][order]
        if span > 0:
            rows.add("udp", stream, "throughput_mbit", np.nansum(size[1:]) * 8 / span / 1e6,
                     "Mbit/s")
        rows.add("udp", stream, "jitter_ms", rfc3550_jitter(ts, tr) * 1e3, "ms")
        seqs = np.unique(finite_values(u["seq"][keep]))
        sent = _udp_sent(run, stream) if cutoff_s == -math.inf else None
        expected = sent if sent else (seqs[-1] - seqs[0] + 1 if seqs.size else 0)
        if expected:
            rows.add("udp", stream, "loss_pct",
                     100.0 * max(0.0, 1 - seqs.size / expected), "%")
        rows.stats("udp", stream, "owd", "ms", (tr - ts) * 1e3, maximum=True)
    return rows


def _truthy(values):
    """Booleans of an ``ok`` column: numbers (non-zero, not NaN) or words (1/true/yes)."""
    if values.dtype.kind == "f":
        return np.nan_to_num(values) != 0
    return np.isin(np.char.lower(values.astype(str)), ["1", "true", "yes", "ok"])


def web_fetches(run, cutoff_s=-math.inf):
    """The fetches of web.csv started at or after the cut, as a dict of arrays (``t``,
    ``total_s``, ``fetch``) and boolean masks: ``ok``, ``cut`` (still running when the run
    ended, so ended by it: neither a success nor a failure) and ``failed`` (the others);
    plus ``warmup`` (how many fetches the cut left out). None without web.csv rows.

    A fetch is cut when web.csv says so (its ``cut`` column), else, for runs recorded
    before that column, when it is one of the last ``incomplete`` failed fetches without
    an HTTP code of its fetcher (the count the record's traffic_results keeps)."""
    if not run.has("web"):
        return None
    w = run.series("web")
    t = np.asarray(w.get("t", []), dtype=float)
    if t.size == 0:
        return None
    names = w.get("fetch", np.array([""] * t.size)).astype(str)
    ok = _truthy(w["ok"]) if "ok" in w else np.ones(t.size, dtype=bool)
    if "cut" in w:
        cut = _truthy(w["cut"]) & ~ok
    else:
        cut = np.zeros(t.size, dtype=bool)
        code = w.get("http_code")
        no_code = (np.ones(t.size, dtype=bool) if code is None else
                   np.array([str(x) in ("", "nan") for x in code.tolist()], dtype=bool))
        for item in run.traffic_results:
            n = item.get("incomplete") if isinstance(item, dict) else None
            if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
                continue
            mine = np.nonzero((names == str(item.get("fetch"))) & ~ok & no_code)[0]
            mine = mine[np.argsort(t[mine], kind="stable")]
            cut[mine[-n:]] = True
    keep = t >= cutoff_s
    return {"t": t[keep], "total_s": np.asarray(w["total_s"], dtype=float)[keep],
            "fetch": names[keep], "ok": ok[keep], "cut": cut[keep],
            "failed": ~ok[keep] & ~cut[keep], "warmup": int((~keep).sum())}


def web_metrics(run, cutoff_s=-math.inf):
    """Rows over every fetch of web.csv started at or after the cut (name ``all``):
    ``fetches`` (all of them), ``failures`` (ok == 0 and not cut), ``cut`` (still
    running when the run ended: :func:`web_fetches`), and
    ``total_{mean,std,p50,p95,p99}_s`` of the successful ones."""
    rows = Rows()
    f = web_fetches(run, cutoff_s)
    if f is None:
        return rows
    rows.add("web", "all", "fetches", f["t"].size, "")
    rows.add("web", "all", "failures", f["failed"].sum(), "")
    rows.add("web", "all", "cut", f["cut"].sum(), "")
    rows.stats("web", "all", "total", "s", f["total_s"][f["ok"]], std=True)
    return rows
