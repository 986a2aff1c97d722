"""Network namespaces: which one a run is in, and what only the initial one may change.

A network built inside a network namespace of its own (``unshare --net``, a worker of a
pool) has its own links, bridges, Mininet names (h1, s0, s0-eth1), interface indexes and
per-namespace sysctls: two such networks never meet. Each namespace has its own state
file and lock (:func:`bufferbloat.net.cleanup.network_paths`). What stays global is
changed only from the initial namespace:

* kernel modules (``tcp_vegas``...): loaded only there; elsewhere a missing one is
  refused, naming it;
* ``net.ipv4.tcp_allowed_congestion_control``: a Mininet host (a namespace other than
  the initial one) may only make an algorithm of that list its default, and the file is
  read-only outside the initial namespace. :func:`prepare_ccas` extends it once, in the
  initial namespace (a worker pool calls it at start); a run in another namespace whose
  CCA is not listed is refused before anything is created (:func:`cca_refusal`).

The bridge's netfilter switches (``net.bridge.bridge-nf-call-*``) are per namespace since
Linux 5.3 ("netfilter: bridge: namespace bridge netfilter sysctls"): a run writes them
where they are writable and skips them where they are absent (br_netfilter not loaded).
"""

import os
import socket
import struct
import subprocess

from bufferbloat.core.errors import UsageError
from bufferbloat.net.topology import CCA_CHOICES

ALLOWED_CCAS = "net/ipv4/tcp_allowed_congestion_control"
AVAILABLE_CCAS = "net/ipv4/tcp_available_congestion_control"
#: the command that starts a worker of the pool (it calls :func:`prepare_ccas`)
WORKER_COMMAND = "bufferbloat worker"
#: getsockopt(SOL_SOCKET, SO_NETNS_COOKIE): a namespace's 64-bit cookie, never reused
#: while the machine is up (Linux 5.14+; an inode number is reused once it is freed)
SO_NETNS_COOKIE = getattr(socket, "SO_NETNS_COOKIE", 71)
#: the initial network namespace's inode on recent kernels (include/linux/proc_ns.h)
PROC_NET_INIT_INO = 0xEFFFFFF9


def netns_inode(pid="self"):
    """Inode number of the network namespace of process ``pid`` (default: ours)."""
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def in_initial_netns():
    """True if this process is in the initial network namespace (that of PID 1).

    Where /proc/1/ns/net cannot be read (a sandbox's PID 1 may hide it even from root),
    two signs of the kernel answer instead: recent kernels give the initial network
    namespace a fixed inode (PROC_NET_INIT_INO, 0xEFFFFFF9; any other is numbered from
    0xF0000000 up), and every kernel makes tcp_allowed_congestion_control read-only
    (mode 0444) outside it."""
    mine = netns_inode()
    try:
        return mine == netns_inode(1)
    except OSError:
        pass
    if mine == PROC_NET_INIT_INO:
        return True
    try:
        return bool(os.stat(f"/proc/sys/{ALLOWED_CCAS}").st_mode & 0o200)
    except OSError:
        return True     # no TCP sysctls to tell by: the machine-wide behaviour


def netns_cookie():
    """The cookie of this process's network namespace, or None where the kernel has
    none (before 5.14)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            return struct.unpack("Q", s.getsockopt(socket.SOL_SOCKET, SO_NETNS_COOKIE, 8))[0]
    except (OSError, struct.error):
        return None


def read_sysctl(path):
    """The value of sysctl ``path`` (``net/ipv4/...``), stripped."""
    with open(f"/proc/sys/{path}") as f:
        return f.read().strip()


def write_sysctl(path, value):
    with open(f"/proc/sys/{path}", "w") as f:
        f.write(value)


def cca_refusal(missing, allowed, available):
    """The UsageError for CCAs a run outside the initial namespace cannot have: not in
    the allowed list (``allowed``), some perhaps not even loaded (``available``)."""
    missing = sorted(missing)
    unloaded = [c for c in missing if c not in available]
    wanted = list(allowed) + [c for c in missing if c not in allowed]
    fix = "".join(f"modprobe tcp_{c} && " for c in unloaded)
    fix += f'sysctl -w net.ipv4.tcp_allowed_congestion_control="{" ".join(wanted)}"'
    what = ", ".join(missing)
    why = "not loaded (kernel modules are global) and " if unloaded else ""
    return UsageError(
        f"congestion control {what} is {why}not in net.ipv4.tcp_allowed_congestion_control "
        f"({' '.join(allowed) or 'empty'}), and this run is in a network namespace of its own, "
        f"where that global setting cannot be changed: as root in the initial network "
        f"namespace, run `{fix}`, or start the worker with `{WORKER_COMMAND}`, which does it")


def missing_ccas(wanted):
    """(missing, allowed, available): the CCAs of ``wanted`` that a namespace other than
    the initial one may not make its default, and the two lists as the kernel has them."""
    available = read_sysctl(AVAILABLE_CCAS).split()
    allowed = read_sysctl(ALLOWED_CCAS).split()
    return sorted(set(wanted) - set(allowed)), allowed, available


def check_ccas(wanted):
    """Outside the initial namespace: raise :func:`cca_refusal`'s UsageError if a CCA of
    ``wanted`` is not allowed. Writes nothing, anywhere."""
    if in_initial_netns():
        return
    missing, allowed, available = missing_ccas(wanted)
    if missing:
        raise cca_refusal(missing, allowed, available)


def prepare_ccas(ccas=CCA_CHOICES, run=None):
    """Make ``ccas`` selectable by every network namespace, from the initial one: load
    ``tcp_<cca>`` where it is not available, then add the CCAs to
    net.ipv4.tcp_allowed_congestion_control (kept: it is not restored afterwards).

    ``ccas`` defaults to every CCA a topology can select (``topology.CCA_CHOICES``, the
    list its ``cca``/``ccas`` parameters are checked against). A worker of a pool calls
    it once, at start. Returns {"added": [...], "unavailable": [...]}: the CCAs put on
    the list, and those this kernel cannot provide (no module; a run wanting one of
    them is refused). Outside the initial namespace it cannot change anything: it
    raises the refusal of :func:`check_ccas` if something is missing, else returns.
    """
    wanted = set(ccas)
    if not in_initial_netns():
        check_ccas(wanted)
        return {"added": [], "unavailable": []}
    run = run or _run
    available = set(read_sysctl(AVAILABLE_CCAS).split())
    for cca in sorted(wanted - available):
        run(["modprobe", f"tcp_{cca}"])
    available = set(read_sysctl(AVAILABLE_CCAS).split())
    allowed = read_sysctl(ALLOWED_CCAS).split()
    added = sorted((wanted & available) - set(allowed))
    if added:
        write_sysctl(ALLOWED_CCAS, " ".join(allowed + added))
    return {"added": added, "unavailable": sorted(wanted - available)}


def _run(argv):
    subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
