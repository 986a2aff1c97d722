"""Every packet that leaves a watched bottleneck leaf, timed by the kernel.

The 10 ms sampler says whether the link sent at its rate over each interval; it cannot
say whether each packet left when an ideal link would have sent it. Mininet-HiFi
(Handigol et al., CoNEXT 2012) timed every dequeue of the emulated link and, while the
queue was non-empty, compared each inter-departure gap with one packet's transmission
time on an ideal link; Distrinet-HiFi (2021) compares each packet's sojourn with
(bytes ahead + its size) / rate. This module does both, from the kernel's own events:

* :class:`DepartureTrace` (parent side, root): a tracefs *instance* of its own
  (``instances/bufferbloat-PID-N``, so the global trace buffer and any other run's
  instance are untouched) with ``net:net_dev_queue`` (a packet handed to the device's
  qdisc) and ``net:net_dev_xmit`` (the packet handed to the driver: on a veth, on the
  wire) enabled, filtered in the kernel to the watched devices, on ``trace_clock=mono``
  (CLOCK_MONOTONIC, the run's clock). The compiled reader ``.build/bb-departures``
  (``csampler/bb_departures.c``, built with the queue sampler) reads ``trace_pipe``
  during the run and writes ``series/departures.csv`` as it goes, pairing each
  departure with its enqueue (a few us per event under TCG, where converting in Python
  after the run took ~0.1 ms per departure: 6.7 s for study C's quick point); without
  it a thread copies the pipe to a raw file and Python converts it after the run.
  :meth:`DepartureTrace.stop` turns the events off, lets the reader drain the pipe and
  removes the instance (a run killed
  before that leaves its instance: the next trace removes those of dead PIDs); the
  kernel's own
  count of events it had to drop (``per_cpu/cpu*/stats`` overrun) is recorded, and a
  trace that lost events is not judged.
* :func:`departure_rows` (pure): per departure the time, device, length, sojourn
  (enqueue to departure) and whether the leaf was *backlogged* (the packet was enqueued
  before the previous packet left the device: the link had no reason to idle).
* :func:`timing_summary` (pure): over backlogged gaps, the error of each gap against
  the ideal link's, ``|gap - len(previous) x 8 / rate|`` (a departure is the start of a
  packet's transmission: the next one starts when the previous one's bytes are sent),
  its percentiles and the deviation ``|gap / ideal - 1|`` (Mininet-HiFi's CCDF); per
  packet, its sojourn against the ideal link's: the rest of the packet on the wire at
  its enqueue plus the packets that left ahead of it (Distrinet-HiFi's check, for the
  order the qdisc chose).

The packets are paired by ``skbaddr`` (the kernel prints a hashed pointer, stable within
a boot): a packet dropped by the AQM never departs and its entry is overwritten when
the address is reused. tracefs is global to the kernel, not per network namespace: the
devices are filtered by name, and two runs at once whose bottleneck devices had the
same name (two cluster workers in their own namespaces on one kernel) would mix; a run
under ``unshare --net`` therefore records that it shared the kernel
(``departures.shared_kernel``) and is not judged.

Env ``BUFFERBLOAT_DEPARTURES``: ``auto`` (default: traced where the kernel has tracefs
and the two events, otherwise the run records why not), ``off``.
"""

import json
import os
import select
import subprocess
import threading
import time

import numpy as np

from bufferbloat.core import paths
from bufferbloat.core.errors import UsageError
from bufferbloat.core.signals import die_with_parent, stop_process
from bufferbloat.core.stats import percentiles
from bufferbloat.measure.compiled import compiled_helper

ENV = "BUFFERBLOAT_DEPARTURES"
EVENTS = ("net/net_dev_queue", "net/net_dev_xmit")
INSTANCE_PREFIX = "bufferbloat-"
#: the project VM's guest holds EVENTS' probes for its whole boot in idle instances of
#: this name (vm/guest/bb-run), so that a run's enable/disable patches no kernel code
#: (under TCG that patching locked the guest up: docs/design/health.md)
HOLD_PREFIX = "bb-hold-"
#: per-CPU ring buffer of the instance: 100 Mbit/s of 1500-byte packets is ~8,300
#: departures/s, two events each of ~64 bytes: ~1 MB/s, read every READ_PAUSE_S
BUFFER_KB = 4096
READ_PAUSE_S = 0.05
RAW_NAME = "departures.trace"
#: the compiled reader (csampler/bb_departures.c): reads the pipe and writes the series
#: while the run goes; without it, a thread copies the pipe and Python converts after
HELPER_BIN = str(paths.BUILD_DIR / "bb-departures")
HELPER_READY_S = 10.0
COLUMNS = ("t", "dev", "len_bytes", "sojourn_ms", "backlogged")
#: The host kernel's reference (this machine kind, kernel 6.18, HTB with tc's one-MTU
#: burst and a 100-packet pfifo at 10 Mbit/s, one Cubic flow, no delay, 8 s, 7,029
#: backlogged gaps; 2026-11-25): (CCDF, deviation |gap / ideal - 1|) pairs, drawn
#: beside every run's curve. At 100 Mbit/s the same host measured 0.016 at 0.5, 0.084
#: at 0.1, 0.67 at 0.01.
HOST_REFERENCE = {"rate_mbit": 10, "points": ((0.5, 0.0059), (0.2, 0.013), (0.1, 0.0188),
                                              (0.05, 0.0341), (0.02, 0.1185),
                                              (0.01, 0.2219), (0.005, 0.3626),
                                              (0.002, 0.8106), (0.001, 0.912))}


def helper_binary(build=True):
    """The compiled reader: ``(path, None)`` or ``(None, why not)``."""
    return compiled_helper(HELPER_BIN, "bb_departures.c", build)


def tracefs_root(mounts="/proc/mounts"):
    """Where tracefs is mounted, or None."""
    try:
        with open(mounts) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[2] == "tracefs":
                    return parts[1]
    except OSError:
        return None
    return None


#: where systemd mounts tracefs (sys-kernel-tracing.mount)
TRACEFS_MOUNTPOINT = "/sys/kernel/tracing"


def mount_tracefs(mountpoint=TRACEFS_MOUNTPOINT):
    """Mount tracefs at ``mountpoint`` as systemd does at boot, when nothing has (a
    machine or container started without systemd): (mount point, None) once mounted
    or when it already was, else (None, why not). Needs root and a kernel with tracefs
    (``mountpoint`` exists); changes nothing else."""
    root = tracefs_root()
    if root is not None:
        return root, None
    if os.geteuid() != 0:
        return None, "tracefs is not mounted and mounting it needs root"
    if not os.path.isdir(mountpoint):
        return None, f"{mountpoint} does not exist (a kernel without tracefs)"
    try:
        res = subprocess.run(["mount", "-t", "tracefs", "nodev", mountpoint],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"mount -t tracefs nodev {mountpoint} failed: {exc}"
    root = tracefs_root()   # another run may have mounted it at the same moment
    if root is not None:
        return root, None
    return None, (f"mount -t tracefs nodev {mountpoint} failed (exit {res.returncode}): "
                  f"{(res.stderr or res.stdout).strip()[-200:]}")


def missing(root=None):
    """Why departures cannot be traced on this kernel (a sentence naming the missing
    piece and the way out), or None."""
    root = root if root is not None else tracefs_root()
    if root is None:
        return ("tracefs is not mounted (mount -t tracefs nodev /sys/kernel/tracing, "
                "as systemd does; or BUFFERBLOAT_DEPARTURES=off)")
    if not os.path.isdir(os.path.join(root, "instances")):
        return f"{root} has no instances/ (a kernel with CONFIG_TRACING)"
    lacking = [e for e in EVENTS if not os.path.isdir(os.path.join(root, "events", e))]
    if lacking:
        return (f"this kernel has no trace event {', '.join(lacking)} "
                f"(CONFIG_EVENT_TRACING with the net events)")
    return None


def wanted():
    """Whether the environment asks for the departure trace (``auto``) or not (``off``)."""
    value = os.environ.get(ENV, "auto").strip().lower()
    if value not in ("auto", "off"):
        raise UsageError(f"{ENV}={value!r}: give auto or off")
    return value == "auto"


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def dev_filter(devs):
    """The kernel-side filter for the device names (validated: interface names only)."""
    for d in devs:
        if not d or len(d) > 15 or not all(c.isalnum() or c in "-_." for c in d):
            raise ValueError(f"not an interface name: {d!r}")
    return " || ".join(f'name == "{d}"' for d in devs)


class DepartureTrace:
    """The departures of ``devs`` (interface names) between :meth:`start` and
    :meth:`stop`, into ``run_dir/series/departures.csv`` (times from ``t0``, monotonic
    seconds). ``rates``: {dev: Mbit/s} and ``bursts``: {dev: HTB burst bytes or None}
    are recorded for the analysis."""

    _count = 0

    def __init__(self, run_dir, devs, t0, rates=None, bursts=None, root=None):
        self.run_dir, self.devs, self.t0 = run_dir, list(devs), t0
        self.root = root if root is not None else tracefs_root()
        DepartureTrace._count += 1
        self.name = f"{INSTANCE_PREFIX}{os.getpid()}-{DepartureTrace._count}"
        self.instance = None if self.root is None else os.path.join(
            self.root, "instances", self.name)
        self.raw_path = os.path.join(run_dir, "raw", RAW_NAME)
        self.info = {"devs": self.devs, "rates_mbit": dict(rates or {}),
                     "burst_bytes": dict(bursts or {}), "instance": self.name,
                     "events": list(EVENTS), "clock": "mono"}
        self._thread = self._stop = self._fd = self._helper = None
        self._reader_cpu_s = 0.0
        self.csv_path = os.path.join(run_dir, "series", "departures.csv")
        self.stats_path = os.path.join(run_dir, "series", "departures-reader.json")

    def start(self):
        """Create the instance, enable the events, start copying the pipe."""
        why = missing(self.root)
        if why:
            raise RuntimeError(f"departures cannot be traced: {why}")
        os.makedirs(os.path.dirname(self.raw_path), exist_ok=True)
        # what a killed run of ours left (its buffers hold memory until removed)
        self.info["removed_stale"] = [os.path.basename(p) for p in stale_instances(self.root)
                                      if remove_instance(p)]
        self.info["probes_held"] = sorted(
            n for n in os.listdir(os.path.join(self.root, "instances"))
            if n.startswith(HOLD_PREFIX))
        os.mkdir(self.instance)
        try:
            _write(os.path.join(self.instance, "trace_clock"), "mono")
            _write(os.path.join(self.instance, "buffer_size_kb"), str(BUFFER_KB))
            flt = dev_filter(self.devs)
            for ev in EVENTS:
                _write(os.path.join(self.instance, "events", ev, "filter"), flt)
            binary, why = helper_binary()
            self.info["reader"] = "c" if binary else f"python ({why})"
            if binary:
                self._start_helper(binary)
            else:
                self._fd = os.open(os.path.join(self.instance, "trace_pipe"),
                                   os.O_RDONLY | os.O_NONBLOCK)
                self._out = open(self.raw_path, "wb")
                self._stop = threading.Event()
                self._thread = threading.Thread(target=self._copy, name="departures",
                                                daemon=True)
                self._thread.start()
            for ev in EVENTS:
                _write(os.path.join(self.instance, "events", ev, "enable"), "1")
        except BaseException:
            self._remove()
            raise
        self.info["started_s"] = round(time.monotonic() - self.t0, 6)

    def _start_helper(self, binary):
        """The compiled reader, started and ready (its 'ready' line) before the events
        are enabled; it ends with this process if that dies."""
        os.makedirs(os.path.dirname(self.csv_path), exist_ok=True)
        self._helper = subprocess.Popen(
            [binary, os.path.join(self.instance, "trace_pipe"), repr(float(self.t0)),
             self.csv_path, self.stats_path], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=die_with_parent)
        ready, _, _ = select.select([self._helper.stderr], [], [], HELPER_READY_S)
        line = self._helper.stderr.readline().decode(errors="replace") if ready else ""
        if line.strip() != "ready":
            stop_process(self._helper, grace_s=2, group=False)
            raise RuntimeError(f"the departure reader {binary} did not start: "
                               f"{line.strip() or 'no word in'} {HELPER_READY_S:g} s")

    def _copy(self):
        t_cpu = time.thread_time()
        try:
            while True:
                try:
                    chunk = os.read(self._fd, 1 << 16)
                except BlockingIOError:
                    chunk = None
                if chunk:
                    self._out.write(chunk)
                    continue
                if self._stop.is_set():
                    return
                self._stop.wait(READ_PAUSE_S)
        finally:
            self._reader_cpu_s = time.thread_time() - t_cpu

    def _lost_events(self):
        lost = 0
        per_cpu = os.path.join(self.instance, "per_cpu")
        for cpu in sorted(os.listdir(per_cpu)) if os.path.isdir(per_cpu) else ():
            try:
                with open(os.path.join(per_cpu, cpu, "stats")) as f:
                    for line in f:
                        key, _, value = line.partition(":")
                        if key.strip() in ("overrun", "dropped events"):
                            lost += int(value.split()[0])
            except (OSError, ValueError, IndexError):
                continue
        return lost

    def _remove(self):
        """Events off, the pipe drained and closed, the instance removed (idempotent)."""
        if self.instance is None or not os.path.isdir(self.instance):
            return
        for ev in EVENTS:
            try:
                _write(os.path.join(self.instance, "events", ev, "enable"), "0")
            except OSError:
                pass
        if self._helper is not None:
            # drains what the pipe still holds, writes its stats, exits
            stop_process(self._helper, grace_s=30, group=False)
            err = self._helper.stderr.read().decode(errors="replace").strip()
            self._helper.stderr.close()
            if self._helper.returncode != 0:
                self.info["reader_error"] = (f"exit {self._helper.returncode}: "
                                             f"{err[-300:]}")
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=30)
            self._out.close()
        self.info["lost_events"] = self._lost_events()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        remove_instance(self.instance)

    def stop(self, writer=None):
        """Stop tracing; write the series (through ``writer``, a RunWriter, if given) and
        return the record's ``departures`` entry."""
        t = time.monotonic()
        self._remove()
        if self._helper is not None:
            try:
                with open(self.stats_path) as f:
                    st = json.load(f)
                os.remove(self.stats_path)
            except (OSError, ValueError) as exc:
                st = {"error": f"no stats from the reader: {exc}"}
            self.info.update(departures=st.get("departures"), events_read=st.get("events"),
                             unpaired=st.get("unpaired"),
                             skipped_lines=st.get("skipped_lines"),
                             reader_cpu_s=st.get("cpu_s"), convert_s=0.0)
            if "error" in st:
                self.info["reader_error"] = st["error"]
            self.info["stop_s"] = round(time.monotonic() - t, 3)
            return self.info
        self.info["reader_cpu_s"] = round(self._reader_cpu_s, 3)
        rows = departure_rows(read_events(self.raw_path), self.t0)
        self.info["departures"] = len(rows)
        self.info["raw_bytes"] = os.path.getsize(self.raw_path)
        if writer is not None and rows:
            writer.add_rows("departures", list(COLUMNS), rows)
        os.remove(self.raw_path)       # the series holds what it said, a fraction the size
        self.info["convert_s"] = round(time.monotonic() - t, 3)
        return self.info


def remove_instance(path):
    """rmdir a tracefs instance (its buffers go with it); True if it is gone."""
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def stale_instances(root=None, alive=None):
    """Instances a dead process of ours left (``bufferbloat-PID-N``, PID gone)."""
    root = root if root is not None else tracefs_root()
    if root is None or not os.path.isdir(os.path.join(root, "instances")):
        return []
    alive = alive or (lambda pid: os.path.exists(f"/proc/{pid}"))
    out = []
    for name in os.listdir(os.path.join(root, "instances")):
        if not name.startswith(INSTANCE_PREFIX):
            continue
        pid = name[len(INSTANCE_PREFIX):].split("-")[0]
        if pid.isdigit() and not alive(int(pid)):
            out.append(os.path.join(root, "instances", name))
    return out


# ----------------------------------------------------------------- parsing (pure)
def read_events(path):
    """(time, 'q' | 'x', dev, skb, len) for each net_dev_queue / net_dev_xmit line of a
    trace_pipe text file (other lines, e.g. a 'CPU:N [LOST M EVENTS]' notice, skipped)."""
    out = []
    with open(path, "rb") as f:
        for raw in f:
            line = raw.decode("ascii", "replace")
            k = line.find(": net_dev_")
            if k < 0:
                continue
            head, rest = line[:k], line[k + 10:].split()
            try:
                t = float(head.rsplit(None, 1)[-1])
                kind = "q" if rest[0] == "queue:" else "x" if rest[0] == "xmit:" else None
                if kind is None:
                    continue
                fields = dict(item.split("=", 1) for item in rest[1:] if "=" in item)
                out.append((t, kind, fields["dev"], fields["skbaddr"], int(fields["len"])))
            except (ValueError, KeyError, IndexError):
                continue
    return out


def departure_rows(events, t0):
    """[t, dev, len_bytes, sojourn_ms, backlogged] per departure, in time order.
    ``sojourn_ms`` is None when the packet's enqueue was not seen; ``backlogged`` is 1
    when the packet was enqueued no later than the previous departure of its device."""
    enq, last, rows = {}, {}, []
    for t, kind, dev, skb, length in sorted(events, key=lambda e: e[0]):
        if kind == "q":
            enq[(dev, skb)] = t
            continue
        e = enq.pop((dev, skb), None)
        prev = last.get(dev)
        backlogged = int(e is not None and prev is not None and e <= prev)
        rows.append([round(t - t0, 6), dev, length,
                     None if e is None else round((t - e) * 1e3, 4), backlogged])
        last[dev] = t
    return rows


def timing_summary(t, length, sojourn_ms, backlogged, rate_mbit):
    """The departure timing of one device against an ideal link of ``rate_mbit``
    (arrays in time order): see the module docstring. None without two departures."""
    t = np.asarray(t, dtype=float)
    n = t.size
    if n < 2 or not rate_mbit:
        return None
    length = np.asarray(length, dtype=float)
    gap, ideal = _backlogged_gaps(t, length, backlogged, rate_mbit)
    bl = np.asarray(backlogged, dtype=float)[1:] > 0
    ideal_all = length[:-1] * 8 / (rate_mbit * 1e6)
    err_ms = np.abs(gap - ideal) * 1e3
    dev = np.abs(gap / ideal - 1)
    out = {"departures": int(n), "backlogged_gaps": int(bl.sum()),
           "ideal_gap_ms_p50": round(float(np.median(ideal_all)) * 1e3, 4)}
    if bl.any():
        # each array sorted once for its percentiles (the health check reads them for
        # every run: 100k departures a minute at 15 Mbit/s)
        err50, err99 = percentiles(err_ms, (50, 99))
        dev50, dev99 = percentiles(dev, (50, 99))
        out.update({
            "gap_error_ms_p50": round(err50, 4),
            "gap_error_ms_p99": round(err99, 4),
            "gap_error_ms_max": round(float(err_ms.max()), 4),
            "deviation_p50": round(dev50, 4),
            "deviation_p99": round(dev99, 4),
            "within_10pct": round(float(np.mean(dev <= 0.10)), 4)})
    # per packet: its sojourn (enqueue to departure) beyond the ideal link's, which
    # sends it once the packet on the wire at its enqueue has finished and every packet
    # that left between its enqueue and its departure has been sent; early (< 0: a
    # burst) or late (> 0)
    soj = np.asarray(sojourn_ms, dtype=float)
    have = np.isfinite(soj)
    if have.any():
        tx = length * 8 / (rate_mbit * 1e6)
        cum = np.concatenate([[0.0], np.cumsum(tx)])     # link time of departures < i
        enq = t - soj / 1e3
        j = np.searchsorted(t, enq, side="right")        # departures up to the enqueue
        ahead = cum[np.arange(n)] - cum[j]
        on_wire = np.where(j > 0, t[np.maximum(j - 1, 0)] + tx[np.maximum(j - 1, 0)] - enq,
                           0.0)
        ideal_soj = (np.maximum(ahead, 0) + np.maximum(on_wire, 0)) * 1e3
        excess = (soj - ideal_soj)[have]
        p1, p50, p95, p99 = percentiles(excess, (1, 50, 95, 99))
        out.update({"sojourn_excess_ms_p1": round(p1, 4),
                    "sojourn_excess_ms_p50": round(p50, 4),
                    "sojourn_excess_ms_p95": round(p95, 4),
                    "sojourn_excess_ms_p99": round(p99, 4)})
    return out


def _backlogged_gaps(t, length, backlogged, rate_mbit):
    """(gaps, ideal gaps) in s between consecutive departures while the leaf was
    backlogged; the ideal gap is the previous packet's time at the rate."""
    bl = np.asarray(backlogged, dtype=float)[1:] > 0
    ideal = np.asarray(length, dtype=float)[:-1] * 8 / (rate_mbit * 1e6)
    return np.diff(np.asarray(t, dtype=float))[bl], ideal[bl]


def deviation_ccdf(t, length, backlogged, rate_mbit):
    """(sorted deviations, CCDF) of the backlogged gaps (for the figure)."""
    t = np.asarray(t, dtype=float)
    if t.size < 2 or not rate_mbit:
        return np.array([]), np.array([])
    gap, ideal = _backlogged_gaps(t, length, backlogged, rate_mbit)
    dev = np.sort(np.abs(gap / ideal - 1))
    if not dev.size:
        return dev, dev
    return dev, 1.0 - np.arange(dev.size) / dev.size
