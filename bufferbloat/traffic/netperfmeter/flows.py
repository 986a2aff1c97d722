"""NetPerfMeter's flows as its command line gives them: :class:`NpmFlow` (one ``-tcp
FLOWSPEC``: rate, frame size, on/off instants, CCA, socket buffers), the on/off
instants, and the cut of a run's flows into active processes of at most
:data:`FLOWS_PER_PROCESS`."""

import os
import re

from bufferbloat.core.errors import UsageError
from bufferbloat.core.params import MIN_RATE_MBIT, check_number

#: NetPerfMeter's largest message (its frames are cut into messages of at most this)
MAX_MSG_BYTES = 16000
#: largest frame (the tool cuts a frame into messages of at most MAX_MSG_BYTES, each
#: stamped with the frame's send time)
MAX_FRAME_BYTES = 1 << 20
#: smallest frame: a message carries a 48-byte header (NetPerfMeterDataMessage: 4+4+8+
#: 2+2+4+8+8+8 B, docs/reference/one-way-delay.md)
MIN_FRAME_BYTES = 64
#: messages not received within this long after the last one count as lost by the tool
#: (its default, 5 s, is shorter than a deep buffer's delay)
DEFRAG_TIMEOUT_MS = 600_000
#: flows per active process (:class:`~.run.NetPerfMeterRun`): the passive side takes a
#: new data connection's identification only at its receive thread's next 250 ms poll
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
