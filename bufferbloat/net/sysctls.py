"""The global sysctls a network sets for its run, and puts back on stop.

Two things need a setting outside the hosts' namespaces: the senders' congestion control
algorithms must be selectable inside a namespace (net.ipv4.tcp_allowed_congestion_control,
with the modules loaded), and a Linux bridge's frames must stay out of the host's
iptables (br_netfilter's bridge-nf-call-* switches). Each value is read before its first
write and recorded in the state file (:class:`bufferbloat.net.cleanup.NetworkState`), so
that the network's stop, or the recovery after a killed run, restores it.
"""

import os

from bufferbloat.net import isolation
from bufferbloat.net.isolation import ALLOWED_CCAS, AVAILABLE_CCAS


class GlobalSysctls:
    """The sysctls a :class:`~bufferbloat.net.network.Network` ``net`` sets in the
    namespace it is built from: ``saved`` holds the value each had before its first write,
    in the order written; restore() writes them back, the last first."""

    def __init__(self, net):
        self.net = net
        self.saved = {}

    def allow_ccas(self):
        """Make the senders' CCAs selectable inside namespaces (loading modules if need be).

        Non-initial namespaces (the Mininet hosts) may only pick algorithms listed in the
        global net.ipv4.tcp_allowed_congestion_control. In the initial namespace the run
        loads the modules and extends the list, restoring it on stop. In any other one
        both are global and out of reach: nothing is written, and a CCA not allowed is
        refused (isolation.check_ccas; the network's check() did so before anything was
        created).
        """
        wanted = set(self.net.topo.ccas.values())
        if not isolation.in_initial_netns():
            isolation.check_ccas(wanted)
            return
        available = set(isolation.read_sysctl(AVAILABLE_CCAS).split())
        for cca in sorted(wanted - available):
            self.net.run(None, ["modprobe", f"tcp_{cca}"])
        allowed = isolation.read_sysctl(ALLOWED_CCAS).split()
        if not wanted <= set(allowed):
            self.set(ALLOWED_CCAS, " ".join(allowed + sorted(wanted - set(allowed))))

    def bridge_without_netfilter(self):
        """Keep bridged frames out of the host's iptables (br_netfilter), for the run.

        The switches are per network namespace since Linux 5.3: each is written where it
        is writable from here, and skipped where it is absent (br_netfilter not loaded,
        or an older kernel that shows them in the initial namespace only)."""
        for table in ("arptables", "iptables", "ip6tables"):
            path = f"net/bridge/bridge-nf-call-{table}"
            if os.access(f"/proc/sys/{path}", os.W_OK):
                self.set(path, "0")

    def set(self, path, value):
        """Set a sysctl for the run; the first value seen is restored on stop. A write
        that fails changed nothing: it is not recorded, so restore() leaves it alone."""
        state = self.net.state
        first = path not in self.saved
        if first:
            self.saved[path] = isolation.read_sysctl(path)
            if state is not None:
                state.set_sysctl(path, self.saved[path])
        try:
            isolation.write_sysctl(path, value)
        except OSError:
            if first:
                del self.saved[path]
                if state is not None:
                    state.forget_sysctl(path)
            raise

    def restore(self):
        """Write back every saved value, the last set first."""
        for path, value in reversed(list(self.saved.items())):
            isolation.write_sysctl(path, value)
        self.saved.clear()
