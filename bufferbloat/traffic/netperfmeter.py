"""NetPerfMeter flows (the tool study D generated its traffic with): many TCP flows (in
active processes of at most :data:`FLOWS_PER_PROCESS`), on-off on one connection,
frame-rate x frame-size paced streams, per-flow start times, CCAs and socket buffers;
per-message one-way delay from its vector files.

The passive side (``netperfmeter PORT``) runs on the far host ``dst``, the active side on
the near host ``src`` with one ``-tcp FLOWSPEC`` per flow and ``-control-over-tcp`` (more
than :data:`FLOWS_PER_PROCESS` flows: several active processes, their files
``NAME-pK-...``, K = 2, 3..., beside the first one's ``NAME-...``).
NetPerfMeter 1.9.4's passive side always opens an SCTP control socket too, so the kernel
must have SCTP (the project VM's has; this machine kind's host kernel has not:
``bufferbloat check`` says so). Its outputs (``-vector``/``-scalar``, plain text, both
nodes' results, which the active side downloads at the end) are written into the run's
raw/ directory as they are and parsed from there. The control connection (the passive
side's port + 1: the flows' set-up, then that download) goes over a control path beside
the emulated links (:mod:`bufferbloat.net.control`), as a testbed's control network
would carry it; the data connections go through the emulated path:

* ``NAME-active.vec`` / ``NAME-passive.vec``: per node, per interval (~1 s) and flow,
  cumulative and per-interval bytes, packets and frames ``Sent``, ``Received``,
  ``Lost``, stamped with the wall clock (gettimeofday, microseconds);
* ``NAME-<node>-<flow id, 8 hex>-<stream, 4 hex>.vec``: per flow, one line per message
  its receiver got, with the message's one-way delay (receive time minus the sender's
  timestamp in the message, both gettimeofday: Mininet hosts share one clock);
* ``NAME-<node>.sca``: per flow and node, first/last transmission and reception and
  byte, packet and frame counts.

Series: ``npm.csv`` (per flow, node and interval: bytes sent/received/lost, see
:data:`COLUMNS`), ``npm_msg.csv`` (per message received: flow, seq, t_sent, t_recv,
size_bytes, see :data:`MSG_COLUMNS`; one-way delay = t_recv - t_sent). The TCP sockets
are sampled like iperf3's (tcp.csv), each labelled with its flow's name: the active
side prints the socket descriptor of each flow's connection, and its 4-tuple is read
from /proc while the process runs.
"""

import os
import re
import subprocess
import tempfile
import threading
import time

from bufferbloat.core.errors import UsageError
from bufferbloat.core.params import MIN_RATE_MBIT, Param, check_number
from bufferbloat.core.series import SERIES_COLUMNS, CellRows, float_cell
from bufferbloat.core.signals import stop_process
from bufferbloat.traffic.base import (
    Timed,
    TrafficPart,
    due_s,
    exit_problem,
    register,
    wait_listening,
)

#: npm.csv: per flow, node (active/passive) and interval of that node's summary vector.
COLUMNS = tuple(SERIES_COLUMNS["npm"])
#: npm_msg.csv: one row per message a flow's receiver got (times in run time, s).
MSG_COLUMNS = tuple(SERIES_COLUMNS["npm_msg"])
#: NetPerfMeter's largest message (its frames are cut into messages of at most this)
MAX_MSG_BYTES = 16000
#: largest frame (the tool cuts a frame into messages of at most MAX_MSG_BYTES, each
#: stamped with the frame's send time)
MAX_FRAME_BYTES = 1 << 20
#: smallest frame: a message carries a 48-byte header (NetPerfMeterDataMessage: 4+4+8+
#: 2+2+4+8+8+8 B, docs/D_DELAY.md)
MIN_FRAME_BYTES = 64
#: messages not received within this long after the last one count as lost by the tool
#: (its default, 5 s, is shorter than a deep buffer's delay)
DEFRAG_TIMEOUT_MS = 600_000
#: the tool's own runtime beyond the part's stop (which ends it first)
RUNTIME_SLACK_S = 5.0
#: A part whose flows start with the traffic (its start 0) launches the tool before the
#: clock's origin (:meth:`NetPerfMeterPart.prepare`): it connects every flow and exchanges
#: its configuration over the control connection first, one flow after the other (~6
#: round trips per flow while the control connection crossed the emulated path: 40 flows
#: over C's 40 ms path took 10.5 s in the TCG VM; the data handshake's alone now, the
#: control path being beside the emulated links, bufferbloat/net/control.py; so
#: flows launched at the origin began 10.5 s late and the run lost a third of its
#: traffic). Its flows then wait this long after the measurement starts, and the run's
#: origin is set there (:attr:`NetPerfMeterPart.origin_at`): the sampler starts in
#: between (1-2 s in the TCG VM).
PRECONNECT_LEAD_S = 4.0
#: flows per active process (:class:`NetPerfMeterRun`): the passive side takes a new
#: data connection's identification only at its receive thread's next 250 ms poll
#: timeout (NetPerfMeter 1.9.4, flow.cc FlowManager::run: nothing wakes it), and an
#: active process sets its flows up one after the other, so one process of N flows
#: needs N ticks before its measurement starts (0.26 s a flow measured in the TCG VM:
#: 5.7 s at 20 flows, 21 s at 80). Several active processes served by the one passive
#: side are identified in the same ticks: N flows take as many ticks as the largest
#: process has flows, at most this (80 flows: 10 ticks, not 80; 40 flows prepared in
#: 4.1 s, not 10.9).
FLOWS_PER_PROCESS = 10
#: the environment variable that sets another (e.g. 200: every flow in one process, the
#: way before 2026-11-28, for bench/bench_overhead.py --npm-per-process to compare)
FLOWS_PER_PROCESS_ENV = "BUFFERBLOAT_NPM_FLOWS_PER_PROCESS"
#: the longest the tool may take to connect its flows before the measurement starts
PRECONNECT_TIMEOUT_S = 180.0
#: the tool's line when its measurement starts (after it connected every flow)
MEASUREMENT_STARTED = re.compile(r"^Starting measurement \.\.\..*okay", re.M)
#: grace after SIGINT for the active side to stop the measurement and download the
#: passive side's results (a 60 s bulk flow's messages, ~7 MB at 15 Mbit/s: ~4 s when it
#: went over the emulated path's reverse direction; over the control path now)
STOP_GRACE_S = 60.0


# ----------------------------------------------------------------------------- parsers

def _fields(line):
    """Whitespace-separated fields of a vector line; quoted strings kept whole."""
    return [a if a else b for a, b in re.findall(r'"([^"]*)"|(\S+)', line)]


def parse_summary_vector(text):
    """A node's summary vector -> [{abs_time_us, rel_time_s, interval_s, flow_id,
    description, action, abs_bytes, abs_packets, abs_frames, rel_bytes, rel_packets,
    rel_frames}] (``flow_id`` -1 is the node's total; ``action`` Sent, Received or Lost).
    The first line is the header; each data line starts with its line number."""
    out = []
    for line in text.splitlines()[1:]:
        f = _fields(line)
        if len(f) < 14:
            continue
        out.append({"abs_time_us": int(f[1]), "rel_time_s": float(f[2]),
                    "interval_s": float(f[3]), "flow_id": int(f[4]), "description": f[5],
                    "action": f[7], "abs_bytes": int(f[8]), "abs_packets": int(f[9]),
                    "abs_frames": int(f[10]), "rel_bytes": int(f[11]),
                    "rel_packets": int(f[12]), "rel_frames": int(f[13])})
    return out


def parse_flow_vector(text):
    """A flow's vector (one line per received message) -> [{abs_time_us, rel_time_s,
    seq, abs_bytes, rel_bytes, delay_ms, delay_diff_ms, jitter_ms}]."""
    out = []
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 13:
            continue
        out.append({"abs_time_us": int(f[1]), "rel_time_s": float(f[2]), "seq": int(f[3]),
                    "abs_bytes": int(f[4]), "rel_bytes": int(f[7]),
                    "delay_ms": float(f[10]), "delay_diff_ms": float(f[11]),
                    "jitter_ms": float(f[12])})
    return out


def message_cells(text, flow, rmm, t0):
    """A flow's vector -> npm_msg.csv's rows (:class:`CellRows`: flow, seq, t_sent,
    t_recv, size_bytes, abs_bytes as their cells) in one pass: t_recv = the wall-clock
    receive stamp (us) / 1e6 - ``rmm`` - ``t0`` (run time, s), t_sent = t_recv - the
    message's one-way delay, both rounded to the microsecond. The same values, bit for
    bit, as :func:`parse_flow_vector`'s rows converted and formatted cell by cell
    (tests/unit/test_netperfmeter.py), at half the cost: 74,478 messages of a 60 s
    15 Mbit/s flow, 0.8 -> 0.4 s on the host, ~8 -> ~4 s under TCG."""
    out = CellRows()
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 13:
            continue
        t_recv = int(f[1]) / 1e6 - rmm - t0
        out.append((flow, str(int(f[3])), float_cell(round(t_recv - float(f[10]) / 1e3, 6)),
                    float_cell(round(t_recv, 6)), str(int(f[7])), str(int(f[4]))))
    return out


def message_rows(cells):
    """:func:`message_cells`' rows read back as dicts (seq and sizes int, times float)."""
    return [{"flow": c[0], "seq": int(c[1]), "t_sent": float(c[2]), "t_recv": float(c[3]),
             "size_bytes": int(c[4]), "abs_bytes": int(c[5])} for c in cells]


def parse_scalars(text):
    """A scalar file -> {object: {name: value}} (``scalar "OBJ" "NAME" VALUE`` lines;
    e.g. {"netPerfMeter.active.flow[1]": {"Transmitted Bytes": 123.0, ...}})."""
    out = {}
    for line in text.splitlines():
        m = re.match(r'\s*scalar\s+"([^"]*)"\s+"([^"]*)"\s+(\S+)', line)
        if m:
            out.setdefault(m[1], {})[m[2]] = float(m[3])
    return out


def flow_scalars(scalars, node):
    """{flow id: {name: value}} of one node's ``netPerfMeter.NODE.flow[ID]`` objects."""
    out = {}
    for obj, values in scalars.items():
        m = re.fullmatch(rf"netPerfMeter\.{node}\.flow\[(\d+)\]", obj)
        if m:
            out[int(m[1])] = values
    return out


def parse_connections(text):
    """{flow id: socket descriptor} from the active side's status output
    (``Flow #N: connecting TCP socket to ... okay <sd=FD>``)."""
    out = {}
    for m in re.finditer(r"Flow #(\d+): connecting .*?<sd=(\d+)>", text):
        out[int(m[1])] = int(m[2])
    return out


def vector_files(names, pattern_stem):
    """{(node, flow id): filename} of the per-flow vector files among ``names``
    (``STEM-NODE-XXXXXXXX-YYYY.vec``, flow id and stream id in hex)."""
    out = {}
    rx = re.compile(re.escape(pattern_stem) + r"-(active|passive)-([0-9a-f]{8})-([0-9a-f]{4})"
                    r"\.vec$")
    for name in names:
        m = rx.match(name)
        if m:
            out[(m[1], int(m[2], 16))] = name
    return out


# ----------------------------------------------------------------------------- flows

def frame_rate(rate_mbit, frame_bytes):
    """Frames per second that carry ``rate_mbit`` (application payload) in frames of
    ``frame_bytes``."""
    return rate_mbit * 1e6 / 8 / frame_bytes


def onoff_increments(instants):
    """NetPerfMeter's ``onoff=`` list for absolute on/off ``instants`` (s): the tool (1.9.4
    and later) adds each value to the previous event's time (flow.cc: TimeOffset +=
    value), so the list is the first instant and then the differences; the captured
    fixtures show it (``onoff=2,3``: on at 2 s, off at 5 s)."""
    out, prev = [], 0.0
    for t in instants:
        out.append(t - prev)
        prev = t
    return out


def onoff_times(length_s, on_s, off_s, start_s=0.0):
    """Absolute on/off instants (s since the measurement start) of a flow on ``on_s``,
    off ``off_s``, from ``start_s`` until ``length_s``: on at start, off at start + on,
    on again at start + on + off, ... (the last instant before the end)."""
    out, t = [], start_s
    while t < length_s:
        out.append(t)
        if t + on_s >= length_s:
            break
        out.append(t + on_s)
        t += on_s + off_s
    return out


class NpmFlow:
    """One flow of a NetPerfMeter process: ``flow_id`` (1..), ``name`` (its label: no
    spaces, no ':'), ``direction`` 'up' (active -> passive) or 'down', ``rate_mbit``
    (None: saturated), ``frame_bytes``, ``onoff`` (on, off, on... instants, s after the
    measurement's start, increasing; None: on for the whole measurement), ``cca``,
    ``sndbuf_bytes``/``rcvbuf_bytes`` (0: the kernel's autotuning)."""

    def __init__(self, flow_id, name, direction="up", rate_mbit=None, frame_bytes=1448,
                 onoff=None, cca=None, sndbuf_bytes=0, rcvbuf_bytes=0):
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise UsageError(f"netperfmeter flow name {name!r}: letters, digits, _ . - only")
        if direction not in ("up", "down"):
            raise UsageError(f"netperfmeter flow {name}: direction {direction!r} "
                             "(allowed: up, down)")
        self.flow_id, self.name, self.direction = int(flow_id), name, direction
        self.rate_mbit = None if rate_mbit is None else check_number(
            "rate_mbit", rate_mbit, MIN_RATE_MBIT, 100_000)
        frame = check_number("frame_bytes", frame_bytes, MIN_FRAME_BYTES, MAX_FRAME_BYTES,
                             int)
        # the tool sends every message of a frame at full message size (transfer.cc: the
        # last chunk is not cut to what remains: 35 000 B frames in 16 000 B messages went
        # out as 48 000 B, measured in the VM): a frame is n equal messages
        self.messages = -(-frame // MAX_MSG_BYTES)
        self.msg_bytes = -(-frame // self.messages)
        self.frame_bytes = self.messages * self.msg_bytes
        self.onoff = None if onoff is None else [float(x) for x in onoff]
        if self.onoff is not None and (not self.onoff or self.onoff[0] < 0 or any(
                b <= a for a, b in zip(self.onoff, self.onoff[1:]))):
            raise UsageError(f"netperfmeter flow {name}: on/off instants {onoff!r} "
                             "(allowed: increasing, from 0)")
        self.cca = cca
        self.sndbuf_bytes = int(sndbuf_bytes or 0)
        self.rcvbuf_bytes = int(rcvbuf_bytes or 0)

    @property
    def start_s(self):
        """When the flow first sends, s after the measurement start."""
        return self.onoff[0] if self.onoff else 0.0

    def spec(self, lead_s=0.0):
        """The FLOWSPEC argument: outgoing rate:size:incoming rate:size:options; with
        ``lead_s`` > 0 the flow's instants come that much later (its first "on" at least
        there: a flow the measurement would start at once waits for it)."""
        rate = "const0" if self.rate_mbit is None else \
            f"const{frame_rate(self.rate_mbit, self.frame_bytes):.6g}"
        data = [rate, f"const{self.frame_bytes}"]
        none = ["const0", "const0"]
        parts = data + none if self.direction == "up" else none + data
        parts += [f"id={self.flow_id}", f"description={self.name}",
                  f"maxmsgsize={self.msg_bytes}",
                  f"defragtimeout={DEFRAG_TIMEOUT_MS}",
                  f"sndbuf={self.sndbuf_bytes}", f"rcvbuf={self.rcvbuf_bytes}"]
        if self.cca:
            parts.append(f"cc={self.cca}")
        onoff = self.onoff
        if lead_s > 0:
            onoff = [x + lead_s for x in (self.onoff or [0.0])]
        if onoff is not None:
            parts.append("onoff=" + ",".join(f"{x:.6g}" for x in onoff_increments(onoff)))
        return ":".join(parts)


class _Active:
    """One active process of a :class:`NetPerfMeterRun`: its ``flows``, output ``stem``,
    process, output files, watcher, and when it launched, saw its measurement start and
    ended (monotonic)."""

    def __init__(self, flows, stem):
        self.flows, self.stem = flows, stem
        self.proc = self.aout = self.aerr = self.watcher = None
        self.launched_mono = self.seen_mono = self.exit_mono = None
        self.measuring = threading.Event()
        self.stdout = self.stderr = ""


def flows_per_process():
    """Flows per active process: :data:`FLOWS_PER_PROCESS`, or the environment's
    :data:`FLOWS_PER_PROCESS_ENV` (UsageError unless a whole number 1-200)."""
    raw = os.environ.get(FLOWS_PER_PROCESS_ENV, "").strip()
    if not raw:
        return FLOWS_PER_PROCESS
    if not re.fullmatch(r"[0-9]{1,3}", raw) or not 1 <= int(raw) <= 200:
        raise UsageError(f"invalid value for {FLOWS_PER_PROCESS_ENV}: {raw!r} (allowed: a "
                         "whole number of flows per NetPerfMeter process, 1-200)")
    return int(raw)


def flow_groups(flows, per_process):
    """``flows`` cut into consecutive groups of at most ``per_process``, as even as the
    count allows (45 flows at 10 a process: 9, 9, 9, 9, 9; not 10, 10, 10, 10, 5)."""
    flows = list(flows)
    n = max(1, -(-len(flows) // per_process))
    size, extra = divmod(len(flows), n)
    out, i = [], 0
    for g in range(n):
        k = size + (1 if g < extra else 0)
        out.append(flows[i:i + k])
        i += k
    return [g for g in out if g]


class NetPerfMeterRun(Timed):
    """One NetPerfMeter measurement: the passive side on ``dst`` (:meth:`prepare`), the
    active side on ``src`` with ``flows`` (:class:`NpmFlow`) for ``runtime_s``, in
    groups of at most ``per_process`` flows, one active process each, all served by the
    one passive side (:data:`FLOWS_PER_PROCESS`: the tool sets its flows up one 250 ms
    tick at a time, per passive side and in parallel across active sides).

    ``out_dir``: where the tool writes its vector and scalar files (the run's raw/;
    default a temporary directory, removed by :meth:`cleanup`); ``stem``: their name
    stem (the first process's; the others' ``STEM-pK``, K = 2, 3...). :meth:`start`
    returns at once; :meth:`wait` waits for the measurement to end by itself;
    :meth:`stop` ends it early (SIGINT: the tool stops its flows and downloads the
    passive side's results) and every process."""

    def __init__(self, net, src, dst, port, flows, runtime_s, *, name, out_dir=None,
                 t0=None, realtime_minus_monotonic=None, per_process=None):
        self.net, self.src, self.dst, self.port = net, src, dst, int(port)
        #: every flow's instants come this much later than its own (a pre-connected
        #: start, :meth:`preconnect`); 0: the flows' instants as they are
        self.lead_s = 0.0
        #: monotonic time the last process's measurement was seen to start (by the
        #: watchers: set by :meth:`preconnect`, else once the processes end)
        self.measurement_seen_mono = None
        self.flows = list(flows)
        self.runtime_s = check_number("runtime_s", runtime_s, 0, 86_400, lo_open=True)
        self.name = name
        self._init_clock(t0, realtime_minus_monotonic)
        self._own_dir = out_dir is None
        # absolute: the tool runs with this directory as its cwd, and a run's raw/ is
        # often relative (the default --out results)
        self.out_dir = os.path.abspath(out_dir or tempfile.mkdtemp(prefix="npm-"))
        self.stem = re.sub(r"[^A-Za-z0-9_.-]", "_", name) + "-npm"
        per = flows_per_process() if per_process is None else int(per_process)
        self.actives = [_Active(group, self.stem if k == 0 else f"{self.stem}-p{k + 1}")
                        for k, group in enumerate(flow_groups(self.flows, max(1, per)))]
        self.passive = None
        #: the run time the part's timeline started this tool at (TrafficPart.start);
        #: None while it has not (a run interrupted while the flows connect)
        self.scheduled_s = None
        self.launched_mono = None
        self.sockets = {}          # flow id -> (local port, remote port)
        self._sockets_lock = threading.Lock()
        self._lock = threading.Lock()
        self._stop_lock = threading.Lock()
        self._stopped = False
        self._finished = False
        self.stdout = self.stderr = self.passive_out = ""
        self.control = None        # the control connection's path (prepare)

    @property
    def active(self):
        """The first active process (the only one of a run of at most
        :data:`FLOWS_PER_PROCESS` flows)."""
        return self.actives[0].proc

    def _launched(self, g):
        """When process ``g`` launched (monotonic s), else the run's first launch."""
        return g.launched_mono if g.launched_mono is not None else self.launched_mono

    # ------------------------------------------------------------ running
    def active_args(self, group=0):
        """An active process's argument list (without the namespace prefix): the first
        one's, or ``group``'s (0, 1...)."""
        g = self.actives[group]
        base = os.path.join(self.out_dir, g.stem)
        args = ["netperfmeter", f"{self.net.ip(self.dst)}:{self.port}", "-control-over-tcp",
                f"-runtime={self.runtime_s:.6g}", f"-vector={base}.vec",
                f"-scalar={base}.sca", f"-config={base}.config",
                f"-activenodename={self.src}", f"-passivenodename={self.dst}"]
        for flow in g.flows:
            args += ["-tcp", flow.spec(self.lead_s)]
        return args

    def prepare(self):
        """Send the control connection (port + 1) over a control path beside the emulated
        links (:mod:`bufferbloat.net.control`: the flows' set-up and the results' upload
        are not what is measured), start the passive side on dst and wait until it
        listens."""
        self.control = self.net.control_path(self.src, self.dst, self.port + 1)
        self._pout = tempfile.TemporaryFile(mode="w+")
        # its cwd: the out dir (the passive side writes nothing the active side does not
        # download, but any file it makes stays with the run's)
        self.passive = self.net.popen(self.dst, ["netperfmeter", self.port],
                                      stdout=self._pout, stderr=subprocess.STDOUT,
                                      cwd=self.out_dir)
        wait_listening(self.net, self.dst, self.port)

    def preconnect(self, lead_s, timeout_s=PRECONNECT_TIMEOUT_S):
        """Start the active side now with every flow ``lead_s`` later than its own
        instants, and return once every process's measurement has started (its flows
        connected): the monotonic time from which the flows' own instants count (the
        last process's measurement start + ``lead_s``; the processes set their flows up
        in the same ticks of the passive side, a process now and then a tick late, and
        start within a tick or two of each other: 0.17 s measured at 40 flows, 0.27-0.49
        s at 60, recorded in :meth:`summary`; an earlier process's flows start that much
        before the origin, their lateness negative). RuntimeError when a process ends or they
        take longer than ``timeout_s`` to connect."""
        self.lead_s = float(lead_s)
        self.start()
        deadline = time.monotonic() + timeout_s
        # each watcher reads its process's output: it sets its event once the
        # measurement has started, and has mapped every flow's socket by then (the
        # sampler then labels each flow's rows from its first sample); every process is
        # watched on every round, so one that dies is seen at once
        while True:
            waiting = [g for g in self.actives if not g.measuring.is_set()]
            if not waiting:
                break
            for g in waiting:
                if g.proc is None or (g.proc.poll() is not None and not g.measuring.is_set()):
                    raise RuntimeError(f"netperfmeter {self.name}: the active side ended "
                                       f"before its measurement started (raw/{g.stem}"
                                       ".stdout.txt)")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"netperfmeter {self.name}: its {len(self.flows)} flows did not connect "
                    f"within {timeout_s:g} s (still connecting: "
                    + ", ".join(f"raw/{g.stem}.stdout.txt" for g in waiting) + ")")
            waiting[0].measuring.wait(0.05)
        self.measurement_seen_mono = max(g.seen_mono for g in self.actives)
        return self.measurement_seen_mono + self.lead_s

    def start(self):
        """Start the active side (its flows connect, then the measurement begins); a
        no-op once started (:meth:`preconnect`)."""
        if self.actives[0].proc is not None:
            return self
        if self.passive is None:
            self.prepare()
        for k, g in enumerate(self.actives):
            g.aout = open(os.path.join(self.out_dir, f"{g.stem}.stdout.txt"), "w+")
            g.aerr = tempfile.TemporaryFile(mode="w+")
            with self._lock:
                if self._stopped:
                    return self
                g.launched_mono = time.monotonic()
                if self.launched_mono is None:
                    self.launched_mono = g.launched_mono
                g.proc = self.net.popen(self.src, self.active_args(k), stdout=g.aout,
                                        stderr=g.aerr, cwd=self.out_dir)
            g.watcher = threading.Thread(target=self._watch, args=(g,), daemon=True,
                                         name=f"npm-watch-{g.stem}")
            g.watcher.start()
        return self

    def _watch(self, g):
        """Read one process's output while it runs: map each of its flows' socket
        descriptors (it prints them as the flows connect) to its TCP ports, from
        /proc/PID/fd and /proc/PID/net/tcp (the active side's namespace), and note when
        the measurement starts (``seen_mono``, the event :meth:`preconnect` waits on),
        set once the sockets are mapped (or given up on, after 10 s more)."""
        proc, want = g.proc, {f.flow_id for f in g.flows}
        deadline, seen, known = time.monotonic() + PRECONNECT_TIMEOUT_S, None, set()
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                with open(g.aout.name) as f:
                    text = f.read()
                with self._sockets_lock:    # one watcher per process updates it
                    known = set(self.sockets)
                if not want <= known:
                    found = socket_ports(proc.pid, parse_connections(text), known)
                    with self._sockets_lock:
                        self.sockets.update(found)
                        known = set(self.sockets)
                if seen is None and MEASUREMENT_STARTED.search(text):
                    seen = time.monotonic()
            except OSError:
                pass
            if seen is not None and (want <= known or time.monotonic() > seen + 10.0):
                g.seen_mono = seen
                g.measuring.set()
                break
            time.sleep(0.02)
        proc.wait()
        g.exit_mono = time.monotonic()

    def wait(self, timeout_s=None):
        """Wait for the active side to end by itself (its runtime, then the download)."""
        if self.actives[0].proc is None:
            return
        try:
            deadline = time.monotonic() + (timeout_s or self.runtime_s + 60)
            for g in self.actives:
                if g.proc is not None:
                    g.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        finally:
            self.stop()

    def stop(self):
        """End the measurement (SIGINT to every active process, then by PID after
        STOP_GRACE_S) and the passive side; read the outputs. Idempotent, and safe from
        two threads (the part's schedule and the run's teardown)."""
        with self._stop_lock:
            self._stop()

    def _stop(self):
        with self._lock:
            self._stopped = True
        running = [g.proc for g in self.actives
                   if g.proc is not None and g.proc.poll() is None]
        for proc in running:        # all at once: each stops its flows and downloads
            try:
                os.kill(proc.pid, 2)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + STOP_GRACE_S
        errors = []
        try:
            for proc in running:      # each one ended, whatever ending another one does
                try:
                    try:
                        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        pass
                    stop_process(proc)
                except Exception as exc:  # noqa: BLE001 - raised once all are ended
                    errors.append(exc)
            if self.passive is not None and self.passive.poll() is None:
                try:
                    try:
                        os.kill(self.passive.pid, 2)
                        self.passive.wait(timeout=3)
                    except (ProcessLookupError, subprocess.TimeoutExpired):
                        pass
                    stop_process(self.passive)
                except Exception as exc:  # noqa: BLE001
                    errors.append(exc)
        finally:
            self._finish()
        if errors:
            raise errors[0]

    def _finish(self):
        if self._finished:
            return
        self._finished = True
        for g in self.actives:
            if g.watcher is not None:
                g.watcher.join(timeout=5)
            for attr, out in (("aout", "stdout"), ("aerr", "stderr")):
                f = getattr(g, attr)
                if f is not None and not f.closed:
                    f.seek(0)
                    setattr(g, out, f.read())
                    f.close()
        self.stdout = "\n".join(g.stdout for g in self.actives)
        self.stderr = "\n".join(g.stderr for g in self.actives)
        if self.measurement_seen_mono is None and all(g.seen_mono for g in self.actives):
            # a part started at its own time (not pre-connected): its last process's
            self.measurement_seen_mono = max(g.seen_mono for g in self.actives)
        f = getattr(self, "_pout", None)
        if f is not None and not f.closed:
            f.seek(0)
            self.passive_out = f.read()
            f.close()

    # ------------------------------------------------------------ results
    def _read(self, filename):
        try:
            with open(os.path.join(self.out_dir, filename)) as f:
                return f.read()
        except OSError:
            return ""

    def files(self):
        """The names of the tool's output files in ``out_dir`` (every process's)."""
        try:
            return sorted(n for n in os.listdir(self.out_dir) if n.startswith(self.stem))
        except OSError:
            return []

    def scalars(self, node):
        """{flow id: {name: value}} of ``node``'s (active/passive) scalar files."""
        out = {}
        for g in self.actives:
            mine = {f.flow_id for f in g.flows}
            out.update((k, v) for k, v in flow_scalars(parse_scalars(
                self._read(f"{g.stem}-{node}.sca")), node).items() if k in mine)
        return out

    def measurement_start_real(self, group=0):
        """Wall-clock time (s) of a process's measurement start (the first's, or
        ``group``'s): its first statistics event (its scalar file), else its launch."""
        g = self.actives[group]
        text = self._read(f"{g.stem}-active.sca")
        m = re.search(r'"netPerfMeter\.active\.total"\s+"First Statistics Event"\s+(\d+)',
                      text)
        if m and int(m[1]) > 0:
            return int(m[1]) / 1e6
        launched = self._launched(g)
        return None if launched is None else launched + self.rmm

    def _run_time_us(self, abs_us):
        return abs_us / 1e6 - self.rmm - self.t0

    def rows(self):
        """{"npm": interval rows, "npm_msg": message rows as their cells
        (:func:`message_cells`; :func:`message_rows` reads them as dicts)} (run time, s)."""
        intervals, msgs, names_now = [], CellRows(), self.files()
        for g in self.actives:         # each process's files, for its own flows
            names = {f.flow_id: f.name for f in g.flows}
            for node in ("active", "passive"):
                by_key = {}
                for r in parse_summary_vector(self._read(f"{g.stem}-{node}.vec")):
                    if r["flow_id"] not in names:
                        continue
                    key = (r["flow_id"], r["abs_time_us"])
                    row = by_key.setdefault(key, {
                        "flow": names[r["flow_id"]], "node": node,
                        "t_start": round(self._run_time_us(r["abs_time_us"])
                                         - r["interval_s"], 6),
                        "t_end": round(self._run_time_us(r["abs_time_us"]), 6),
                        "sent_bytes": None, "received_bytes": None, "lost_bytes": None})
                    col = {"Sent": "sent_bytes", "Received": "received_bytes",
                           "Lost": "lost_bytes"}.get(r["action"])
                    if col:
                        row[col] = r["rel_bytes"]
                intervals += by_key.values()
            for (node, flow_id), fname in sorted(vector_files(names_now, g.stem).items()):
                if flow_id not in names:
                    continue
                msgs += message_cells(self._read(fname), names[flow_id], self.rmm, self.t0)
        return {"npm": intervals, "npm_msg": msgs}

    def raw_outputs(self):
        """{filename: text}: the tool's files (vectors, scalars, the active side's status
        output; when ``out_dir`` is the run's raw/ they are there already: their text is
        None, and ``RunWriter.raw`` lists them in the record), the passive side's output,
        the active side's errors."""
        # the tool's files already in the run's raw/ are listed (None), not read and
        # written again over themselves (7 MB a minute at 15 Mbit/s)
        out = {fname: None if not self._own_dir else self._read(fname)
               for fname in self.files()}
        out[f"{self.stem}.passive.txt"] = self.passive_out
        for g in self.actives:
            if g.stderr.strip():
                out[f"{g.stem}.stderr.txt"] = g.stderr
        return out

    def summary(self):
        """One entry per flow (``flows``): name, ids, sockets, the launch of its process
        plus its first "on" (``t_launch``) and its first transmission (``t_start``), run
        time; bytes sent and received by the application, goodput over its reception
        span; and the tool's error. ``processes``: each active process's flows, launch
        and measurement start (run time, s)."""
        starts = [self.measurement_start_real(k) for k in range(len(self.actives))]
        sent = self.scalars("active")
        recv = self.scalars("passive")
        flows = []
        # the processes hold consecutive slices of self.flows: the flows in their order
        for g, start_real in zip(self.actives, starts):
            launched = self._launched(g)
            for f in g.flows:
                tx, rx = (sent, recv) if f.direction == "up" else (recv, sent)
                s, r = tx.get(f.flow_id, {}), rx.get(f.flow_id, {})
                first_tx = s.get("First Transmission") or 0
                entry = {"flow": f.name, "flow_id": f.flow_id, "direction": f.direction,
                         "sender": self.src if f.direction == "up" else self.dst,
                         "cca_requested": f.cca, "rate_mbit": f.rate_mbit,
                         # saturated and, once on, never off (a staggered start is one
                         # "on" instant): means to send all the time
                         "greedy": f.rate_mbit is None and (f.onoff is None
                                                            or len(f.onoff) == 1),
                         "sport": (self.sockets.get(f.flow_id) or (None,))[0],
                         "bytes_sent": s.get("Transmitted Bytes"),
                         "bytes_received": r.get("Received Bytes"),
                         "goodput_mbit": (r.get("Received Bit Rate") or 0) / 1e6 or None,
                         "t_start": round(first_tx / 1e6 - self.rmm - self.t0, 6)
                         if first_tx else None}
                # launched: the active side's process start plus the flow's first "on" (as
                # iperf3's client launch); its first transmission (t_start) follows once the
                # tool has connected its flows (a handshake through the path's queue) and
                # exchanged their configuration over the control connection (the control
                # path: prepare) (recorded, as iperf3's handshake is)
                entry["t_launch"] = (None if launched is None else
                                     round(launched - self.t0 + f.start_s, 6))
                if start_real is not None:
                    entry["first_on_s"] = round(start_real - self.rmm - self.t0 + self.lead_s
                                                + f.start_s, 6)
                flows.append(entry)
        codes = [None if g.proc is None else g.proc.poll() for g in self.actives]
        processes = [
            {"stem": g.stem, "flows": len(g.flows),
             "launched_s": None if g.launched_mono is None else
             round(g.launched_mono - self.t0, 6),
             "measurement_seen_s": None if g.seen_mono is None else
             round(g.seen_mono - self.t0, 6),
             "measurement_start_s": None if start is None else
             round(start - self.rmm - self.t0, 6),
             "returncode": code}
            for g, start, code in zip(self.actives, starts, codes)]
        return {"flows": flows, "port": self.port, "control_path": self.control,
                "runtime_s": self.runtime_s,
                "preconnect_lead_s": self.lead_s,
                "measurement_seen_s": (None if self.measurement_seen_mono is None else
                                       round(self.measurement_seen_mono - self.t0, 6)),
                "processes": processes,
                # the first non-zero code of the processes, else 0 once all ended, else
                # None (one still running, or not started)
                "returncode": next((c for c in codes if c), None if None in codes else 0),
                "error": tool_error(self.stdout, self.stderr)}

    def cleanup(self):
        """Remove the temporary output directory (only one this object made)."""
        if self._own_dir:
            for fname in os.listdir(self.out_dir):
                os.unlink(os.path.join(self.out_dir, fname))
            os.rmdir(self.out_dir)


def tool_error(stdout, stderr):
    """The first ``ERROR: ...`` line the tool printed, or None."""
    for line in (stderr + "\n" + stdout).splitlines():
        if line.strip().startswith("ERROR"):
            return line.strip()[:500]
    return None


def socket_ports(pid, fds, known=()):
    """{flow id: (local port, remote port)} of the TCP sockets behind descriptors ``fds``
    ({flow id: fd}) of process ``pid``, read from /proc (its namespace's net/tcp); flows
    in ``known`` are skipped."""
    links = {}
    for flow_id, fd in fds.items():
        if flow_id not in known:
            try:
                links[flow_id] = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                pass
    if not links:
        return {}
    tables = []
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                tables.append(f.read())
        except OSError:
            pass
    return match_sockets(links, tables)


def match_sockets(links, tables):
    """{flow id: (local port, remote port)} from the descriptors' links ({flow id:
    'socket:[INODE]'}) and /proc/net/tcp texts (the inode is the 10th column)."""
    inodes = {}
    for flow_id, link in links.items():
        m = re.fullmatch(r"socket:\[(\d+)\]", link)
        if m:
            inodes[m[1]] = flow_id
    out = {}
    for text in tables:
        for line in text.splitlines()[1:]:
            p = line.split()
            if len(p) > 9 and p[9] in inodes:
                out[inodes[p[9]]] = (int(p[1].rsplit(":", 1)[1], 16),
                                     int(p[2].rsplit(":", 1)[1], 16))
    return out


# ----------------------------------------------------------------------------- the kind

@register("netperfmeter")
class NetPerfMeterPart(TrafficPart):
    """``count`` TCP flows of one NetPerfMeter measurement (active processes of at most
    :data:`FLOWS_PER_PROCESS` flows on ``src``, one passive side on ``dst``): saturated
    (default), paced at ``rate_mbit`` (x ``rate_scale``) in frames of ``frame_bytes``
    (frame rate = rate / frame size), or on-off on ONE connection
    (``on_off_s`` = (on, off) seconds); started uniformly within ``stagger_s``; with
    ``cca``, ``sndbuf_bytes``/``rcvbuf_bytes`` per socket (0: autotuning)."""

    needs = ("netperfmeter", "sctp", "policy_routing")
    #: the sampler labels each flow's rows from the sockets :meth:`prepare` connects
    flows_known_after_prepare = True
    params = (
        Param("src", str, None, "the active side (near host)"),
        Param("dst", str, None, "the passive side (far host)"),
        Param("count", int, 1, "flows (in active processes of at most 10 flows, one "
              "passive side)", lo=1, hi=200),
        Param("direction", str, "up", "up: src sends; down: dst sends",
              choices=("up", "down")),
        Param("cca", str, None, "congestion control (default: the sender's)"),
        Param("rate_mbit", float, None, "pacing rate of each flow (application payload), "
              "Mbit/s; none: saturated", lo=MIN_RATE_MBIT, hi=100_000),
        Param("rate_scale", float, None, "multiplies rate_mbit (a stream at a fraction of "
              "a reference rate); needs rate_mbit", lo=0, hi=100, lo_open=True),
        Param("frame_bytes", int, 1448, "frame size, bytes (cut into messages of at most "
              "16000 B)", lo=MIN_FRAME_BYTES, hi=MAX_FRAME_BYTES),
        Param("frame_rate_hz", float, None, "frames per second of a paced flow (its frame "
              "size then follows from the rate)", lo=0, hi=10_000, lo_open=True),
        Param("on_off_s", tuple, None, "(on, off) seconds: one connection that sends "
              "on, idles off, repeatedly"),
        Param("stagger_s", float, 0.0, "the flows start uniformly within this many s",
              lo=0, hi=86_400),
        Param("sndbuf_bytes", int, 0, "SO_SNDBUF of each socket, bytes (0: autotuning)",
              lo=0, hi=1 << 30),
        Param("rcvbuf_bytes", int, 0, "SO_RCVBUF of each socket, bytes (0: autotuning)",
              lo=0, hi=1 << 30),
    )

    @classmethod
    def check_spec(cls, spec, where="", resolved=True):
        """Also: ``rate_scale`` needs its reference ``rate_mbit`` (e.g. the matching bulk
        run's goodput): a missing reference is an error, never a guess."""
        super().check_spec(spec, where, resolved)
        flows_per_process()       # a bad BUFFERBLOAT_NPM_FLOWS_PER_PROCESS, before a network
        if resolved and spec.get("rate_scale") is not None and spec.get("rate_mbit") is None:
            raise UsageError(
                f"{where}traffic {spec.get('name', cls.kind)}: rate_scale "
                f"{spec['rate_scale']} needs a reference rate_mbit, which is not set (a "
                "stream at a fraction of the bulk run's goodput needs bulk_goodput_mbit: "
                "a sweep over the bulk load sets it from that run; or --set "
                "bulk_goodput_mbit=MBIT)")
        rate, scale = spec.get("rate_mbit"), spec.get("rate_scale")
        if resolved and rate is not None and scale is not None \
                and float(rate) * float(scale) < MIN_RATE_MBIT:
            raise UsageError(
                f"{where}traffic {spec.get('name', cls.kind)}: invalid value for "
                f"rate_mbit x rate_scale: {rate:g} x {scale:g} = "
                f"{float(rate) * float(scale):.3g} Mbit/s (allowed: >= {MIN_RATE_MBIT:g}"
                " Mbit/s, the floor of any rate)")
        if resolved and spec.get("direction", "up") == "down" and int(spec.get("count", 1)) > 1:
            # the sampler labels a sending socket by its source port, which all 'down'
            # flows share (the passive side's port)
            raise UsageError(f"{where}traffic {spec.get('name', cls.kind)}: direction "
                             "down takes one flow (count 1)")
        on_off = spec.get("on_off_s")
        pair = isinstance(on_off, (tuple, list)) and len(on_off) == 2 and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in on_off)
        if resolved and on_off is not None and not pair:
            raise UsageError(f"{where}traffic {spec.get('name', cls.kind)}: on_off_s "
                             f"{on_off!r} (allowed: two positive numbers of seconds)")

    def tools(self):
        spec, net = self.spec, self.ctx.net
        count, length, offsets = self.flow_starts()
        rate = spec.get("rate_mbit")
        if rate is not None and spec.get("rate_scale") is not None:
            rate = float(rate) * float(spec["rate_scale"])
        direction = spec.get("direction", "up")
        sender = spec["src"] if direction == "up" else spec["dst"]
        cca = spec.get("cca") or net.topo.ccas.get(sender)
        frame = int(spec.get("frame_bytes", 1448))
        if rate is not None and spec.get("frame_rate_hz"):
            frame = max(MIN_FRAME_BYTES, min(MAX_FRAME_BYTES, round(
                rate * 1e6 / 8 / float(spec["frame_rate_hz"]))))
        flows = []
        for i, offset in enumerate(offsets):
            name = spec["name"] if count == 1 else f"{spec['name']}{i + 1}"
            onoff = None
            if spec.get("on_off_s"):
                on, off = (float(x) for x in spec["on_off_s"])
                onoff = onoff_times(length, on, off, offset)
            elif offset > 0:
                onoff = [offset]
            flows.append(NpmFlow(i + 1, name, direction, rate, frame, onoff, cca,
                                 spec.get("sndbuf_bytes", 0), spec.get("rcvbuf_bytes", 0)))
        # the part's stop ends the measurement (SIGINT: the tool stops its flows and
        # downloads the passive side's results); its own runtime is a backstop only
        self.run = NetPerfMeterRun(net, spec["src"], spec["dst"], self.ctx.ports("tcp", 2),
                                   flows, length + RUNTIME_SLACK_S, name=spec["name"],
                                   out_dir=self.ctx.raw_dir, **self.ctx.clock)
        return [(self.run, self.start_s, self.stop_s)]

    def prepare(self):
        """The passive side listens; a part whose flows start with the traffic (its
        start 0) also connects them now (:meth:`NetPerfMeterRun.preconnect`), so that
        they start on schedule however long connecting takes: the run's origin waits
        for them (:attr:`origin_at`)."""
        self.run.prepare()
        if self.start_s == 0:
            # a backstop only (the part's stop ends the tool), from the tool's launch
            self.run.runtime_s += PRECONNECT_LEAD_S + PRECONNECT_TIMEOUT_S
            self.origin_at = self.run.preconnect(PRECONNECT_LEAD_S)

    def waited(self):
        """Nothing: the part's stop ends the measurement (its schedule sends SIGINT at the
        part's end), and the download of the passive side's results that follows is not
        traffic the run waits for (:meth:`stop` completes it)."""
        return []

    def stop(self):
        """The timeline's tools, and the measurement's processes whatever the timeline
        reached: a pre-connected part starts them in :meth:`prepare`, before its
        timeline exists, and a run that fails or is interrupted in between still stops
        them by PID, downloads what they measured and keeps their output."""
        super().stop()
        run = getattr(self, "run", None)
        if run is not None:
            run.stop()

    def tool_problem(self, tool):
        running = any(g.proc is not None and g.proc.poll() is None for g in tool.actives)
        return (exit_problem(f"netperfmeter passive side of {tool.name}", tool.passive,
                             expect_running=running)
                or next((p for g in tool.actives if (p := exit_problem(
                    f"netperfmeter active side of {tool.name} (raw/{g.stem}.stdout.txt)",
                    g.proc))), None))

    def reported_error(self):
        err = tool_error(self.run.stdout, self.run.stderr)
        return None if err is None else f"netperfmeter {self.name}: {err}"

    def rows(self):
        return self.run.rows()

    def summary(self):
        entry = {"name": self.name, "kind": "NetPerfMeterRun", **self.run.summary()}
        if self.run.scheduled_s is not None:
            # health: each flow was due at the part's start + its first "on"; the time
            # the process took to connect its flows before the measurement began counts
            # as lateness
            for flow, spec in zip(entry["flows"], self.run.flows):
                flow["scheduled_s"] = round(due_s(self.run.scheduled_s, spec.start_s), 6)
        return [entry]

    def sampled_flows(self):
        hosts = {"up": self.spec["src"], "down": self.spec["dst"]}
        direction = self.spec.get("direction", "up")
        # the data port carries data connections only (the control connection is on
        # port + 1): every socket is sampled from its first moment, a flow that starts
        # late or sends little included
        if direction == "up":
            # a pre-connected part's sockets are known before the sampler starts
            # (prepare): each flow's rows carry its name; otherwise host:port
            # (a part of one flow: its port's name, known before it connects)
            labels = {str(ports[0]): f.name for f in self.run.flows
                      if (ports := self.run.sockets.get(f.flow_id))}
            one = {"label": self.run.flows[0].name} if len(self.run.flows) == 1 else {}
            return [{"host": hosts["up"], "dports": [self.run.port], "no_control": True,
                     "labels": labels, **one}]
        return [{"host": hosts["down"], "sports": [self.run.port], "no_control": True,
                 "labels": {self.run.port: self.run.flows[0].name}}]

    def flow_labels(self):
        out = {}
        for f in self.run.flows:
            ports = self.run.sockets.get(f.flow_id)
            if ports:
                out[(self.run.src, ports[0])] = f.name
        return out
