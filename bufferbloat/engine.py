"""Run one scenario point: build its network, drive its traffic, sample, record, measure.

``run_point(scn, overrides, ...)`` validates everything before any network state exists,
then writes one run directory (schema 2, docs/RESULTS.md):

* ``result.json``: scenario, every parameter as validated (topology, qdisc, knobs, the
  traffic as resolved), machine (host, kernel, host or VM), tool versions, sysctls, the
  qdisc plan and trees as installed and read back, the clock (t0, realtime offset),
  timings, status (running -> ok | failed | interrupted), error, per-traffic summaries;
* ``series/*.csv``: the sampler's qdisc.csv and tcp.csv (10 ms netlink), and iperf.csv,
  ping.csv, web.csv, udp.csv from the traffic objects;
* ``raw/``: every tool's own output (iperf3 JSON, ping, curl, the sampler's log);
* ``metrics.csv`` / ``metrics.json``: metrics recomputed from the stored series alone.

result.json is saved when the run starts (status running) and again at the end; each save
is atomic, series are flushed while the run goes, so an interrupted run keeps what it had.
"""

import csv
import datetime
import os
import time
from dataclasses import asdict

from . import metrics as mx
from . import theory
from .capabilities import probe
from .errors import UsageError
from .network import Network
from .results import RunWriter
from .sampler import Sampler
from .traffic import Iperf3Flow, PingProbe, Rrul, Schedule
from .udpstream import UdpStream
from .web import WebFetcher, WebServer

IPERF_BASE_PORT = 5201
WEB_PORT = 8080
UDP_BASE_PORT = 5600
SAMPLE_PERIOD_S = 0.01


def _iperf_objects(net, spec, duration_s, clock, ports, ccas):
    """Iperf3Flow objects of one iperf spec (``count`` flows, staggered over
    ``stagger_s``), each with its start offset (s from t0)."""
    count = int(spec.get("count", 1))
    start = spec["start"] * duration_s
    length = (spec["stop"] - spec["start"]) * duration_s
    stagger = min(float(spec.get("stagger_s", 0.0)), 0.9 * length)
    out = []
    for i in range(count):
        offset = stagger * i / count
        name = spec["name"] if count == 1 else f"{spec['name']}{i + 1}"
        flow = Iperf3Flow(net, spec["src"], spec["dst"], max(1.0, length - offset),
                          cca=spec.get("cca") or ccas.get(spec["src"]), port=next(ports),
                          parallel=int(spec.get("parallel", 1)), name=name,
                          direction=spec.get("direction", "up"),
                          mss_bytes=spec.get("mss_bytes"), rate_mbit=spec.get("rate_mbit"),
                          udp=spec.get("protocol") == "udp", **clock)
        out.append((flow, start + offset))
    return out


def build_traffic(net, traffic, duration_s, t0, rmm):
    """[(object, start_s, stop_s)] for the resolved traffic specs."""
    clock = dict(t0=t0, realtime_minus_monotonic=rmm)
    ports = iter(range(IPERF_BASE_PORT, IPERF_BASE_PORT + 1000))
    udp_ports = iter(range(UDP_BASE_PORT, UDP_BASE_PORT + 100))
    ccas = net.topo.ccas
    plan = []
    for spec in traffic:
        start, stop = spec["start"] * duration_s, spec["stop"] * duration_s
        kind = spec["kind"]
        if kind == "iperf":
            plan += [(f, at, None) for f, at in
                     _iperf_objects(net, spec, duration_s, clock, ports, ccas)]
        elif kind == "ping":
            plan.append((PingProbe(net, spec["src"], spec["dst"], spec.get("interval_s", 0.1),
                                   name=spec["name"], **clock), start, stop))
        elif kind == "web":
            size = int(spec.get("size_bytes", 100_000))
            server = WebServer(net, spec["server"], WEB_PORT, size,
                               name=f"{spec['name']}-server")
            fetcher = WebFetcher(net, spec["client"], spec["server"], WEB_PORT,
                                 spec.get("every_s", 2.0), name=spec["name"],
                                 expected_size=size, **clock)
            plan.append((server, 0.0, None))
            plan.append((fetcher, start, stop))
        elif kind == "udp":
            plan.append((UdpStream(net, spec["src"], spec["dst"], spec["rate_kbit"],
                                   spec.get("size_bytes", 1200), start_s=start,
                                   duration_s=stop - start, t0=t0, port=next(udp_ports),
                                   name=spec["name"]), 0.0, None))
        elif kind == "rrul":
            base = next(ports)
            for _ in range(7):
                next(ports)
            plan.append((Rrul(net, spec["a"], spec["b"], stop - start, cca=ccas.get(spec["a"]),
                              name=spec["name"], base_port=base, **clock), start, None))
        else:  # pragma: no cover - Scenario validates kinds
            raise UsageError(f"unknown traffic kind {kind!r}")
    return plan


def _leaves(obj):
    return obj.parts if isinstance(obj, Rrul) else [obj]


def sampler_flows(plan):
    """The sampler's flow specs: every TCP flow from its sending host's namespace."""
    flows = []
    for obj, _, _ in plan:
        for part in _leaves(obj):
            if isinstance(part, Iperf3Flow) and not getattr(part, "udp", False):
                if part.direction == "up":
                    flows.append({"host": part.src, "dports": [part.port]})
                else:
                    flows.append({"host": part.dst, "sports": [part.port],
                                  "labels": {part.port: part.name}})
    return flows


def relabel_tcp(path, plan):
    """Give the sampler's ``host:sport`` rows the traffic's flow labels (iperf3 told us
    which source port each stream had)."""
    labels = {}
    for obj, _, _ in plan:
        for part in _leaves(obj):
            if isinstance(part, Iperf3Flow):
                for (host, port), label in part.flow_labels().items():
                    labels[f"{host}:{port}"] = label
    if not labels or not os.path.exists(path):
        return
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        return
    col = rows[0].index("flow")
    for r in rows[1:]:
        if len(r) > col:
            r[col] = labels.get(r[col], r[col])
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    os.replace(tmp, path)


def _add_rows(writer, obj):
    rows = obj.rows()
    if isinstance(rows, dict):          # composite loads: {series: rows}
        for name, rs in rows.items():
            if rs:
                writer.add_rows(name, list(rs[0].keys()), rs)
        return
    if isinstance(obj, Iperf3Flow) and obj.parallel > 1:
        # -P N: keep the N streams; the per-interval sum row (labelled with the flow's
        # name) is their sum and would count twice
        rows = [r for r in rows if r["flow"] != obj.name]
    if rows:
        name = {Iperf3Flow: "iperf", PingProbe: "ping", WebFetcher: "web",
                UdpStream: "udp"}.get(type(obj))
        if name:
            writer.add_rows(name, list(rows[0].keys()), rows)


def run_point(scn, overrides=None, duration_s=None, out_root="results", quick=False,
              log=print, run_dir=None, sample_period_s=SAMPLE_PERIOD_S):
    """Run ``scn`` once with ``overrides``; returns the run directory. Bad input raises
    UsageError before any network state exists."""
    from .runner import machine_record, tool_versions
    caps = probe()
    topo, knobs, traffic = scn.build(overrides, quick=quick, hz=caps.hz)
    duration = duration_s or (scn.quick_duration_s if quick else scn.duration_s)
    if not 1 <= duration <= 86400:
        raise UsageError(f"invalid value for time: {duration!r} (allowed: 1 to 86400 s)")
    if not 0.001 <= sample_period_s <= 10:
        raise UsageError(f"invalid value for sample period: {sample_period_s!r} "
                         "(allowed: 0.001 to 10 s)")
    net = Network(topo, caps=caps)
    net.check()
    if run_dir is None:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        run_dir = os.path.join(out_root, scn.name, f"{stamp}-{os.getpid()}")
    writer = RunWriter(run_dir)
    rec = writer.record
    rec.update({"scenario": asdict(scn), "overrides": dict(overrides or {}),
                "profile": "quick" if quick else "full", "duration_s": duration,
                "params": dict(topo.params), "qdisc": topo.qdisc.to_dict(),
                "knobs": knobs, "traffic": traffic, "warmup_s": scn.warmup_s,
                "base_rtt_ms": topo.base_rtt_ms(), "sample_period_s": sample_period_s,
                "machine": machine_record(caps), "tools": tool_versions(),
                "bottleneck_dev": None})
    writer.save()
    t_wall = time.monotonic()
    plan, sampler, sched = [], None, None
    status, error = "failed", None
    try:
        with net:
            rec["network"] = net.describe()
            rec["bottleneck_dev"] = net.bottleneck_dev[1]
            rec["sysctls"] = net.sysctls() if hasattr(net, "sysctls") else {}
            log(f"  {scn.name}: {topo.qdisc.kind} at {topo.bottleneck.rate_mbit:g} Mbit/s, "
                f"{len(traffic)} traffic parts, {duration:g} s")
            writer.start_clock()
            t0 = writer.t0
            rmm = rec["realtime_minus_monotonic"]
            plan = build_traffic(net, traffic, duration, t0, rmm)
            sampler = Sampler(net, run_dir, t0, period_s=sample_period_s,
                              flows=sampler_flows(plan), duration_s=duration + 30)
            sampler.start()
            sched = Schedule(t0)
            for obj, at, stop in plan:
                sched.add(obj, at, stop)
            sched.start()
            end = t0 + duration
            while time.monotonic() < end:
                time.sleep(min(0.5, max(0.0, end - time.monotonic())))
                if not sampler.alive():
                    raise RuntimeError("the sampler died: " + sampler.log_text()[-500:])
                if sched.errors:
                    obj, exc = sched.errors[0]
                    raise RuntimeError(f"{getattr(obj, 'name', obj)} failed to start: {exc}")
            for obj, _, _ in plan:            # let flows finish their own -t
                if hasattr(obj, "wait") and not isinstance(obj, (PingProbe, WebServer)):
                    try:
                        obj.wait(timeout_s=5)
                    except Exception:  # noqa: BLE001 - stop() ends it; its record is kept
                        pass
            sched.stop()
            sampler.stop()
            rec["network"]["installed_after"] = net.readback()
            status = "ok"
    except KeyboardInterrupt:
        status, error = "interrupted", "interrupted (SIGINT/SIGTERM)"
        raise
    except Exception as exc:
        status, error = "failed", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        if sched is not None:
            sched.stop()
        _collect(writer, plan, sampler, run_dir)
        rec["wall_s"] = time.monotonic() - t_wall
        rec["timings"] = dict(net.timings)
        writer.close(status, error)
        if status == "ok":
            rows = mx.compute_metrics(run_dir, warmup_s=scn.warmup_s)
            mx.write_metrics(run_dir, rows, warmup_s=scn.warmup_s)
            rec["summary"] = summarize(topo, rows)
            writer.save()
    return run_dir


def _collect(writer, plan, sampler, run_dir):
    """Store every traffic object's rows, raw outputs and summary (even after a failure:
    what was measured is kept)."""
    summaries = []
    for obj, _, _ in plan:
        try:
            _add_rows(writer, obj)
            for fname, text in (obj.raw_outputs() or {}).items():
                writer.raw(fname, text)
            summary = obj.summary() or {}
            summaries.append({"name": getattr(obj, "name", ""), "kind": type(obj).__name__,
                              **summary})
            if isinstance(obj, UdpStream) and summary.get("sent") is not None:
                for spec in writer.record.get("traffic", []):
                    if spec.get("name") == obj.name:   # the loss metric's denominator
                        spec["sent_pkts"] = summary["sent"]
        except Exception as exc:  # noqa: BLE001 - one broken part must not lose the rest
            summaries.append({"name": getattr(obj, "name", ""), "error": repr(exc)})
    writer.record["traffic_results"] = summaries
    if sampler is not None:
        if sampler.alive():
            sampler.stop()
        writer.raw("sampler.log", sampler.log_text())
        writer.record["sampler"] = sampler.stats()
        relabel_tcp(os.path.join(run_dir, "series", "tcp.csv"), plan)


def summarize(topo, rows):
    """Headline metrics next to their theory."""
    def get(scope, metric, name=None):
        for r in rows:
            if r["scope"] == scope and r["metric"] == metric and (name is None
                                                                   or r["name"] == name):
                return r["value"]
        return None
    rate = topo.bottleneck.rate_mbit
    out = {"base_rtt_ms": topo.base_rtt_ms(), "rate_mbit": rate,
           "tcp_goodput_ceiling_mbit": theory.tcp_goodput_ceiling(rate),
           "aggregate_mbit": get("network", "aggregate_throughput_mbit"),
           "jain_fairness": get("network", "jain_fairness"),
           "ping_rtt_p50_ms": get("ping", "rtt_p50_ms"),
           "ping_rtt_max_ms": get("ping", "rtt_max_ms"),
           "queue_delay_p50_ms": get("link", "qdelay_p50_ms")}
    if topo.qdisc.kind == "fifo" and topo.qdisc.params.get("limit_pkts"):
        out["theory_full_queue_rtt_ms"] = theory.full_queue_rtt_ms(
            topo.base_rtt_ms(), topo.qdisc.params["limit_pkts"], rate)
    if topo.qdisc.kind in ("pie", "codel", "fq_codel"):
        out["aqm_target_ms"] = topo.qdisc.params.get("target_ms")
    return out
