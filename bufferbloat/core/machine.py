"""Where and with what a run happened: the machine and the tool versions of a run's
record (``machine``, ``tools`` in result.json)."""

import json
import os
import platform
import socket
import subprocess
import sys


def machine_record(caps):
    """Where the run happened: host name, kernel, host or VM, tool versions."""
    return {"hostname": socket.gethostname(), "kernel": platform.release(),
            "in_project_vm": os.path.exists("/etc/bufferbloat-vm"),
            "python": sys.version.split()[0], "argv": list(sys.argv),
            "capabilities": caps.to_dict(), "vm_boots": _vm_boots()}


def under_tcg():
    """Whether this process runs in the project VM under software emulation (TCG): the
    guest command's environment says so (BUFFERBLOAT_GUEST_ACCEL=tcg, set by vm/run)."""
    return os.environ.get("BUFFERBLOAT_GUEST_ACCEL") == "tcg"


def _vm_boots():
    """The project VM's boots for this command (BUFFERBLOAT_VM_BOOTS, set by vm/run: which
    boot this is and the failed ones before it), or None outside the VM."""
    raw = os.environ.get("BUFFERBLOAT_VM_BOOTS")
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


_TOOL_VERSIONS = None


def tool_versions():
    """First version line of each external tool (a copy). Asked once per process: the
    seven tool processes cost ~0.5 s a run under TCG, and a sweep's or run-all's points
    run with the same installed tools."""
    global _TOOL_VERSIONS  # noqa: PLW0603 - the process's one answer
    if _TOOL_VERSIONS is None:
        _TOOL_VERSIONS = _ask_tool_versions()
    return dict(_TOOL_VERSIONS)


def _ask_tool_versions():
    """First version line of each external tool, asked now."""
    cmds = {"iperf3": ["iperf3", "--version"], "tc": ["tc", "-V"], "ping": ["ping", "-V"],
            "curl": ["curl", "--version"], "ss": ["ss", "-V"],
            "ovs-vsctl": ["ovs-vsctl", "--version"]}
    out = {}
    for name, argv in cmds.items():
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=5)
            out[name] = (res.stdout or res.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            out[name] = None
    try:
        import mininet.net  # noqa: PLC0415 - Mininet only where a network is built
        out["mininet"] = mininet.net.VERSION
    except ImportError:
        out["mininet"] = None
    return out


