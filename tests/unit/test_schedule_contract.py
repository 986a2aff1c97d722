"""Every scheduled part starts at the traffic's origin + its start, whatever its kind
(A.5's UDP stream sent at the run's t0 + its start, 2.7-3.0 s before its time,
and every run was judged healthy).

Every kind of the traffic registry is built from a minimal spec on a fake network that
runs nothing: it records, on the monotonic clock, when each command that sends traffic
was launched (an iperf3 client, ping, irtt's client, curl, the page server, a
NetPerfMeter active side plus its flow's first "on") or the time a UDP sender was told
to send (its START_AT). The parts are prepared and started at one origin, as the engine
does (bufferbloat/run/engine.py: the origin waits for a pre-connected part's
``origin_at``), and each start must come at the origin + its offset from the spec: never
early, at most LATE_S late. A kind without a spec here, or a command the fake does not
know how to time, fails the test: a new kind is covered or the test says so."""

import io
import os
import re
import threading
import time

import pytest

from bufferbloat.results.health_record import scheduled_entries
from bufferbloat.traffic import kinds, netperfmeter
from bufferbloat.traffic.base import KINDS, PartContext

DURATION_S = 10.0
#: the parts' start (fraction of the duration): 4 s after the origin, so that a part
#: planted to start 3 s early still starts after the origin (a schedule cannot start a
#: tool before it is itself started) and is seen early
START = 0.4
#: how late a start may come (a thread's wake-up on a loaded 2-core machine)
LATE_S = 0.25
#: how early: the clocks' rounding (START_AT is written to the microsecond) and the
#: 20 ms poll of NetPerfMeter's watcher, which sees its measurement start a poll late
EARLY_S = 0.05
#: a pre-connected NetPerfMeter part's lead (4 s in a run: the sampler starts within it)
NPM_LEAD_S = 1.0

#: how long the fake page server takes to say READY (under TCG its interpreter took
#: ~4 s: started by the part's schedule, it held the first fetch back that long)
SERVER_START_S = 1.0

HOSTS = {"src": "h1", "dst": "h2"}
#: kind -> [(minimal spec, {what starts: offset from the origin, s})]; the offsets are the
#: spec's (start x duration), not the part's: a kind that computes them wrongly fails
CASES = {
    "iperf": [({**HOSTS}, {"iperf3 client": START * DURATION_S})],
    "ping": [({**HOSTS}, {"ping": START * DURATION_S})],
    "irtt": [({"client": "h1", "server": "h2"}, {"irtt client": START * DURATION_S})],
    "udp": [({**HOSTS, "rate_kbit": 500}, {"udp sender": START * DURATION_S})],
    # the page server listens before the clock (prepare); the fetches from the part's
    # start, never held back by the server's start-up (the fake's takes SERVER_START_S)
    "web": [({"client": "h1", "server": "h2"}, {"curl": START * DURATION_S}),
            ({"client": "h1", "server": "h2", "start": 0.0}, {"curl": 0.0})],
    "rrul": [({"a": "h1", "b": "h2"}, {"iperf3 client": START * DURATION_S,
                                        "ping": START * DURATION_S})],
    # at a later start the part launches the tool at its time; at start 0 it is
    # pre-connected (prepare) and its flows start by its own clock at the origin
    "netperfmeter": [({**HOSTS}, {"npm flow 1": START * DURATION_S}),
                     ({**HOSTS, "start": 0.0}, {"npm flow 1": 0.0})],
}


class FakeStdin:
    """A pipe to a tool: records (monotonic s, text) of every write."""

    def __init__(self):
        self.writes, self.closed = [], False

    def write(self, text):
        self.writes.append((time.monotonic(), text))

    def close(self):
        self.closed = True


class SlowReady(io.StringIO):
    """A server's stdout whose READY line comes SERVER_START_S after it is asked for."""

    def __init__(self):
        super().__init__("READY\n")

    def readline(self, *args):
        time.sleep(SERVER_START_S)
        return super().readline(*args)


class FakeProc:
    """A launched command that runs until :meth:`end` (its pid never exists)."""

    pid = 10 ** 7

    def __init__(self, argv, stdout, stdin):
        self.argv, self._ended, self.returncode = argv, threading.Event(), None
        self.stdin = FakeStdin() if stdin is not None else None
        self.stdout = io.StringIO("READY\n") if stdout is not None and not hasattr(
            stdout, "fileno") else None
        if "bufferbloat.webserver" in argv:
            self.stdout = SlowReady()

    def end(self):
        self.returncode = 0
        self._ended.set()

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        self._ended.wait(timeout)
        return self.returncode

    def communicate(self, timeout=None):
        """curl: one fetch, done at once."""
        self.end()
        return "0.001 0.002 0.003 200 100000\n", None


class FakeNet:
    """The network calls of the traffic kinds, recording what was launched and when."""

    class topo:
        ccas = {}

        class bottleneck:
            rate_mbit = 10.0

    def __init__(self):
        self.launched = []     # (monotonic s, argv, FakeProc)
        self.ports = set()

    def ip(self, host):
        return "10.0.0." + host[1:]

    def control_path(self, src, dst, port):
        return None

    def run(self, host, argv, check=True):
        """``ss``: every port a launched command named listens."""
        return "".join(f"LISTEN 0 128 10.0.0.2:{p} 0.0.0.0:*\n" for p in sorted(self.ports))

    def listening_ports(self, host):
        """Every port a launched command named listens."""
        return set(self.ports)

    def popen(self, host, argv, stdout=None, stderr=None, stdin=None, **kw):
        argv = [str(a) for a in argv]
        self.ports |= {int(p) for a in argv for p in re.findall(r"^(?:.*:)?(\d+)$", a)
                       if 0 < int(p) < 65536}
        proc = FakeProc(argv, stdout, stdin)
        if argv[0] == "netperfmeter" and "-control-over-tcp" in argv:
            # an active side: it connects its flows and starts its measurement at once
            ids = re.findall(r":id=(\d+):", " ".join(argv))
            stdout.write("".join(f"Flow #{i}: connecting TCP socket to x okay <sd={i}>\n"
                                 for i in ids) + "Starting measurement ... okay\n")
            stdout.flush()
        self.launched.append((time.monotonic(), argv, proc))
        return proc

    def end_all(self):
        for _, _, proc in self.launched:
            proc.end()


def first_on_s(argv):
    """A NetPerfMeter active side's flows' first "on" after its measurement starts:
    {"npm flow ID": s} (its -tcp FLOWSPECs' first ``onoff`` instant, else 0)."""
    out = {}
    for spec in (argv[i + 1] for i, a in enumerate(argv) if a == "-tcp"):
        onoff = re.search(r"onoff=([0-9.e+-]+)", spec)
        out["npm flow " + re.search(r"id=(\d+)", spec)[1]] = (
            float(onoff[1]) if onoff else 0.0)
    return out


def starts(net):
    """[(what, monotonic s it started)] of every start the fake saw; a command it does
    not know how to time fails the test."""
    out = []
    for t, argv, proc in net.launched:
        cmd = " ".join(argv[:2])
        if argv[0] == "iperf3" and "-c" in argv:
            out.append(("iperf3 client", t))
        elif argv[0] == "ping":
            out.append(("ping", t))
        elif argv[0] == "curl":
            out.append(("curl", t))
        elif cmd == "irtt client":
            out.append(("irtt client", t))
        elif "bufferbloat.traffic.udptool" in argv and "send" in argv:
            told = [float(text.split()[1]) for _, text in proc.stdin.writes
                    if text.startswith("START_AT")]
            out += [("udp sender", at) for at in told]
        elif argv[0] == "netperfmeter" and "-control-over-tcp" in argv:
            out += [(what, t + on) for what, on in first_on_s(argv).items()]
        elif not (argv[0] == "iperf3" and "-s" in argv or cmd == "irtt server"
                  or argv[0] == "netperfmeter" or "bufferbloat.webserver" in argv
                  or "bufferbloat.traffic.udptool" in argv and "recv" in argv):
            pytest.fail(f"the fake network does not know when {argv} starts traffic: "
                        "say so in starts() (servers started before the clock are not "
                        "starts)")
    return out


def build(kind, k, spec, raw_dir):
    """The part of ``kind``'s ``k``-th case on its own fake network."""
    spec = {"kind": kind, "name": f"{kind}{k}", "start": START, "stop": 0.9, **spec}
    kinds.part_class(kind).check_spec(spec)
    os.makedirs(raw_dir, exist_ok=True)
    # the run's t0 comes seconds before the origin (the sampler's start-up, the idle RTT
    # probe: 2.7-3.0 s in A.5's runs): a start against t0 would be early
    ctx = PartContext(net=FakeNet(), duration_s=DURATION_S, t0=time.monotonic() - 3.0,
                      realtime_minus_monotonic=time.time() - time.monotonic(),
                      raw_dir=str(raw_dir))
    return kinds.build(spec, ctx)


def test_every_registered_kind_is_covered():
    """A kind added to the registry needs its case here (no silent skip)."""
    engine = engine_kinds()
    assert set(CASES) == engine, (
        f"kinds without a schedule case: {sorted(engine - set(CASES))}; "
        f"cases of no kind: {sorted(set(CASES) - engine)}")


def engine_kinds():
    """The kinds the engine's own package registers (bufferbloat.traffic.*): a test
    module may register one of its own (tests/kinds/pyflow.py, collected in the same
    session by the host tests), which is that test's to cover."""
    return {k for k, cls in KINDS.items() if cls.__module__.startswith("bufferbloat.traffic.")}


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """Every case's part, built, prepared and started at one origin as the engine does;
    yields [(kind, part, {what: due monotonic s})] once the last one is due."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(netperfmeter, "PRECONNECT_LEAD_S", NPM_LEAD_S)
        # the fake's sockets are no one's: each flow's descriptor is mapped to a port
        mp.setattr(netperfmeter.run, "socket_ports",
                   lambda pid, fds, known=(): {f: (20000 + f, 5201) for f in fds
                                               if f not in known})
        tmp = tmp_path_factory.mktemp("raw")
        built = [(kind, build(kind, k, spec, tmp / f"{kind}{k}"), want)
                 for kind, cases in CASES.items() for k, (spec, want) in enumerate(cases)]
        try:
            yield run_at_one_origin(built)
        finally:
            for _, part, _ in built:
                part.ctx.net.end_all()
            for _, part, _ in built:
                part.stop()


def run_at_one_origin(built):
    """Prepare every part, start them at one origin (after the latest ``origin_at``),
    and return once the last start is due: [(kind, part, {what: due monotonic s})]."""
    for _, part, _ in built:
        part.prepare()
    origin = max([time.monotonic() + 0.2] + [p.origin_at for _, p, _ in built if p.origin_at])
    time.sleep(max(0.0, origin - time.monotonic()))
    for _, part, _ in built:
        part.start(origin)
    last = max(off for _, _, want in built for off in want.values())
    time.sleep(max(0.0, origin + last + LATE_S + 0.3 - time.monotonic()))
    return [(kind, part, {w: origin + off for w, off in want.items()})
            for kind, part, want in built]


def test_every_kind_starts_at_the_origin_plus_its_start(parts):
    """Each part's starts: every one it was due, none early, the first of each at most
    LATE_S late (curl's later fetches come every_s apart, not judged here)."""
    wrong = []
    for kind, part, due in parts:
        seen = starts(part.ctx.net)
        missing = set(due) - {w for w, _ in seen}
        extra = {w for w, _ in seen} - set(due)
        if missing or extra:
            wrong.append(f"{kind} ({part.name}): expected starts {sorted(due)}, saw "
                         f"{sorted({w for w, _ in seen})}")
            continue
        for what, t in seen:
            if t < due[what] - EARLY_S:
                wrong.append(f"{kind} ({part.name}): {what} {due[what] - t:.2f} s early")
        for what in due:
            first = min(t for w, t in seen if w == what)
            if first > due[what] + LATE_S:
                wrong.append(f"{kind} ({part.name}): {what} {first - due[what]:.2f} s late")
    assert not wrong, "\n".join(wrong)


def test_each_tool_records_the_due_time_it_was_started_at(parts):
    """What health judges a start against (``scheduled_s``, run time) is the due time
    the schedule started the tool at: the origin + its offset."""
    for kind, part, _ in parts:
        origin_run = part.scheduled_s
        for tool, at, _ in part.plan:
            assert tool.scheduled_s == pytest.approx(origin_run + at), (kind, tool)


def test_health_judges_every_part_against_its_due_time(parts):
    """Every part leaves at least one entry with a schedule in result.json's
    ``traffic_results`` (what health judges, bufferbloat/results/health.py), due at the
    origin + its start: a part without one would never be judged early or late."""
    for kind, part, due in parts:
        entries = scheduled_entries({"traffic_results": part.summary()})
        assert entries, f"{kind} ({part.name}): no entry with scheduled_s"
        want = {round(t - part.ctx.t0, 3) for t in due.values()}
        for _, e in entries:
            assert round(e["scheduled_s"], 3) in want, (kind, e)
