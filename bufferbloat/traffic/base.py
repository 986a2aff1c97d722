"""The traffic-part interface, its registry, and the helpers every part uses.

A scenario's traffic is a list of specs, each a dict with a ``kind`` (bufferbloat/run/scenario.py).
Each kind is a :class:`TrafficPart` subclass in its own module of this package,
registered under its kind with :func:`register`; :func:`build` makes the part of a spec.
The engine drives parts through this interface only:

* ``prepare()`` before the clock starts (servers that must listen first);
* ``start(origin)``: the part's tools start at ``origin + at`` (their offsets from the
  part's spec) and stop at their scheduled stops, in a thread of the part;
* ``problem()`` while the traffic runs (why the run cannot go on, or None);
* ``wait(timeout_s)`` once the run's time is over (tools that end by themselves), then
  ``stop()``, then ``reported_error()`` (an error a tool reported at its end);
* ``rows()``, ``raw_outputs()``, ``summary()``: what it leaves, for the series, raw/
  and result.json;
* ``sampled_flows()``: its TCP flows for the socket sampler, with the labels their rows
  get (known before the part starts: the sampler writes them as it samples).

A part is made of *tools*: objects with ``start()``, ``stop()`` and usually ``wait()``,
``rows()``, ``raw_outputs()``, ``summary()`` (an iperf3 flow, a ping probe...), usable on
their own (the fidelity tests and benchmarks do). Every ``t`` in their rows is seconds
since the run's ``t0`` (``time.monotonic()``); wall-clock stamps of the tools are
converted with ``realtime_minus_monotonic``.

This module never imports a kind: the package's ``__init__`` imports them, so that they
register.
"""

import threading
import time
from dataclasses import dataclass, field

from bufferbloat.core.errors import ParameterError, UsageError
from bufferbloat.core.params import check_number

#: Spec fields every kind accepts (see :meth:`Scenario.resolve_traffic`).
COMMON_FIELDS = ("kind", "name", "start", "stop", "when")
#: Spec fields that name hosts (checked against the topology by the scenario).
HOST_FIELDS = ("src", "dst", "client", "server", "a", "b")


# ------------------------------------------------------------------ small helpers
def realtime_minus_monotonic():
    """``time.time() - time.monotonic()`` now: adds to a monotonic time to give wall time."""
    return time.time() - time.monotonic()


class Timed:
    """The clock of a tool: t0 and the realtime offset."""

    def _init_clock(self, t0, rmm):
        self.t0 = time.monotonic() if t0 is None else float(t0)
        self.rmm = realtime_minus_monotonic() if rmm is None else float(rmm)

    def run_time(self, realtime_s):
        """Wall-clock seconds -> seconds since t0."""
        return realtime_s - self.rmm - self.t0


#: how often a server's socket is looked for while it starts, s (in this process: a
#: look costs no tool process, net.listening_ports)
LISTEN_POLL_S = 0.005


def wait_listening(net, host, port, timeout_s=10.0):
    """Return once a TCP socket listens on ``host``:``port`` (RuntimeError after
    ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if int(port) in net.listening_ports(host):
            return
        time.sleep(LISTEN_POLL_S)
    raise RuntimeError(f"server on {host}:{port} did not start listening")


def exit_problem(what, proc, expect_running=False):
    """'WHAT exited with code N' if ``proc`` ended with an error (or at all, when it
    should still run), else None."""
    if proc is None:
        return None
    rc = proc.poll()
    if rc is None or (rc == 0 and not expect_running):
        return None
    how = f"was killed by signal {-rc}" if rc < 0 else f"exited with code {rc}"
    return f"{what} {how} (pid {proc.pid})"


def due_s(origin, at_s):
    """When a tool at offset ``at_s`` (s) of the traffic is due: ``origin`` + ``at_s``,
    in the origin's clock (monotonic s for a :class:`Schedule`, run time s for a record's
    ``scheduled_s``). The one place a due time is computed: every kind's tools are started
    there by their part's schedule (never against the run's t0 or a clock of their own:
    A.5's stream once sent at t0 + its start, 2.7-3.0 s early), and health
    judges each start against it."""
    return origin + at_s


class Schedule:
    """Starts tools at offsets from ``t0`` in one thread, and stops them.

    ``add(obj, at_s=0, stop_at_s=None)``: ``obj.start()`` at t0 + at_s, ``obj.stop()`` at
    t0 + stop_at_s (None: left running until :meth:`stop`). :meth:`start` returns at once;
    :meth:`stop` ends the timeline (objects not yet started are never started) and calls
    ``stop()`` of every started object not stopped yet, in reverse order. Errors raised by
    an object's start are kept in ``errors`` [(obj, exception)], not raised in the thread.
    """

    def __init__(self, t0=None):
        self.t0 = time.monotonic() if t0 is None else t0
        self.events = []      # (t_s, seq, action, obj)
        self.started, self.stopped, self.errors = [], [], []
        self._halt = threading.Event()
        self._thread = None
        self._lock = threading.Lock()

    def add(self, obj, at_s=0.0, stop_at_s=None):
        """Schedule ``obj``; returns it."""
        at_s = check_number("at_s", at_s, 0, 86_400)
        self.events.append((at_s, len(self.events), "start", obj))
        if stop_at_s is not None:
            stop_at_s = check_number("stop_at_s", stop_at_s, at_s, 86_400)
            self.events.append((stop_at_s, len(self.events), "stop", obj))
        return obj

    def start(self):
        """Run the timeline in a thread."""
        self._thread = threading.Thread(target=self._run, daemon=True, name="schedule")
        self._thread.start()
        return self

    def _run(self):
        for t_s, _, action, obj in sorted(self.events, key=lambda e: (e[0], e[1])):
            if self._halt.wait(max(0.0, due_s(self.t0, t_s) - time.monotonic())):
                return
            with self._lock:
                if self._halt.is_set():
                    return
                try:
                    if action == "start":
                        obj.start()
                        self.started.append(obj)
                    elif obj in self.started and obj not in self.stopped:
                        self.stopped.append(obj)
                        obj.stop()
                except Exception as e:  # noqa: BLE001 (reported through errors)
                    self.errors.append((obj, e))

    def wait(self, timeout_s=None):
        """Wait until every scheduled event has happened."""
        if self._thread is not None:
            self._thread.join(timeout_s)

    def stop(self):
        """Halt the timeline and stop every running object."""
        self._halt.set()
        with self._lock:
            pending = [o for o in self.started if o not in self.stopped]
            self.stopped.extend(pending)
        if self._thread is not None:
            self._thread.join()
        for obj in reversed(pending):
            try:
                obj.stop()
            except Exception as e:  # noqa: BLE001
                self.errors.append((obj, e))
        return self


# ------------------------------------------------------------------ the run's side
#: The port pools of a run's parts: their first and last ports. Client source ports lie
#: below the kernel's ephemeral range (32768..60999), so that no connection the kernel
#: numbers can hold one, and above the servers' pool.
PORT_POOLS = {"tcp": 5201, "udp": 5600, "tcp_client": 20000}
PORT_POOL_LAST = {"tcp": 19999, "udp": 65535, "tcp_client": 32767}


@dataclass
class PartContext:
    """What the run gives a part to build itself: the running network, the run's
    duration (s; a spec's ``start``/``stop`` are fractions of it), its clock (``t0``,
    monotonic s, and ``realtime_minus_monotonic``), the directory of raw outputs, and
    the port pools (:meth:`ports`)."""

    net: object
    duration_s: float
    t0: float
    realtime_minus_monotonic: float
    raw_dir: str | None = None
    #: whether the run's sampler process started ahead and waits for its spec
    #: (bufferbloat.measure.sampler.Prewarmed): a part that connects its flows before
    #: the origin may leave it less time (NetPerfMeter's lead)
    sampler_warm: bool = False
    #: first port of each pool; parts take ports in the order they are built
    port_base: dict = field(default_factory=lambda: dict(PORT_POOLS))
    _next: dict = field(default_factory=dict)

    @property
    def clock(self):
        """The keyword arguments of a tool's clock (t0, realtime_minus_monotonic)."""
        return {"t0": self.t0, "realtime_minus_monotonic": self.realtime_minus_monotonic}

    def ports(self, pool, n=1):
        """The first of ``n`` consecutive free ports of ``pool`` ('tcp': iperf3 servers,
        'udp': UDP receivers, 'tcp_client': TCP source ports a client binds)."""
        first = self._next.get(pool, self.port_base[pool])
        if first + n - 1 > PORT_POOL_LAST[pool]:
            raise UsageError(f"the traffic needs more {pool} ports than "
                             f"{self.port_base[pool]}..{PORT_POOL_LAST[pool]} holds")
        self._next[pool] = first + n
        return first


class TrafficPart:
    """One traffic spec of a run (see the module docstring for the life of a part).

    A kind declares ``kind`` (set by :func:`register`), ``params`` (the spec fields it
    accepts, as :class:`~bufferbloat.core.params.Param`; values of scalar kinds are checked
    by :meth:`check_spec` before anything is built), and implements :meth:`tools` (its
    tools with their start and stop offsets) and :meth:`rows`. The defaults here drive
    the tools: override what a kind does differently.
    """

    kind = ""
    params = ()
    #: a ping-like part: the idle RTT probe prefers its path
    probes_rtt = False
    #: capabilities (bufferbloat.net.capabilities rows: tools, kernel features) the kind needs
    #: beyond the network's; the run refuses to start without them
    needs = ()
    #: the monotonic time this part's schedule must start at, or None: the engine's
    #: origin (offset 0 of every part) waits for the latest one given. A part that
    #: connects its flows ahead in :meth:`prepare` (NetPerfMeter) sets it there
    origin_at = None
    #: the flows the sampler follows are known (labelled) only once :meth:`prepare` has
    #: run (NetPerfMeter's pre-connected sockets): the engine starts the sampler after it
    flows_known_after_prepare = False

    def __init__(self, spec, ctx):
        self.spec, self.ctx = spec, ctx
        self.name = spec["name"]
        self.start_s = spec["start"] * ctx.duration_s
        self.stop_s = spec["stop"] * ctx.duration_s
        self.scheduled_s = None        # the run time of offset 0 (see start())
        self._schedule = None
        self.plan = list(self.tools())

    # -- declaration
    @classmethod
    def field_names(cls):
        """Every spec field a part of this kind accepts."""
        return set(COMMON_FIELDS) | {p.name for p in cls.params}

    @classmethod
    def check_spec(cls, spec, where="", resolved=True):
        """Raise UsageError for a field this kind does not accept, or a value out of its
        range (scalar fields). Before the spec is ``resolved`` (knob references such as
        ``"$flows"``, ``"bottleneck"`` rates), text in a number field is left for then."""
        unknown = set(spec) - cls.field_names()
        if unknown:
            raise UsageError(f"{where}{cls.kind} traffic has unknown fields "
                             f"{sorted(unknown)} (allowed: {sorted(cls.field_names())})")
        for p in cls.params:
            value = spec.get(p.name)
            if (value is None or p.kind not in (int, float, str, bool)
                    or (not resolved and isinstance(value, str)
                        and (p.kind is not str or value.startswith("$")))):
                continue
            try:
                p.coerce(value)
            except ParameterError as exc:
                raise UsageError(f"{where}traffic {spec.get('name', cls.kind)}: {exc}") \
                    from None

    def tools(self):
        """[(tool, at_s, stop_at_s or None)]: offsets from the traffic's origin."""
        raise NotImplementedError

    def flow_starts(self):
        """(count, length_s, [offset_s of each flow]): the spec's ``count`` flows (default
        1) start uniformly within ``stagger_s`` (at most 90 % of the part's length)."""
        count = int(self.spec.get("count", 1))
        length = self.stop_s - self.start_s
        stagger = min(float(self.spec.get("stagger_s", 0.0)), 0.9 * length)
        return count, length, [stagger * i / count for i in range(count)]

    # -- running
    def prepare(self):
        """Before the clock starts (default: nothing)."""

    def endpoints(self):
        """(src, dst) hosts of the part's path, or None (the idle RTT probe's choice)."""
        for a, b in (("src", "dst"), ("a", "b"), ("client", "server")):
            if self.spec.get(a) and self.spec.get(b):
                return self.spec[a], self.spec[b]
        return None

    def start(self, origin):
        """Start the part's timeline at ``origin`` (monotonic s); returns at once. Each
        tool is started at, and records as its ``scheduled_s`` (run time), its due time
        (:func:`due_s`: the origin + its offset)."""
        self.scheduled_s = origin - self.ctx.t0
        self._schedule = Schedule(origin)
        for tool, at, stop in self.plan:
            self._schedule.add(tool, at, stop)
            tool.scheduled_s = due_s(self.scheduled_s, at)
        self._schedule.start()

    def waited(self):
        """The tools that end by themselves (:meth:`wait` waits for them)."""
        return [tool for tool, _, _ in self.plan if hasattr(tool, "wait")]

    def wait(self, timeout_s):
        """Give the tools that end by themselves up to ``timeout_s`` in all; what still
        runs then is ended by :meth:`stop` (recorded, not a failure)."""
        end = time.monotonic() + timeout_s
        for tool in self.waited():
            try:
                tool.wait(timeout_s=max(0.1, end - time.monotonic()))
            except Exception:  # noqa: BLE001 - stop() ends it; its record is kept
                pass

    def stop(self):
        """Halt the timeline and stop every tool still running (idempotent)."""
        if self._schedule is not None:
            self._schedule.stop()

    def problem(self):
        """Why the run cannot go on because of this part, or None."""
        if self._schedule is not None and self._schedule.errors:
            tool, exc = self._schedule.errors[0]
            return f"{getattr(tool, 'name', tool)} failed to start: {exc}"
        for tool, _, _ in self.plan:
            found = self.tool_problem(tool)
            if found:
                return found
        return None

    def tool_problem(self, tool):
        """Why ``tool`` ended the run, or None (default: nothing to check)."""
        return None

    def reported_error(self):
        """An error a tool reported at its end that ends the run as failed, or None
        (default: none)."""
        return None

    # -- what it leaves
    def rows(self):
        """{series name: rows (dicts with exactly that series' columns, or a
        :class:`~bufferbloat.core.series.CellRows` of their cells)}."""
        raise NotImplementedError

    def raw_outputs(self):
        """{filename: text}: every tool's own output, for raw/."""
        out = {}
        for tool, _, _ in self.plan:
            out.update(tool.raw_outputs() or {})
        return out

    def summary(self):
        """result.json's ``traffic_results`` entries of the part: one per tool, with
        ``name`` and ``kind`` (the tool's class); every entry that records when it began
        (``t_start`` or ``t_launch``: the top entry and its nested ``flows``) with the run
        time it was due, ``scheduled_s``, so that health judges its start."""
        out = []
        for tool, _, _ in self.plan:
            summary = (tool.summary() if hasattr(tool, "summary") else {}) or {}
            entry = {"name": getattr(tool, "name", ""), "kind": type(tool).__name__,
                     **summary}
            if getattr(tool, "scheduled_s", None) is not None:
                for flow in [entry] + list(summary.get("flows") or []):
                    if isinstance(flow, dict) and ("t_start" in flow or "t_launch" in flow):
                        flow["scheduled_s"] = tool.scheduled_s
            out.append(entry)
        return out

    def sampled_flows(self):
        """The sampler's flow specs of the part's TCP flows ({host, dports|sports,
        label, labels}, see :class:`~bufferbloat.measure.sampler.Sampler`): their labels are
        known before the part starts, so that tcp.csv is written labelled."""
        return []


#: kind -> TrafficPart subclass
KINDS = {}


def register(kind):
    """Class decorator: register a TrafficPart subclass under ``kind``."""
    def deco(cls):
        if kind in KINDS and KINDS[kind] is not cls:
            raise ValueError(f"traffic kind {kind!r} is already registered "
                             f"({KINDS[kind].__module__}.{KINDS[kind].__name__})")
        cls.kind = kind
        KINDS[kind] = cls
        return cls
    return deco
