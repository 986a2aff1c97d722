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
from . import health, identity, theory
from .capabilities import probe
from .cleanup import deferred_signals, record_result_file, terminate_on_sigterm
from .errors import ParameterError, UsageError
from .network import Network
from .results import RunWriter, load_run
from .sampler import Sampler
from .stats import percentile
from .traffic import Iperf3Flow, PingProbe, Rrul, Schedule, parse_ping, prepare_servers
from .udpstream import UdpStream
from .web import WebFetcher, WebServer

IPERF_BASE_PORT = 5201
WEB_PORT = 8080
UDP_BASE_PORT = 5600
SAMPLE_PERIOD_S = 0.01
#: After the run's time, flows get this long (in all) to finish their own -t; the ones
#: still running are then stopped by the run (recorded, not a failure).
FLOW_GRACE_S = 8.0
#: The sampler stops by itself this long after the grace period if nobody stops it
#: (a safety net for an orphan; the run stops it well before).
SAMPLER_SPARE_S = 60.0
#: Under TCG the project VM forwards ~57 Mbit/s at most with nothing else running
#: (PLATFORM.md); with flows, pings and the 10 ms sampler sharing its 2 vCPUs, 20 Mbit/s
#: is what it sustains at full utilization. Env BUFFERBLOAT_MAX_MBIT overrides (0: none).
TCG_MAX_MBIT = 20.0
MAX_MBIT_ENV = "BUFFERBLOAT_MAX_MBIT"


def rate_cap_mbit(scn=None):
    """The highest bottleneck rate this machine sustains, or None (no scaling). Under
    TCG a scenario whose bottleneck is loaded both ways (``aqm_both_ways``: B's RRUL)
    gets half the cap per direction: 20 Mbit/s each way measured work conservation
    0.86 and 11 % sampler misses, 10 Mbit/s each way 0.998 (docs/HEALTH.md)."""
    cap = _machine_cap_mbit()
    if cap and scn is not None and scn.params.get("aqm_both_ways") \
            and os.environ.get(MAX_MBIT_ENV) is None:
        return cap / 2
    return cap


def _machine_cap_mbit():
    raw = os.environ.get(MAX_MBIT_ENV)
    if raw:
        try:
            cap = float(raw)
        except ValueError:
            raise UsageError(f"invalid value for {MAX_MBIT_ENV}: {raw!r} (a rate in "
                             "Mbit/s, or 0 for no cap)") from None
        if cap < 0 or cap != cap:
            raise UsageError(f"invalid value for {MAX_MBIT_ENV}: {raw!r} (>= 0)")
        return cap or None
    if os.environ.get("BUFFERBLOAT_GUEST_ACCEL") == "tcg":
        return TCG_MAX_MBIT
    return None


#: Env: the sampler's SCHED_FIFO priority (0: the normal scheduler). Default: 0 in the
#: TCG VM, where a real-time sampler starves the softirq work that forwards the packets
#: (work conservation 0.78 against 0.82 without, docs/HEALTH.md); 1 elsewhere, where the
#: sampler costs a few % of a core and real-time keeps its ticks on time.
SAMPLER_RT_ENV = "BUFFERBLOAT_SAMPLER_RT"


def sampler_rt_priority():
    """The sampler's SCHED_FIFO priority from the environment (see SAMPLER_RT_ENV)."""
    default = "0" if os.environ.get("BUFFERBLOAT_GUEST_ACCEL") == "tcg" else "1"
    raw = os.environ.get(SAMPLER_RT_ENV, default)
    if not raw.isdigit() or int(raw) > 99:
        raise UsageError(f"invalid value for {SAMPLER_RT_ENV}: {raw!r} (0 to 99)")
    return int(raw)


def _iperf_objects(net, spec, duration_s, clock, ports, ccas):
    """Iperf3Flow objects of one iperf spec with their start offsets (s from t0):
    ``count`` flows staggered over ``stagger_s``; with ``on_off_s`` = (on, off) each flow
    is a train of ``on``-second flows (a new connection each time, as an application that
    sends in bursts) every ``on + off`` seconds, named NAME-on1, NAME-on2..."""
    count = int(spec.get("count", 1))
    start = spec["start"] * duration_s
    length = (spec["stop"] - spec["start"]) * duration_s
    stagger = min(float(spec.get("stagger_s", 0.0)), 0.9 * length)
    rate = spec.get("rate_mbit")
    if spec.get("rate_pct") is not None:
        rate = net.topo.bottleneck.rate_mbit * float(spec["rate_pct"]) / 100.0
    bursts = [(0.0, length, "")]
    if spec.get("on_off_s"):
        on, off = (float(x) for x in spec["on_off_s"])
        n = max(1, int((length + off) // (on + off)))
        bursts = [(k * (on + off), on, f"-on{k + 1}") for k in range(n)]
    out = []
    for i in range(count):
        offset = stagger * i / count
        base = spec["name"] if count == 1 else f"{spec['name']}{i + 1}"
        for at, dur, suffix in bursts:
            if offset + at >= length:
                break
            flow = Iperf3Flow(net, spec["src"], spec["dst"],
                              max(1.0, min(dur, length - offset - at)),
                              cca=spec.get("cca") or ccas.get(spec["src"]),
                              port=next(ports), parallel=int(spec.get("parallel", 1)),
                              name=base + suffix, direction=spec.get("direction", "up"),
                              mss_bytes=spec.get("mss_bytes"), rate_mbit=rate,
                              udp=spec.get("protocol") == "udp", **clock)
            out.append((flow, start + offset + at))
    return out


def build_traffic(net, traffic, duration_s, t0, rmm, raw_dir=None):
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
                                   name=spec["name"], work_dir=raw_dir), 0.0, None))
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
              log=print, run_dir=None, sample_period_s=SAMPLE_PERIOD_S, rep=1):
    """Run ``scn`` once with ``overrides``; returns the run directory. Bad input raises
    UsageError before any network state exists. ``rep`` is the repetition number, part
    of the run's identity (:mod:`.identity`: result.json's run_config, run_key).

    While the traffic runs, its processes are checked every 0.5 s (see
    :func:`health_problem`); a tool that died or exited with an error, or a flow that
    reports an error afterwards, ends the run as ``failed`` with the reason (RunFailed).
    SIGINT/SIGTERM end it as ``interrupted`` (KeyboardInterrupt). Either way the series
    so far and every tool's output (raw/) are kept and the network is removed."""
    from .runner import machine_record, tool_versions
    terminate_on_sigterm()
    caps = probe()
    topo, knobs, traffic = scn.build(overrides, quick=quick, hz=caps.hz,
                                     max_rate_mbit=rate_cap_mbit(scn))
    duration, warmup = identity.durations(scn, quick, duration_s)
    if isinstance(sample_period_s, bool) or \
            not isinstance(sample_period_s, (int, float)) or \
            not 0.001 <= sample_period_s <= 10:
        raise UsageError(f"invalid value for sample period: {sample_period_s!r} "
                         "(allowed: 0.001 to 10 s)")
    check_out_dir(run_dir if run_dir is not None else out_root,
                  "--out" if run_dir is None else "run_dir")
    net = Network(topo, caps=caps)
    net.check()
    if run_dir is None:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        run_dir = os.path.join(out_root, scn.name, f"{stamp}-{os.getpid()}")
    writer = RunWriter(run_dir)
    rec = writer.record
    rec.update(identity.record_fields(identity.config_of(
        scn, topo, knobs, traffic, quick, duration, warmup, sample_period_s, rep)))
    t_wall = time.monotonic()
    state = {}
    status, error = "failed", None
    try:
        _run_network(scn, overrides, quick, duration, warmup, sample_period_s, topo, knobs,
                     traffic, caps, net, writer, run_dir, log, machine_record, tool_versions,
                     state)
        status = "ok"
    except KeyboardInterrupt as exc:
        # an interrupt during the teardown of a run that measured everything leaves it ok
        if not state.get("measured"):
            status, error = "interrupted", f"interrupted ({exc or 'SIGINT'})"
        else:
            status = "ok"
        raise
    except Exception as exc:
        status, error = "failed", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        # recording must not be cut in two by a second Ctrl-C
        with deferred_signals("bufferbloat: interrupt received: saving the results first"):
            _finish(writer, state, net, run_dir, status, error, warmup, topo, t_wall)
    return run_dir


class RunFailed(RuntimeError):
    """A tool of the run died or reported an error: the run is recorded as failed."""


def _run_network(scn, overrides, quick, duration, warmup, sample_period_s, topo, knobs,
                 traffic, caps, net, writer, run_dir, log, machine_record, tool_versions,
                 state):
    """The run itself; ``state`` receives plan, sampler and schedule for _finish."""
    rec = writer.record
    state.update(plan=[], sampler=None, sched=None, measured=False)
    rec.update({"scenario": asdict(scn), "overrides": dict(overrides or {}),
                "profile": "quick" if quick else "full", "duration_s": duration,
                "params": dict(topo.params), "qdisc": topo.qdisc.to_dict(),
                "knobs": knobs, "traffic": traffic, "warmup_s": warmup,
                "scaling": topo.scaling,
                "base_rtt_ms": topo.base_rtt_ms(), "sample_period_s": sample_period_s,
                "machine": machine_record(caps), "tools": tool_versions(),
                "bottleneck_dev": None})
    writer.save()
    with net:
        record_result_file(net.state, writer.path)
        if net.recovered:
            rec["recovered"] = net.recovered
            log(f"  removed what a killed run left behind: {net.recovered}")
        rec["network"] = net.describe()
        rec["bottleneck_dev"] = net.bottleneck_dev[1]
        rec["sysctls"] = net.sysctls()
        log(f"  {scn.name}: {topo.qdisc.kind} at {topo.bottleneck.rate_mbit:g} Mbit/s, "
            f"{len(traffic)} traffic parts, {duration:g} s")
        if topo.scaling:
            log(f"  scaled to what this machine sustains: "
                + ", ".join(f"{k} {a:g} -> {b:g}" for k, (a, b)
                            in topo.scaling["changed"].items()))
        try:
            _traffic(scn, duration, sample_period_s, topo, traffic, net, writer, run_dir,
                     state)
        finally:
            # the traffic ends before the network does (even on an error or a signal)
            with deferred_signals("bufferbloat: interrupt received: stopping the traffic "
                                  "first"):
                if state.get("sched") is not None:
                    state["sched"].stop()
                if state.get("sampler") is not None and state["sampler"].alive():
                    state["sampler"].stop()


def _traffic(scn, duration, sample_period_s, topo, traffic, net, writer, run_dir, state):
    """Start the sampler and the traffic, watch them, wait for the flows to end."""
    rec = writer.record
    writer.start_clock()
    t0 = writer.t0
    rmm = rec["realtime_minus_monotonic"]
    plan = state["plan"] = build_traffic(net, traffic, duration, t0, rmm,
                                         raw_dir=os.path.join(run_dir, "raw"))
    devs = [net.bottleneck_dev]
    if topo.params.get("aqm_both_ways"):   # the reverse AQM, in the receiver
        bnl = topo.bottleneck
        devs.append((bnl.b, net.intfs[(bnl.a, bnl.b)][1]))
    rec["idle_rtt"] = idle_rtt(net, *_probe_pair(topo, traffic))
    # every server listens before the clock starts: a flow's start is then its client's
    prepare_servers([p for obj, _, _ in plan for p in _leaves(obj)
                     if isinstance(p, Iperf3Flow)])
    tcp_period = (max(sample_period_s, scn.tcp_sample_ms / 1e3)
                  if scn.tcp_sample_ms else None)
    sampler = Sampler(net, run_dir, t0, period_s=sample_period_s, qdisc_devs=devs,
                      flows=sampler_flows(plan), tcp_period_s=tcp_period,
                      rt_priority=sampler_rt_priority(),
                      duration_s=duration + FLOW_GRACE_S + SAMPLER_SPARE_S)
    state["sampler"] = sampler
    sampler.start()
    # the schedule's origin is taken once the sampler samples (its start-up takes seconds
    # under TCG): a flow's lateness is then its own, not the sampler's
    origin = time.monotonic()
    rec["traffic_start_s"] = origin - t0
    sched = state["sched"] = Schedule(origin)
    for obj, at, stop in plan:
        sched.add(obj, at, stop)
        obj.scheduled_s = rec["traffic_start_s"] + at
    sched.start()
    end = origin + duration
    while time.monotonic() < end:
        time.sleep(min(0.5, max(0.0, end - time.monotonic())))
        problem = health_problem(net, plan, sampler, sched)
        if problem:
            raise RunFailed(problem)
    # let flows finish their own -t (a late start ends late), all within one grace
    # period: 40 late flows must not wait 5 s each while the sampler runs out of time
    grace_end = time.monotonic() + FLOW_GRACE_S
    for obj, _, _ in plan:
        if hasattr(obj, "wait") and not isinstance(obj, (PingProbe, WebServer)):
            try:
                obj.wait(timeout_s=max(0.1, grace_end - time.monotonic()))
            except Exception:  # noqa: BLE001 - stop() ends it; its record is kept
                pass
    rec["traffic_overrun_s"] = time.monotonic() - end
    sched.stop()
    if not sampler.alive():
        raise RunFailed(f"the sampler died (exit {sampler.proc.returncode}): "
                        + sampler.log_text()[-500:])
    sampler.stop()
    problem = flow_errors(plan)
    if problem:
        raise RunFailed(problem)
    rec["network"]["installed_after"] = net.readback()
    state["measured"] = True


def _finish(writer, state, net, run_dir, status, error, warmup, topo, t_wall):
    """Store what was measured (even after a failure or an interruption), close the
    record with its final status, compute the metrics of a run that went well."""
    rec = writer.record
    if state.get("sched") is not None:
        state["sched"].stop()
    try:
        _collect(writer, state.get("plan") or [], state.get("sampler"), run_dir)
    except Exception as exc:  # noqa: BLE001 - the record must still be closed
        rec["collect_error"] = f"{type(exc).__name__}: {exc}"
    rec["wall_s"] = time.monotonic() - t_wall
    rec["timings"] = dict(net.timings)
    writer.close(status, error)
    if status == "ok":
        rows = mx.compute_metrics(run_dir, warmup_s=warmup)
        mx.write_metrics(run_dir, rows, warmup_s=warmup)
        rec["summary"] = summarize(topo, rows)
        # from what was collected, never by collecting again
        rec["health"] = health.assess(load_run(run_dir), rows)
        writer.save()


#: The idle probe before the traffic: this many pings this far apart (1 s in all).
IDLE_PINGS, IDLE_PING_INTERVAL_S = 20, 0.05


def _probe_pair(topo, traffic):
    """(src, dst) hosts for the idle RTT probe: the scenario's first ping probe, else
    its first part with two ends, else the first sender and the receiver."""
    specs = sorted(traffic, key=lambda sp: sp.get("kind") != "ping")
    for spec in specs:
        for a, b in (("src", "dst"), ("a", "b"), ("client", "server")):
            if spec.get(a) and spec.get(b):
                return spec[a], spec[b]
    return topo.senders[0], topo.receiver


def idle_rtt(net, src, dst, count=IDLE_PINGS, interval_s=IDLE_PING_INTERVAL_S):
    """RTT of the idle path before any traffic: {samples, lost, min_ms, p50_ms, p90_ms,
    max_ms, src, dst} (None values when no reply came). Shows the emulator's own timing
    against the configured delays (docs/HEALTH.md)."""
    proc = net.popen(src, ["ping", "-n", "-D", "-c", count, "-i", interval_s, "-W", 1,
                           net.ip(dst)])
    try:
        out, _ = proc.communicate(timeout=count * interval_s + 10)
    except Exception:  # noqa: BLE001 - the probe is informative; the run goes on
        proc.kill()
        out, _ = proc.communicate()
    rtts = sorted(r for _, _, r in parse_ping(out or "").probes)
    res = {"src": src, "dst": dst, "samples": len(rtts), "lost": count - len(rtts)}
    for key, q in (("min_ms", 0), ("p50_ms", 50), ("p90_ms", 90), ("max_ms", 100)):
        res[key] = round(percentile(rtts, q), 3) if rtts else None
    return res


def check_out_dir(path, what="--out"):
    """An output directory must be a plain path to a directory we can create or write,
    outside the kernel's pseudo file systems. Raises ParameterError (exit 2)."""
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if not text or not text.strip() or any(c in text for c in "\0\n\r"):
        raise ParameterError(what, path, "a directory path")
    full = os.path.realpath(text)
    if any(full == p or full.startswith(p + "/") for p in ("/proc", "/sys", "/dev")):
        raise ParameterError(what, path, "a directory outside /proc, /sys and /dev")
    probe_dir = full
    while not os.path.exists(probe_dir):
        probe_dir = os.path.dirname(probe_dir)
    if not os.path.isdir(probe_dir):
        raise ParameterError(what, path, f"a directory path ({probe_dir} is not a directory)")
    if not os.access(probe_dir, os.W_OK | os.X_OK):
        raise ParameterError(what, path, f"a writable directory ({probe_dir} is not "
                             "writable)")
    return text


def _exit_problem(what, proc, expect_running=False):
    """'WHAT exited with code N' if ``proc`` ended with an error (or at all, when it
    should still run), else None."""
    if proc is None:
        return None
    rc = proc.poll()
    if rc is None or (rc == 0 and not expect_running):
        return None
    how = f"was killed by signal {-rc}" if rc < 0 else f"exited with code {rc}"
    return f"{what} {how} (pid {proc.pid})"


def health_problem(net, plan, sampler, sched):
    """Why the run cannot go on, or None: the sampler, a Mininet host or the web server
    gone, an iperf3 server/client or a UDP sender/receiver exited with an error (or, for
    servers and receivers, before their peer finished), a traffic part that failed to
    start. The tools' output stays in raw/ (written by _collect)."""
    if sampler is not None and not sampler.alive():
        return (f"the sampler died (exit {sampler.proc.returncode if sampler.proc else '?'})"
                f": {sampler.log_text()[-500:]}")
    for node in list(getattr(net.net, "hosts", None) or []):
        shell = getattr(node, "shell", None)
        if shell is not None and shell.poll() is not None:
            return f"host {node.name} died (its shell, pid {shell.pid}, exited)"
    if sched is not None and sched.errors:
        obj, exc = sched.errors[0]
        return f"{getattr(obj, 'name', obj)} failed to start: {exc}"
    for obj, _, _ in plan:
        for part in _leaves(obj):
            problem = _part_problem(part)
            if problem:
                return problem
    return None


def _part_problem(part):
    name = getattr(part, "name", "?")
    if isinstance(part, WebServer):
        return _exit_problem(f"web server {name}", part.proc, expect_running=True)
    if isinstance(part, Iperf3Flow):
        if part.error:
            return f"iperf3 flow {name}: {part.error}"
        client_running = part.client is not None and part.client.poll() is None
        return (_exit_problem(f"iperf3 server of {name} (port {part.port})", part.server,
                              expect_running=client_running)
                or _exit_problem(f"iperf3 client of {name} (raw/{name}.client.json)",
                                 part.client))
    if isinstance(part, UdpStream) and part.sender is not None:
        sending = part.sender.poll() is None
        return (_exit_problem(f"UDP sender {name}", part.sender)
                or _exit_problem(f"UDP receiver {name}", part.receiver,
                                 expect_running=sending))
    return None


def flow_errors(plan):
    """The first error an iperf3 flow reported (its summary's ``error``), or None.

    A flow the run stopped itself (its scheduled stop, or the end of the run reached
    while a late-started flow still ran its ``-t``: under load, e.g. 40 staggered flows in
    the TCG VM, a client starts seconds late) reports "interrupt - the client has
    terminated": that is our doing, kept in its summary, not a failure. A tool that died
    while the traffic ran was caught by :func:`health_problem` before."""
    for obj, _, _ in plan:
        for part in _leaves(obj):
            if isinstance(part, Iperf3Flow) and part.error and not part.stopped:
                return f"iperf3 flow {part.name}: {part.error}"
    return None


def _collect(writer, plan, sampler, run_dir):
    """Store every traffic object's rows, raw outputs and summary (even after a failure:
    what was measured is kept)."""
    summaries = []
    for obj, _, _ in plan:
        try:
            if hasattr(obj, "rows"):          # a web server has output but no rows
                _add_rows(writer, obj)
            for fname, text in (obj.raw_outputs() or {}).items():
                writer.raw(fname, text)
            summary = (obj.summary() if hasattr(obj, "summary") else {}) or {}
            summaries.append({"name": getattr(obj, "name", ""), "kind": type(obj).__name__,
                              **summary})
            if getattr(obj, "scheduled_s", None) is not None:
                # every flow (a composite load's too) against its schedule (health)
                for flow in [summaries[-1]] + list(summary.get("flows") or []):
                    if isinstance(flow, dict) and "t_start" in flow:
                        flow["scheduled_s"] = obj.scheduled_s
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
