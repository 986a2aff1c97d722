"""A run as a flent data file: ``bufferbloat export --flent RUN_DIR [-o FILE]``.

Writes what flent 2.1 (Debian bookworm) loads with ``flent -i FILE`` and plots with its
own plots (``ping_cdf``, ``totals``, ``all_scaled``, ``box_totals``, ``tcp_cwnd``,
``backlog``, ...): gzipped JSON, file format 4 (flent's ``resultset.py``):

* ``metadata``: ``NAME`` (a test flent ships, chosen by the run's TCP flows:
  ``rrul_be_nflows`` with flows both ways, as B's RRUL-like load (4 + 4 best-effort
  flows, ICMP and UDP probes: flent's ``rrul_be`` family; its ``rrul`` marks three of
  the four flows each way CS1/CS5/EF, ours carry no marking), ``tcp_nup`` / ``tcp_ndown``
  with flows one way, ``ping`` without any), ``TITLE``, ``HOST`` (the far host's
  address), ``HOSTS``, ``LOCAL_HOST`` (the near host), ``LENGTH`` (the run's duration),
  ``TOTAL_LENGTH`` (the span exported), ``STEP_SIZE``, ``TIME`` (the run's start) and
  ``T0`` (time 0 of the x axis: the traffic's start) in UTC ending with ``Z``,
  ``TEST_PARAMETERS`` (``upload_streams``, ``download_streams``, ``qdisc_stats_hosts``,
  ``qdisc_stats_interfaces``: what the test definitions read), ``DELAY`` 0 (flent's
  tests start their load ``DELAY`` s after their probes and cut that much off both
  ends of a CDF; here load and probes start together), ``SERIES_META``, ``NOTE``, and
  ``BUFFERBLOAT`` (the run: directory, scenario, run key, qdisc, health);
* ``x_values``: 0, STEP_SIZE, ... seconds from T0;
* ``results``: one list per series, a value (or null) per x: each TCP flow's goodput
  (Mbit/s) over the step ending at x, from the receiver's ``bytes_acked`` (tcp.csv) as
  the project's own metrics count it, or from iperf3's intervals for a flow the
  sampler did not see; each probe's RTT (ms) interpolated at x; each AQM's
  ``qdisc_stats_HOST::backlog_bytes`` etc.; flent computes its sums and averages
  (``TCP download sum``, ``Ping (ms) avg``) itself when it loads the file;
* ``raw_values``: every measurement with its absolute time ``t``: the TCP series' ``val``
  at each step and, at each socket sample, ``tcp_cwnd`` (packets), ``tcp_rtt`` and
  ``tcp_rtt_var`` (ms), ``tcp_delivery_rate`` and ``tcp_pacing_rate`` (Mbit/s), as
  flent's ``ss`` runner records them (its ``tcp_cwnd``/``tcp_rtt`` plots read these);
  every ICMP reply (``val``, ``seq``; stamped at receipt, as ping -D prints it); every
  UDP probe as flent's irtt runner records it (``val``, ``owd_up``, ``owd_down`` at
  receipt; a lost one with ``lost``, ``lost_dir`` at its send time); every queue sample
  of each AQM leaf as flent's ``tc`` runner does (``backlog_bytes``, ``backlog_pkts``,
  ``sent_bytes``, ``sent_pkts``, ``overlimits``, ``requeues``, ``dropped`` and
  ``ecn_mark`` per sample interval, ``delay`` in ms and ``prob`` where the AQM reports
  them).

UDP floods and streams, web fetches and the idle probe are not exported (no flent test
has a place for them).
"""

import datetime
import gzip
import json
import math
import os
import re

import numpy as np

from bufferbloat.core.atomic import write_text_atomic
from bufferbloat.core.errors import UsageError
from bufferbloat.results.flowmetrics import NOT_LEAF_KINDS
from bufferbloat.results.metrics import traffic_start_s
from bufferbloat.results.metrics_flows import flow_directions
from bufferbloat.results.metrics_queue import leaf_groups as _leaf_groups
from bufferbloat.results.records import label_groups as _groups
from bufferbloat.results.records import load_run

FORMAT_VERSION = 4
#: flent's default step (its ``-s``), s
STEP_S = 0.2
SUFFIX = ".flent.gz"
#: per test: (upload series, download series, ICMP ping, UDP ping)
NAMES = {
    "rrul_be_nflows": ("TCP upload BE::{i}", "TCP download BE::{i}", "Ping (ms) ICMP",
                       "Ping (ms) UDP BE"),
    "tcp_nup": ("TCP upload::{i}", None, "Ping (ms) ICMP", "Ping (ms) UDP BE"),
    "tcp_ndown": (None, "TCP download::{i}", "Ping (ms) ICMP", "Ping (ms) UDP BE"),
    "ping": (None, None, "Ping (ms) ICMP", "Ping (ms) UDP"),
}


def default_path(run_dir):
    """Where ``export --flent`` writes without ``-o``: ``RUN_DIR/run.flent.gz``."""
    return os.path.join(str(run_dir), "run" + SUFFIX)


def export_flent(run_dir, out=None, step_s=STEP_S):
    """Write the flent data file of the run in ``run_dir`` to ``out`` (default
    :func:`default_path`); returns its path. UsageError for a directory that is not a
    run, a run without TCP flows or probes, or an output name flent would not read as
    gzip (it must end with ``.gz``)."""
    out = default_path(run_dir) if out is None else os.fspath(out)
    if not out.endswith(".gz"):
        raise UsageError(f"-o {out!r}: a flent data file is gzipped JSON; give a name "
                         f"ending with {SUFFIX}")
    if not os.path.isdir(os.path.dirname(os.path.abspath(out))):
        raise UsageError(f"-o {out!r}: no such directory")
    if os.path.isdir(out):
        raise UsageError(f"-o {out!r}: a directory; give a file name ending with {SUFFIX}")
    run = load_run(run_dir)
    run.missing_series(say=True)      # exported without them: said, not silent
    data = flent_data(run, step_s, os.path.basename(out))
    text = json.dumps(data, indent=1, sort_keys=True, allow_nan=False)
    # written whole: a failed write leaves no temporary file and no half of one
    write_text_atomic(out, gzip.compress(text.encode("utf-8"), mtime=0))
    return out


# ----------------------------------------------------------------------------- helpers

def _utc(ts):
    """Unix time -> flent's UTC stamp, ``%Y-%m-%dT%H:%M:%S.%fZ``."""
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ")


def _num(v):
    """A float for JSON, None for NaN/None."""
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def _natural(label):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", label)]


def _tcp_flows(run):
    """{label: (direction, source)} of the run's TCP flows (metrics_flows.flow_directions):
    source 'acked' for tcp.csv's, 'iperf' for those only iperf.csv has."""
    sampled = set(_groups(run.series("tcp"), "flow")) if run.has("tcp") else set()
    return {label: (way, "acked" if label in sampled else "iperf")
            for label, way in flow_directions(run).items()}


def _test_name(flows):
    ways = {d for d, _ in flows.values()}
    if ways == {"up", "down"}:
        return "rrul_be_nflows"
    if ways == {"up"}:
        return "tcp_nup"
    if ways == {"down"}:
        return "tcp_ndown"
    return "ping"


def _rates_at(x_abs, t, counter):
    """Mbit/s of a cumulative byte counter over each step ending at x_abs[i] (None for
    the first x, which ends no step). Before the flow's first sample and after its last
    one it delivered nothing: 0 (so that the sum over flows at each x is what the
    receivers got, as the project's per-direction goodput counts it)."""
    ok = ~(np.isnan(t) | np.isnan(counter))
    t, v = t[ok], counter[ok]
    out = [None] * len(x_abs)
    if t.size < 2:
        return out
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    at = np.interp(x_abs, t, v)     # held at the ends: no bytes outside the samples
    for i in range(1, len(x_abs)):
        out[i] = max(0.0, at[i] - at[i - 1]) * 8 / (x_abs[i] - x_abs[i - 1]) / 1e6
    return out


def _interp_at(x_abs, t, v, max_gap_s):
    """Values interpolated at x_abs between the samples around each x when they are at
    most ``max_gap_s`` apart (a gap of lost probes gives None)."""
    ok = ~(np.isnan(t) | np.isnan(v))
    t, v = t[ok], v[ok]
    out = [None] * len(x_abs)
    if t.size == 0:
        return out
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    for i, x in enumerate(x_abs):
        j = int(np.searchsorted(t, x))
        if j < t.size and abs(t[j] - x) < 1e-9:
            out[i] = float(v[j])
        elif 0 < j < t.size and t[j] - t[j - 1] <= max_gap_s:
            out[i] = float(v[j - 1] + (v[j] - v[j - 1]) * (x - t[j - 1]) / (t[j] - t[j - 1]))
    return out


# ----------------------------------------------------------------------------- series

class _Export:
    """The file's content, built series by series."""

    def __init__(self, run, step_s):
        self.run, self.step = run, float(step_s)
        rec = run.record
        self.origin = traffic_start_s(run)                 # run time of x = 0
        t0_wall = rec.get("t0_realtime")                   # wall time of run time 0
        if not isinstance(t0_wall, (int, float)) or isinstance(t0_wall, bool):
            raise UsageError(f"{run.dir}: no wall clock recorded (t0_realtime): flent "
                             "needs the run's start time")
        self.t0_wall = float(t0_wall)
        ends = []
        for name, col in (("tcp", "t"), ("iperf", "t_end"), ("ping", "t"), ("irtt", "t")):
            if run.has(name):
                vals = run.series(name).get(col)
                if vals is not None and np.isfinite(vals).any():
                    ends.append(float(np.nanmax(vals)))
        if not ends:
            raise UsageError(f"{run.dir}: no TCP flow and no probe to export to flent")
        n = int(math.floor((max(ends) - self.origin) / self.step + 1e-9))
        self.x = [round(i * self.step, 6) for i in range(max(n, 1) + 1)]
        self.x_run = np.array(self.x) + self.origin        # run times of the x values
        self.results, self.raw, self.meta = {}, {}, {}

    def wall(self, run_t):
        """Run time -> absolute (unix) time."""
        return self.t0_wall + run_t

    def add(self, name, values, raw, meta):
        self.results[name] = values
        self.raw[name] = raw
        self.meta[name] = meta

    # -- TCP
    def tcp_flow(self, name, label, source):
        run = self.run
        raw = []
        if source == "acked":
            tcp = run.series("tcp")
            mask = tcp["flow"] == label
            t = tcp["t"][mask]
            values = _rates_at(self.x_run, t, tcp["bytes_acked"][mask])
            cols = {"tcp_cwnd": ("cwnd_pkts", 1.0), "tcp_rtt": ("srtt_us", 1e-3),
                    "tcp_rtt_var": ("rttvar_us", 1e-3),
                    "tcp_delivery_rate": ("delivery_rate_bps", 1e-6),
                    "tcp_pacing_rate": ("pacing_rate_bps", 1e-6)}
            # each column masked once (indexing it per sample was quadratic: minutes
            # for a report of the full profile)
            have = {key: (tcp[col][mask], scale) for key, (col, scale) in cols.items()
                    if col in tcp}
            for k in np.argsort(t, kind="stable"):
                entry = {"t": self.wall(float(t[k]))}
                for key, (vals, scale) in have.items():
                    v = _num(vals[k])
                    if v is not None:
                        entry[key] = v * scale
                if len(entry) > 1:
                    raw.append(entry)
        else:
            ip = run.series("iperf")
            mask = ip["flow"] == label
            t0s, t1s, bps = ip["t_start"][mask], ip["t_end"][mask], ip["bits_per_second"][mask]
            values = [None] + [0.0] * (len(self.x) - 1)   # outside its intervals: 0
            for i, x in enumerate(self.x_run[1:], 1):
                hit = np.nonzero((t0s < x - 1e-9) & (x <= t1s + 1e-9))[0]
                if hit.size:
                    values[i] = _num(bps[hit[0]] / 1e6)
        for x, v in zip(self.x_run, values):
            if v is not None:
                raw.append({"t": self.wall(float(x)), "val": v})
        raw.sort(key=lambda e: e["t"])
        self.add(name, values, raw, {"UNITS": "Mbits/s", "BUFFERBLOAT_FLOW": label,
                                     "BUFFERBLOAT_SOURCE": "bytes_acked (tcp.csv)"
                                     if source == "acked" else "iperf3 intervals"})

    # -- probes
    def icmp(self, name, label, interval_s):
        p = self.run.series("ping")
        mask = p["probe"] == label
        t_recv = p["t"][mask] + p["rtt_ms"][mask] / 1e3      # ping -D stamps on receipt
        rtt, seq = p["rtt_ms"][mask], p["seq"][mask]
        values = _interp_at(self.x_run, t_recv, rtt, 3 * interval_s)
        raw = [{"t": self.wall(float(tr)), "val": float(r), "seq": int(s)}
               for tr, r, s in sorted(zip(t_recv, rtt, seq)) if np.isfinite(r)]
        self.add(name, values, raw, {"UNITS": "ms", "BUFFERBLOAT_PROBE": label})

    def udp(self, name, label, interval_s):
        s = self.run.series("irtt")
        mask = s["probe"] == label
        t, rtt = s["t"][mask], s["rtt_ms"][mask]
        lost = s["lost"][mask].astype(str)
        t_recv = t + rtt / 1e3
        values = _interp_at(self.x_run, t_recv, rtt, 3 * interval_s)
        raw = []
        seq, up, down = s["seq"][mask], s["owd_up_ms"][mask], s["owd_down_ms"][mask]
        for k in range(t.size):
            if lost[k] in ("", "nan"):
                raw.append({"t": self.wall(float(t_recv[k])), "val": float(rtt[k]),
                            "seq": int(seq[k]), "owd_up": _num(up[k]),
                            "owd_down": _num(down[k])})
            else:
                raw.append({"t": self.wall(float(t[k])), "seq": int(seq[k]),
                            "lost": True, "lost_dir": "true" if lost[k] == "unknown"
                            else lost[k]})
        raw.sort(key=lambda e: e["t"])
        sent = int(t.size)
        received = int(sum(1 for x in lost if x in ("", "nan")))
        self.add(name, values, raw, {
            "UNITS": "ms", "BUFFERBLOAT_PROBE": label, "PACKETS_SENT": sent,
            "PACKETS_RECEIVED": received,
            "PACKET_LOSS_RATE": (sent - received) / sent if sent else None})

    # -- queues
    def qdisc(self, host, dev):
        q = self.run.series("qdisc")
        kinds = q["kind"]
        mask = (q["dev"] == dev) & ~np.isin(kinds, list(NOT_LEAF_KINDS))
        t = q["t"][mask]
        order = np.argsort(t, kind="stable")
        cache = {}

        def col(c):
            """Column ``c`` of this leaf in time order (NaN when absent), made once."""
            if c not in cache:
                cache[c] = q[c][mask][order] if c in q else np.full(mask.sum(), np.nan)
            return cache[c]
        t = t[order]
        raw, last = [], {}
        keys = {"backlog_bytes": "backlog_bytes", "backlog_pkts": "qlen_pkts",
                "sent_bytes": "sent_bytes", "sent_pkts": "sent_pkts",
                "overlimits": "overlimits", "requeues": "requeues", "prob": "prob"}
        for k in range(t.size):
            entry = {"t": self.wall(float(t[k]))}
            for key, c in keys.items():
                v = _num(col(c)[k])
                if v is not None:
                    entry[key] = v
            delay = _num(col("delay_us")[k])
            if delay is not None:
                entry["delay"] = delay / 1e3
            for key, c in (("dropped", "drops"), ("ecn_mark", "marks")):
                v = _num(col(c)[k])
                if v is not None:   # per sample interval, as flent's tc runner keeps it
                    entry[key] = max(0.0, v - last[key]) if key in last else 0.0
                    last[key] = v
            raw.append(entry)
        name = f"qdisc_stats_{host}"
        self.raw[name] = raw
        self.meta[name] = {"UNITS": "misc", "BUFFERBLOAT_DEV": dev}
        gap = 5 * float(np.median(np.diff(t))) if t.size > 1 else 0.0
        for key, c, scale in (("backlog_bytes", "backlog_bytes", 1.0),
                              ("backlog_pkts", "qlen_pkts", 1.0),
                              ("delay", "delay_us", 1e-3)):
            vals = col(c)
            if np.isfinite(vals).any():
                self.results[f"{name}::{key}"] = [
                    None if v is None else v * scale
                    for v in _interp_at(self.x_run, t, vals, gap)]
        for key, c in (("dropped", "drops"), ("ecn_mark", "marks")):
            vals = col(c)
            if np.isfinite(vals).any():
                at = _interp_at(self.x_run, t, vals, gap)
                self.results[f"{name}::{key}"] = [None] + [
                    None if a is None or b is None else max(0.0, b - a)
                    for a, b in zip(at, at[1:])]


def _aqm_devices(run):
    """[(host, dev)] of the AQM leaves in qdisc.csv: the bottleneck's egress first (a
    switch port: host s0), then the others (the reverse AQM, in the receiver)."""
    if not run.has("qdisc"):
        return []
    devs = dict.fromkeys(dev for dev, _, _ in _leaf_groups(run) if dev)
    return [(d.split("-")[0], d) for d in devs]


def _probe_interval(run, label, default):
    for spec in run.record.get("traffic") or []:
        if isinstance(spec, dict) and spec.get("name") == label:
            return float(spec.get("interval_s") or default)
    return default


def _far_host_address(run, far):
    """The far host's IPv4 address from the sampled sockets (the source of one it sends
    from, the destination of one sending to it), else its name."""
    if run.has("tcp"):
        tcp = run.series("tcp")
        from_far = tcp["src"][tcp["host"] == far]
        to_far = tcp["dst"][tcp["host"] != far]
        for addrs in (from_far, to_far):
            if addrs.size:
                return str(addrs[0])
    return far


def flent_data(run, step_s=STEP_S, filename="run.flent.gz"):
    """The flent file's JSON object for ``run`` (a :class:`~bufferbloat.results.records.Run`)."""
    rec = run.record
    ex = _Export(run, step_s)
    flows = _tcp_flows(run)
    name = _test_name(flows)
    up_name, down_name, icmp_name, udp_name = NAMES[name]
    counts = {"up": 0, "down": 0}
    for label in sorted(flows, key=_natural):
        way, source = flows[label]
        counts[way] += 1
        pattern = up_name if way == "up" else down_name
        ex.tcp_flow(pattern.format(i=counts[way]), label, source)
    for kind, series, base in (("ping", "ping", icmp_name), ("irtt", "irtt", udp_name)):
        if not run.has(series):
            continue
        col = "probe"
        for k, label in enumerate(_groups(run.series(series), col)):
            series_name = base if k == 0 else f"{base} {label}"
            interval = _probe_interval(run, label, 0.1)
            (ex.icmp if kind == "ping" else ex.udp)(series_name, label, interval)
    devices = _aqm_devices(run)
    for host, dev in devices:
        ex.qdisc(host, dev)
    topo = ((rec.get("network") or {}).get("topology") or {})
    near = (topo.get("senders") or ["h1"])[0]
    far = topo.get("receiver") or "h2"
    qdisc = rec.get("qdisc") or {}
    stamp = os.path.basename(os.path.normpath(run.dir))
    qp = qdisc.get("params") or {}
    title = " ".join([(rec.get("scenario") or {}).get("name", "run"), qdisc.get("kind", "")]
                     + [f"{k[:-3]} {qp[k]:g} ms" for k in ("target_ms", "tupdate_ms")
                        if isinstance(qp.get(k), (int, float))]
                     + [f"({stamp})"])
    params = {"upload_streams": str(counts["up"]), "download_streams": str(counts["down"])}
    if devices:
        params["qdisc_stats_hosts"] = ",".join(h for h, _ in devices)
        params["qdisc_stats_interfaces"] = ",".join(d for _, d in devices)
    host = _far_host_address(run, far)
    health = rec.get("health") or {}
    metadata = {
        "NAME": name, "TITLE": title, "HOST": host, "HOSTS": [host], "LOCAL_HOST": near,
        "LENGTH": _num(rec.get("duration_s")) or ex.x[-1], "TOTAL_LENGTH": ex.x[-1],
        "STEP_SIZE": ex.step, "DELAY": 0, "IP_VERSION": 4,
        "TIME": _utc(ex.t0_wall), "T0": _utc(ex.wall(ex.origin)),
        "TEST_PARAMETERS": params, "DATA_FILENAME": filename,
        "NOTE": ("exported by bufferbloat from the run directory "
                 f"{stamp}: x = 0 at the traffic's start; TCP goodput from the "
                 "receivers' bytes_acked; the load and the probes start together "
                 "(DELAY 0)"),
        "SERIES_META": ex.meta,
        "BUFFERBLOAT": {"run_dir": os.path.abspath(run.dir),
                        "scenario": (rec.get("scenario") or {}).get("name"),
                        "run_key": rec.get("run_key"), "qdisc": qdisc,
                        "params": rec.get("params"), "scaling": rec.get("scaling"),
                        "warmup_s": rec.get("warmup_s"),
                        "health": health.get("verdict") if isinstance(health, dict)
                        else None},
    }
    return {"version": FORMAT_VERSION, "metadata": metadata, "x_values": ex.x,
            "results": ex.results, "raw_values": ex.raw}
