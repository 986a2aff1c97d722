"""Run a scenario: build its network, drive its traffic, record everything in a run dir.

A run directory holds ``result.json``: the scenario and every parameter as validated,
the machine (host name, kernel, host or VM, tool versions, capabilities), the qdisc plan
and the trees as installed and read back, the measurements and a summary next to theory.
It is written atomically (write, then rename), so it is never half-written.
"""

import datetime
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

from . import theory
from .capabilities import probe
from .errors import UsageError
from .experiment import long_flow
from .network import Network
from .scenario import Scenario  # noqa: F401  (re-exported)
from .topology import make_topo

RESULT_FILE = "result.json"
PING_INTERVAL_S = 0.1
SCHEMA_VERSION = 1


def machine_record(caps):
    """Where the run happened: host name, kernel, host or VM, tool versions."""
    return {"hostname": socket.gethostname(), "kernel": platform.release(),
            "in_project_vm": os.path.exists("/etc/bufferbloat-vm"),
            "python": sys.version.split()[0], "tools": tool_versions(),
            "capabilities": caps.to_dict()}


def tool_versions():
    """First version line of each external tool."""
    cmds = {"iperf3": ["iperf3", "--version"], "tc": ["tc", "-V"], "ping": ["ping", "-V"],
            "ethtool": ["ethtool", "--version"], "ovs-vsctl": ["ovs-vsctl", "--version"]}
    out = {}
    for name, argv in cmds.items():
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=5)
            out[name] = (res.stdout or res.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            out[name] = None
    try:
        import mininet.net
        out["mininet"] = mininet.net.VERSION
    except ImportError:
        out["mininet"] = None
    return out


def write_json_atomic(path, data):
    """Write JSON to ``path`` via a temporary file and rename."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, default=str)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def run_scenario(scn, overrides=None, duration_s=None, out_root="results", quick=False,
                 log=print):
    """Run ``scn`` once; returns the run directory. Bad input raises UsageError before
    any network state exists."""
    caps = probe()
    topo = scn.build_topo(overrides, hz=caps.hz)
    duration = duration_s or (scn.quick_duration_s if quick else scn.duration_s)
    if not 1 <= duration <= 86400:
        raise UsageError(f"invalid value for time: {duration!r} (allowed: 1 to 86400 s)")
    net = Network(topo, caps=caps)
    net.check()
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    run_dir = os.path.join(out_root, scn.name, f"{stamp}-{os.getpid()}")
    os.makedirs(run_dir, exist_ok=True)
    record = {"schema_version": SCHEMA_VERSION, "scenario": asdict(scn),
              "overrides": dict(overrides or {}), "duration_s": duration,
              "profile": "quick" if quick else "full",
              "started": datetime.datetime.now().astimezone().isoformat(),
              "machine": machine_record(caps), "status": "running"}
    t0 = time.monotonic()
    try:
        with net:
            record["network"] = net.describe()
            log(f"  {scn.name}: {topo.qdisc.kind} at {topo.bottleneck.rate_mbit:g} Mbit/s, "
                f"{duration:g} s of traffic")
            res = long_flow(net, duration, ping_interval_s=PING_INTERVAL_S)
            record["network"]["installed_after"] = net.readback()
        record["measurements"] = {
            "goodput_mbit": res.goodput_mbit,
            "ping": {"probes": res.ping.probes, "sent": res.ping.sent},
            "bottleneck_leaf": [(t, q) for t, q in res.leaf_samples],
            "iperf3": res.iperf}
        record["summary"] = summarize(topo, res)
        record["status"] = "ok"
    except KeyboardInterrupt:
        record["status"] = "interrupted"
        raise
    except Exception as exc:
        record["status"] = "failed"
        record["error"] = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        record["wall_s"] = time.monotonic() - t0
        record["timings"] = net.timings
        write_json_atomic(os.path.join(run_dir, RESULT_FILE), record)
    return run_dir


def summarize(topo, res):
    """Headline numbers with their theoretical counterparts."""
    rate = topo.bottleneck.rate_mbit
    leaf = res.after(2.0)
    out = {"goodput_mbit": res.goodput_mbit, "utilization": res.goodput_mbit / rate,
           "ping_rtt_max_ms": max(res.ping.rtts) if res.ping.rtts else None,
           "ping_rtt_median_ms": statistics.median(res.ping.rtts) if res.ping.rtts else None,
           "ping_loss_pct": res.ping.loss_pct, "base_rtt_ms": topo.base_rtt_ms(),
           "tcp_goodput_ceiling_mbit": theory.tcp_goodput_ceiling(rate),
           "max_backlog_pkts": max((q.get("qlen", 0) for q in leaf), default=None)}
    if topo.qdisc.kind == "fifo" and topo.qdisc.params.get("limit_pkts"):
        limit = topo.qdisc.params["limit_pkts"]
        out["theory_full_queue_rtt_ms"] = theory.full_queue_rtt_ms(topo.base_rtt_ms(), limit,
                                                                   rate)
        # what a ping can see: the pings take slots of a packet-limited buffer too
        out["theory_full_queue_rtt_with_probes_ms"] = theory.full_queue_rtt_ms(
            topo.base_rtt_ms(), limit, rate, probe_interval_s=PING_INTERVAL_S)
    if topo.qdisc.kind == "pie":
        delays = [q["options"].get("delay") for q in leaf if "options" in q]
        out["pie_target_ms"] = topo.qdisc.params["target_ms"]
        out["pie_delay_samples"] = len([d for d in delays if d is not None])
    return out
