"""Run one scenario point: build its network, drive its traffic, sample, record, measure.

``run_resolved(run)`` runs a point resolved once (:mod:`.resolved`) and checks what the
kernel must have before any network state exists,
then writes one run directory (schema 2, docs/reference/results.md):

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

import contextlib
import datetime
import os
import time
from dataclasses import asdict, dataclass, field

from bufferbloat.core.errors import UsageError
from bufferbloat.core.machine import machine_record, tool_versions, under_tcg
from bufferbloat.core.params import (
    check_out_dir,
    env_number,
)
from bufferbloat.core.series import columns_of
from bufferbloat.core.signals import deferred_signals, terminate_on_sigterm
from bufferbloat.measure import departures
from bufferbloat.measure.sampler import Prewarmed, Sampler, prepare_qdisc_helper
from bufferbloat.net import reuse
from bufferbloat.net.bottleneck import htb_burst_bytes
from bufferbloat.net.capabilities import probe
from bufferbloat.net.cleanup import record_result_file
from bufferbloat.net.isolation import in_initial_netns
from bufferbloat.net.network import Network
from bufferbloat.results.records_writer import RunWriter
from bufferbloat.run import identity, judge, linkreplay
from bufferbloat.run.resolved import resolve_run
from bufferbloat.traffic import base as traffic_base
from bufferbloat.traffic import kinds as traffic_kinds
from bufferbloat.traffic.ping import idle_rtt

SAMPLE_PERIOD_S = 0.01
#: After the run's time, flows get this long (in all) to finish their own -t; the ones
#: still running are then stopped by the run (recorded, not a failure).
FLOW_GRACE_S = 8.0
#: The sampler stops by itself this long after the grace period if nobody stops it
#: (a safety net for an orphan; the run stops it well before).
SAMPLER_SPARE_S = 60.0
#: Env: the sampler's SCHED_FIFO priority (0: the normal scheduler). Default: 0 in the
#: TCG VM, where a real-time sampler starves the softirq work that forwards the packets
#: (work conservation 0.78 against 0.82 without, docs/design/health.md); 1 elsewhere, where the
#: sampler costs a few % of a core and real-time keeps its ticks on time.
SAMPLER_RT_ENV = "BUFFERBLOAT_SAMPLER_RT"


#: env: ``off`` starts the sampler's process only once its run knows what it samples
#: (the way before 2026-11-29), for a side-by-side; ``on`` (default) starts it with the
#: network (:class:`~bufferbloat.measure.sampler.Prewarmed`)
PREWARM_ENV = "BUFFERBLOAT_SAMPLER_PREWARM"


def prewarm_wanted():
    """Whether the sampler's process starts with the network (env
    BUFFERBLOAT_SAMPLER_PREWARM: on, off)."""
    value = os.environ.get(PREWARM_ENV, "on")
    if value not in ("on", "off"):
        raise UsageError(f"invalid value for {PREWARM_ENV}: {value!r} (allowed: on, off)")
    return value == "on"


def sampler_rt_priority():
    """The sampler's SCHED_FIFO priority from the environment (see SAMPLER_RT_ENV)."""
    default = 0 if under_tcg() else 1
    return env_number(SAMPLER_RT_ENV, default, 0, 99, "0 to 99", conv=int)


def build_parts(net, traffic, duration_s, t0, rmm, raw_dir=None, sampler_warm=False):
    """The traffic parts of the resolved specs ``traffic`` (through the registry);
    ``sampler_warm``: the run's sampler process started ahead (PartContext)."""
    ctx = traffic_base.PartContext(net, duration_s, t0, rmm, raw_dir,
                                   sampler_warm=sampler_warm)
    return [traffic_kinds.build(spec, ctx) for spec in traffic]


def sampler_flows(parts):
    """The sampler's flow specs: every TCP flow of the parts, labelled as the parts
    label their rows (tcp.csv is written once, as sampled)."""
    return [flow for part in parts for flow in part.sampled_flows()]


@dataclass
class RunContext:
    """What the steps of one run share (see :func:`run_point` for the steps)."""

    scn: object
    overrides: dict
    quick: bool
    duration_s: float
    warmup_s: float
    sample_period_s: float
    topo: object
    knobs: dict
    traffic: list
    caps: object
    net: Network
    writer: RunWriter
    log: object = print
    #: what the qdisc's values become on this kernel (its validation's warnings and the
    #: tick's: PIE's tupdate), recorded with the qdisc (result.json ``qdisc.warnings``)
    qdisc_warnings: list = field(default_factory=list)
    parts: list = field(default_factory=list)
    sampler: Sampler | None = None
    #: the sampler's process, started with the network before its spec is known
    prewarmed: Prewarmed | None = None
    #: the kernel's timing of every departure of the watched leaves
    departures: object = None
    #: the compiled queue sampler, made ready before the network is built
    #: (:func:`bufferbloat.measure.sampler.prepare_qdisc_helper`)
    qdisc_helper: dict | None = None
    #: the capacity loops of a varying bottleneck, {record key: loop}
    #: (bufferbloat/run/linkreplay.py)
    link_loop: object = None
    #: every measurement is in (an interrupt in the teardown leaves the run ok)
    measured: bool = False
    #: the sweep's :class:`~bufferbloat.net.reuse.NetworkKeeper`: the network of the
    #: point before, kept (None: the run builds and removes its own)
    keeper: object = None
    t_wall: float = field(default_factory=time.monotonic)
    #: seconds spent in each phase of the run (result.json ``phases_s``, docs/reference/results.md)
    phases: dict = field(default_factory=dict)

    @contextlib.contextmanager
    def phase(self, name):
        """Time the block as phase ``name`` (added up when a phase comes again)."""
        t = time.monotonic()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.monotonic() - t

    @property
    def run_dir(self):
        """The run directory."""
        return self.writer.dir

    @property
    def record(self):
        """result.json's content."""
        return self.writer.record


def run_point(scn, overrides=None, duration_s=None, out_root="results", quick=False,
              log=print, run_dir=None, sample_period_s=SAMPLE_PERIOD_S, rep=1, keeper=None):
    """Resolve one point of ``scn`` (:func:`bufferbloat.run.resolved.resolve_run`) and
    run it (:func:`run_resolved`); returns the run directory."""
    run = resolve_run(scn, overrides, quick=quick, duration_s=duration_s, rep=rep,
                      sample_period_s=sample_period_s)
    return run_resolved(run, out_root=out_root, log=log, run_dir=run_dir, keeper=keeper)


def run_resolved(run, out_root="results", log=print, run_dir=None, keeper=None):
    """Run the resolved point ``run`` (:class:`~bufferbloat.run.resolved.ResolvedRun`)
    once; returns the run directory. Nothing is resolved again: the network's checks and
    the output directory are checked before any network state exists (UsageError).
    ``keeper`` (:class:`~bufferbloat.net.reuse.NetworkKeeper`, a serial sweep's): the
    network of the point before is used again when it has the same shape and its state
    is proven clean, and this point's is kept for the next; the record says which
    (``network.reuse``).

    The steps, top to bottom: :func:`prepare` (the kernel's checks; the record's
    identity) -> :func:`run_network` (build the network, record it, then
    :func:`measure`: build and prepare the traffic parts, start the sampler and the
    parts, watch them, wait, stop) -> :func:`finish` (collect what the parts and the
    sampler left into the series, once; close the record; metrics, once; the health
    verdict from what was collected; write).

    While the traffic runs, its processes are checked every 0.5 s (see
    :func:`health_problem`); a tool that died or exited with an error, or a flow that
    reports an error afterwards, ends the run as ``failed`` with the reason (RunFailed).
    SIGINT/SIGTERM end it as ``interrupted`` (KeyboardInterrupt). Either way the series
    so far and every tool's output (raw/) are kept and the network is removed."""
    terminate_on_sigterm()
    t_resolve = time.monotonic()
    ctx = prepare(run, out_root, log, run_dir)
    ctx.keeper = keeper
    ctx.t_wall = t_resolve
    ctx.phases["resolve"] = time.monotonic() - t_resolve
    status, error = "failed", None
    try:
        run_network(ctx)
        status = "ok"
    except KeyboardInterrupt as exc:
        # an interrupt during the teardown of a run that measured everything leaves it ok
        if not ctx.measured:
            status, error = "interrupted", f"interrupted ({str(exc) or 'SIGINT'})"
        else:
            status = "ok"
        raise
    except Exception as exc:
        status, error = "failed", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        # recording must not be cut in two by a second Ctrl-C
        with deferred_signals("bufferbloat: interrupt received: saving the results first"):
            finish(ctx, status, error)
    return ctx.run_dir


def prepare(run, out_root="results", log=print, run_dir=None):
    """Step 1: what this kernel must have for ``run`` (UsageError otherwise, before any
    network state exists), the run directory and its record's identity."""
    sampler_rt_priority(), prewarm_wanted()     # the environment's values, checked
    caps = probe()
    warnings = run.warnings(caps.hz)   # e.g. PIE's tupdate rounded to the kernel tick
    for warning in warnings:
        log(f"  warning: {warning}")
    check_out_dir(run_dir if run_dir is not None else out_root,
                  "--out" if run_dir is None else "run_dir")
    net = Network(run.topo, caps=caps)
    net.check()
    caps.require(traffic_kinds.needs_of(run.traffic))  # the traffic's tools and features
    if run_dir is None:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        run_dir = base = os.path.join(out_root, run.name, f"{stamp}-{os.getpid()}")
        n = 2
        while os.path.exists(run_dir):     # a repetition that ended within the second
            run_dir, n = f"{base}.{n}", n + 1
    writer = RunWriter(run_dir)
    writer.record.update(identity.record_fields(run.config))
    return RunContext(run.scn, dict(run.overrides), run.quick, run.duration_s,
                      run.warmup_s, run.sample_period_s, run.topo, run.knobs, run.traffic,
                      caps, net, writer, log, qdisc_warnings=warnings)


class RunFailed(RuntimeError):
    """A tool of the run died or reported an error: the run is recorded as failed."""


def run_network(ctx):
    """Step 2: record the configuration (status running), build the network, measure;
    the traffic and the sampler end before the network does (even on an error or a
    signal)."""
    scn, topo, net, rec = ctx.scn, ctx.topo, ctx.net, ctx.record
    with ctx.phase("record"):
        _record_setting(ctx)
    # built (first use in a fresh checkout, ~10 s under TCG) before the network exists
    # and the clock starts: never a race against the sampler's start-up timeout
    with ctx.phase("sampler_build"):
        ctx.qdisc_helper = prepare_qdisc_helper(ctx.log)
    # the kept network of the point before, reconfigured and proven clean, or this
    # point's own, built (bufferbloat/net/reuse.py)
    with (reuse.own_network(net) if ctx.keeper is None
          else ctx.keeper.network(net)) as (net, reused):
        ctx.net = net
        if prewarm_wanted():
            # its interpreter and modules load while this process reads the network
            # back and builds the parts: the other CPU's work
            ctx.prewarmed = Prewarmed(net, ctx.run_dir)
        record_result_file(net.state, ctx.writer.path)
        if net.recovered:
            rec["recovered"] = net.recovered
            ctx.log(f"  removed what a killed run left behind: {net.recovered}")
        with ctx.phase("readback"):
            rec["network"] = net.describe()
            # the counters this point starts from (its qdiscs' are in "installed")
            rec["network"]["baseline"] = {"interfaces": reuse.counters(net)}
            rec["network"]["reuse"] = reused
            rec["bottleneck_dev"] = net.bottleneck_dev[1]
            rec["sysctls"] = net.sysctls()
        if reused["reused"]:
            ctx.log(f"  network kept from the point before: {reused['why']}")
        ctx.log(f"  {scn.name}: {topo.qdisc.kind} at {topo.bottleneck.rate_mbit:g} Mbit/s, "
                f"{len(ctx.traffic)} traffic parts, {ctx.duration_s:g} s")
        if topo.scaling:
            ctx.log("  scaled to what this machine sustains: "
                    + ", ".join(f"{k} {a:g} -> {b:g}" for k, (a, b)
                                in topo.scaling["changed"].items()))
        try:
            measure(ctx)
        finally:
            with deferred_signals("bufferbloat: interrupt received: stopping the traffic "
                                  "first"), ctx.phase("stop"):
                stop_traffic(ctx)


def _record_setting(ctx):
    """The run's setting into its record (status running), saved before anything is
    built."""
    scn, topo, rec = ctx.scn, ctx.topo, ctx.record
    rec.update({"scenario": asdict(scn), "overrides": ctx.overrides,
                "profile": "quick" if ctx.quick else "full", "duration_s": ctx.duration_s,
                "params": dict(topo.params),
                "qdisc": dict(topo.qdisc.to_dict(), warnings=list(ctx.qdisc_warnings)),
                "knobs": ctx.knobs, "traffic": ctx.traffic, "warmup_s": ctx.warmup_s,
                "scaling": topo.scaling,
                "base_rtt_ms": topo.base_rtt_ms(), "sample_period_s": ctx.sample_period_s,
                "machine": machine_record(ctx.caps), "tools": tool_versions(),
                "bottleneck_dev": None})
    ctx.writer.save()


def measure(ctx):
    """Step 3: the clock, the traffic parts (built, prepared), the idle RTT probe, the
    sampler and the parts started, watched while the run's time goes, waited for, and
    stopped."""
    net, rec, writer = ctx.net, ctx.record, ctx.writer
    t0 = writer.start_clock()
    with ctx.phase("parts"):
        warm = ctx.prewarmed is not None and ctx.prewarmed.alive()
        ctx.parts = build_parts(net, ctx.traffic, ctx.duration_s, t0,
                                rec["realtime_minus_monotonic"],
                                raw_dir=os.path.join(ctx.run_dir, "raw"), sampler_warm=warm)
    # the sampler's start-up (~2.2 s under TCG: its interpreter, sockets, compiled
    # helper) runs beside the idle RTT probe, or, when a part labels its flows only once
    # prepared (NetPerfMeter's pre-connected sockets), inside the wait until its flows'
    # start (origin_at). It samples from before the traffic; metrics start at the
    # traffic's start plus the warm-up. The departure trace starts once the sampler is
    # ready (the order every bench in docs/design/cost.md measured; the guest lockups once
    # blamed on the two side by side came from kernel code patching, docs/design/health.md).
    early = not any(part.flows_known_after_prepare for part in ctx.parts)
    if early:
        with ctx.phase("sampler_start"):
            ctx.sampler = make_sampler(ctx, t0).launch(ctx.prewarmed)
    with ctx.phase("idle_rtt"):
        rec["idle_rtt"] = idle_rtt(net, *_probe_pair(ctx.topo, ctx.parts))
    if not early:
        # e.g. servers: every one listens before the clock starts, so that a flow's
        # start is its client's
        with ctx.phase("prepare"):
            prepare_parts(ctx.parts)
        with ctx.phase("sampler_start"):
            ctx.sampler = make_sampler(ctx, t0).launch(ctx.prewarmed)
    with ctx.phase("sampler_start"):
        ctx.sampler.wait_ready()
    rec["sampler_prewarmed"] = ctx.sampler.prewarmed
    with ctx.phase("departures_start"):
        start_departures(ctx, t0)
    ctx.link_loop, why = linkreplay.start(ctx.topo, net, ctx.run_dir, rec, t0,
                                          sampler_rt_priority())
    if why:
        raise RunFailed(why)     # the loops started are stopped with the traffic
    if early:
        with ctx.phase("prepare"):
            prepare_parts(ctx.parts)
    # the schedule's origin is taken once the sampler samples (its start-up takes seconds
    # under TCG): a flow's lateness is then its own, not the sampler's
    origin = time.monotonic()
    # a part whose flows were connected ahead (NetPerfMeter: bufferbloat/traffic/
    # traffic/netperfmeter/) starts them at a time it set: the origin waits for it
    # That time is the origin even when it has passed (the sampler's start-up took
    # longer than the part's lead, under TCG on a loaded machine): those flows began
    # then, by the tool's own clock, so the other parts are late (the emulator fell
    # behind: degraded when past MAX_START_LATE_S), never the pre-connected flows early
    due = [p.origin_at for p in ctx.parts if p.origin_at is not None]
    with ctx.phase("connect"):
        if due:
            if max(due) > origin:
                time.sleep(max(due) - origin)
            else:
                rec["origin_passed_s"] = round(origin - max(due), 3)
            origin = max(due)
    rec["traffic_start_s"] = origin - t0
    with ctx.phase("traffic"):
        for part in ctx.parts:
            part.start(origin)
        end = origin + ctx.duration_s
        while time.monotonic() < end:
            time.sleep(min(0.5, max(0.0, end - time.monotonic())))
            problem = health_problem(net, ctx.parts, ctx.sampler)
            if problem:
                raise RunFailed(problem)
    # let flows finish their own -t (a late start ends late), all within one grace
    # period: 40 late flows must not wait 5 s each while the sampler runs out of time
    with ctx.phase("grace"):
        grace_end = time.monotonic() + FLOW_GRACE_S
        for part in ctx.parts:
            part.wait(max(0.1, grace_end - time.monotonic()))
    rec["traffic_overrun_s"] = time.monotonic() - end
    with ctx.phase("stop"):
        stop_parts(ctx.parts)
        sampler = ctx.sampler
        if not sampler.alive():
            raise RunFailed(sampler_died(sampler))
        sampler.stop()
    with ctx.phase("departures_stop"):
        stop_departures(ctx)
    linkreplay.stop(ctx.link_loop, rec)
    ctx.link_loop = None
    problem = next(filter(None, (part.reported_error() for part in ctx.parts)), None)
    if problem:
        raise RunFailed(problem)
    with ctx.phase("readback"):
        rec["network"]["installed_after"] = net.readback()
    ctx.measured = True


def make_sampler(ctx, t0):
    """The sampler of the run: the bottleneck's queue (and the reverse AQM's, in the
    receiver) every sample period, the parts' TCP flows."""
    net, scn = ctx.net, ctx.scn
    devs = [ns_dev for ns_dev, _ in _watched(ctx)]
    tcp_period = (max(ctx.sample_period_s, scn.tcp_sample_ms / 1e3)
                  if scn.tcp_sample_ms else None)
    sampler = Sampler(net, ctx.run_dir, t0, period_s=ctx.sample_period_s, qdisc_devs=devs,
                      flows=sampler_flows(ctx.parts), tcp_period_s=tcp_period,
                      rt_priority=sampler_rt_priority(),
                      duration_s=ctx.duration_s + FLOW_GRACE_S + SAMPLER_SPARE_S)
    if ctx.qdisc_helper is not None:
        sampler.spec["qdisc_helper"] = ctx.qdisc_helper
    return sampler


def _reverse_leaf(topo):
    """Whether the bottleneck's reverse direction holds a queue worth watching: the AQM
    both ways, or the receiver's own qdisc (``reverse_qdisc``: study B's server NIC)."""
    return bool(topo.params.get("aqm_both_ways")
                or getattr(topo, "reverse_qdisc", None) is not None)


def _watched(ctx):
    """[((namespace, device), rate Mbit/s)] of the leaves the sampler and the departure
    trace watch: the bottleneck's egress; the reverse one, in the receiver, when the
    topology queues there (:func:`_reverse_leaf`)."""
    topo, net = ctx.topo, ctx.net
    out = [(net.bottleneck_dev, topo.bottleneck.rate_mbit)]
    if _reverse_leaf(topo):
        bnl = topo.bottleneck
        rev = topo.params.get("reverse_mbit") or bnl.rate_mbit
        out.append(((bnl.b, net.intfs[(bnl.a, bnl.b)][1]), rev))
    return out


def start_departures(ctx, t0):
    """Start the departure trace (bufferbloat/measure/departures.py) where the kernel
    has it and the environment does not turn it off; otherwise record why not."""
    rec = ctx.record
    if not departures.wanted():
        rec["departures"] = {"traced": False, "why": f"{departures.ENV}=off"}
        return
    mounted = None
    if departures.tracefs_root() is None:   # e.g. a machine booted without systemd
        mounted, _ = departures.mount_tracefs()
        if mounted:
            ctx.log(f"  mounted tracefs at {mounted} (for the departure trace)")
    why = departures.missing()
    if why:
        rec["departures"] = {"traced": False, "why": why}
        return
    watched = [(dev, rate) for (_, dev), rate in _watched(ctx)]
    trace = departures.DepartureTrace(
        ctx.run_dir, [d for d, _ in watched], t0, rates=dict(watched),
        bursts={d: htb_burst_bytes(r) for d, r in watched})
    trace.info["machine"] = os.environ.get("BUFFERBLOAT_GUEST_ACCEL") or "host"
    # tracefs is the kernel's, not the namespace's: names may repeat across namespaces
    trace.info["shared_kernel"] = not in_initial_netns()
    if mounted:
        trace.info["mounted_tracefs"] = mounted
    trace.start()
    ctx.departures = trace


def stop_departures(ctx):
    """Stop the trace, write departures.csv and the record's entry (once)."""
    trace, ctx.departures = ctx.departures, None
    if trace is not None:
        ctx.record["departures"] = dict(trace.stop(ctx.writer), traced=True)


def stop_traffic(ctx):
    """Stop every part, the sampler and the departure trace (idempotent)."""
    stop_parts(ctx.parts)
    if ctx.sampler is not None and ctx.sampler.alive():
        ctx.sampler.stop()
    if ctx.prewarmed is not None:
        ctx.prewarmed.end()          # never handed a spec: it exits, or is stopped
    linkreplay.stop(ctx.link_loop, ctx.record)
    ctx.link_loop = None
    if ctx.departures is not None:
        try:
            stop_departures(ctx)
        except Exception as exc:  # noqa: BLE001 - a failed conversion loses only itself
            ctx.record["departures"] = {"traced": False, "why": f"stopping failed: {exc}"}


def finish(ctx, status, error):
    """Step 4: store what was measured (even after a failure or an interruption), close
    the record with its final status; for a run that went well, the metrics (once, from
    the stored series) and the health verdict (from what was collected, never by
    collecting again), saved."""
    writer, rec = ctx.writer, ctx.record
    stop_errors = []
    stop_parts(ctx.parts, stop_errors)
    if stop_errors:       # (a stop a signal interrupted once left the record "running")
        rec["stop_errors"] = stop_errors
    with ctx.phase("collect"):
        try:
            _collect(writer, ctx.parts, ctx.sampler)
        except Exception as exc:  # noqa: BLE001 - the record must still be closed
            rec["collect_error"] = f"{type(exc).__name__}: {exc}"
    rec["timings"] = dict(ctx.net.timings)
    _close_phases(ctx)
    writer.close(status, error)
    if status == "ok":
        # the steady state, metrics and health verdict from what was stored: here, or by
        # the host when the host started this guest command (bufferbloat/run/judge.py)
        t = time.monotonic()
        fields, timings = judge.judge_here_or_on_host(ctx.run_dir, ctx.warmup_s, ctx.log)
        spent = time.monotonic() - t
        rec.update(fields)
        # the phases are the run's own time: a host's judgement counts as metrics here
        # with the wait, its health part as health
        health_s = timings["health"] if fields["judged"]["where"] == "here" else 0.0
        ctx.phases["metrics"] = ctx.phases.get("metrics", 0.0) + spent - health_s
        ctx.phases["health"] = ctx.phases.get("health", 0.0) + health_s
        _close_phases(ctx)
        writer.save()


def _close_phases(ctx):
    """The record's wall time and its phases (``phases_s``): the network's build and
    teardown (Network.timings) with the engine's own, and what no phase covers
    (``other``), so that they add up to ``wall_s``."""
    rec = ctx.record
    rec["wall_s"] = time.monotonic() - ctx.t_wall
    phases = dict(ctx.phases)
    # a kept network's reconfiguration is its point's build; the teardown of a kept
    # network that could not serve it, its teardown
    for key, name in (("build_s", "build"), ("reconfigure_s", "reconfigure"),
                      ("teardown_s", "teardown"), ("kept_teardown_s", "teardown")):
        if key in ctx.net.timings:
            phases[name] = phases.get(name, 0.0) + ctx.net.timings[key]
    phases["other"] = max(0.0, rec["wall_s"] - sum(phases.values()))
    rec["phases_s"] = {k: round(v, 3) for k, v in phases.items()}


def _probe_pair(topo, parts):
    """(src, dst) hosts for the idle RTT probe: the scenario's first RTT probe, else
    its first part with two ends, else the first sender and the receiver."""
    for part in sorted(parts, key=lambda p: not p.probes_rtt):
        pair = part.endpoints()
        if pair:
            return pair
    return topo.senders[0], topo.receiver


def prepare_parts(parts):
    """Prepare every part (e.g. its servers listen), in order."""
    for part in parts:
        part.prepare()


def stop_parts(parts, errors=None):
    """Stop every part, the last started first (idempotent). With ``errors`` (a list),
    a part whose stop raises is listed there ("NAME: Type: message") and the others are
    still stopped: the record is closed whatever a stop does."""
    for part in reversed(parts):
        if errors is None:
            part.stop()
            continue
        try:
            part.stop()
        except Exception as exc:  # noqa: BLE001 - the record must still be closed
            errors.append(f"{part.name}: {type(exc).__name__}: {exc}")


def sampler_died(sampler):
    """What a run that lost its sampler says: its exit status and its log's end."""
    code = sampler.proc.returncode if sampler.proc else "?"
    return f"the sampler died (exit {code}): {sampler.log_text()[-500:]}"


def health_problem(net, parts, sampler):
    """Why the run cannot go on, or None: the sampler or a Mininet host gone, or what a
    traffic part says (a tool that died or exited with an error, a part that failed to
    start). The tools' output stays in raw/ (written by _collect)."""
    if sampler is not None and not sampler.alive():
        return sampler_died(sampler)
    for node in list(getattr(net.net, "hosts", None) or []):
        shell = getattr(node, "shell", None)
        if shell is not None and shell.poll() is not None:
            return f"host {node.name} died (its shell, pid {shell.pid}, exited)"
    return next(filter(None, (part.problem() for part in parts)), None)


def _collect(writer, parts, sampler):
    """Store every part's rows, raw outputs and summary (even after a failure: what was
    measured is kept)."""
    summaries = []
    for part in parts:
        try:
            for name, rows in part.rows().items():
                if rows:
                    writer.add_rows(name, columns_of(name, rows), rows)
            for fname, text in part.raw_outputs().items():
                writer.raw(fname, text)
            summaries += part.summary()
        except Exception as exc:  # noqa: BLE001 - one broken part must not lose the rest
            summaries.append({"name": part.name, "error": repr(exc)})
    writer.record["traffic_results"] = summaries
    if sampler is not None:
        if sampler.alive():
            sampler.stop()
        writer.raw("sampler.log", sampler.log_text())
        writer.record["sampler"] = sampler.stats()
