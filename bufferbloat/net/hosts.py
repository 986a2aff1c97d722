"""The hosts' own settings: the TCP sysctls each host runs with (a sender's congestion
control included) and its routes' advertised MSS.

They are written in the host's namespace, read back and checked (a value that does not
read as set fails the build, naming it), and the read is kept for the run record. The
sysctls take no process: they are written and read in this process, with its thread
inside the host's namespace (:mod:`bufferbloat.netlink.nsconfig`, through the network's
``in_ns``); the routes take ``ip``.
"""

from bufferbloat.core.errors import CommandError
from bufferbloat.netlink import nsconfig

CCA_SYSCTL = "net.ipv4.tcp_congestion_control"
#: the sysctls read back from every host for the record
HOST_SYSCTLS = (CCA_SYSCTL, "net.ipv4.tcp_rmem",
                "net.ipv4.tcp_wmem", "net.ipv4.tcp_ecn", "net.ipv4.tcp_no_metrics_save",
                "net.core.default_qdisc", "net.ipv4.tcp_slow_start_after_idle")
#: the sysctls wanted() may set: their values in the fresh namespace are read before the
#: first write, so that a kept network's next point writes back those it does not set
SET_SYSCTLS = (CCA_SYSCTL, "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_ecn",
               "net.ipv4.tcp_no_metrics_save", "net.ipv4.tcp_slow_start_after_idle")


class HostSettings:
    """The settings of the hosts of a :class:`~bufferbloat.net.network.Network` ``net``
    (its topology says what they are): configure() each, record() them all."""

    def __init__(self, net):
        self.net = net
        self.read_back = {}   # {host: {sysctl: value}} as the build read them back
        self.fresh = {}       # {host: {sysctl: value}} of SET_SYSCTLS before the first write
        #: {host: its routes as ``ip -4 route`` lists them}, read once: a kept network's
        #: next point proves them unchanged (bufferbloat/net/reuse.py) instead
        self.routes = {}

    @property
    def topo(self):
        return self.net.topo

    def wanted(self, host):
        """{sysctl: value} the build sets in ``host``'s namespace, its CCA included."""
        params = self.topo.params
        rcvbuf = params["rcvbuf_bytes"]
        # Mininet lowers tcp_rmem's default to 87380 B: then a flow through a 100-packet
        # buffer is receive-window-limited for seconds while autotuning catches up.
        want = {"net.ipv4.tcp_rmem": f"4096 {rcvbuf} {max(rcvbuf, 16 << 20)}",
                # every flow starts afresh: no ssthresh/RTT cached from an earlier flow
                "net.ipv4.tcp_no_metrics_save": "1"}
        if self.topo.ecn:   # the qdisc marks: connections must be ECN-capable
            want["net.ipv4.tcp_ecn"] = "1"
        ssai = params.get("slow_start_after_idle")
        if ssai is not None:   # 1: the window restarts after an idle RTO (RFC 2861)
            want["net.ipv4.tcp_slow_start_after_idle"] = str(int(ssai))
        sndbuf = params.get("sndbuf_bytes")
        if sndbuf:   # a limited sender buffer caps the window at sndbuf / 2 or so
            want["net.ipv4.tcp_wmem"] = f"4096 {min(16384, sndbuf)} {sndbuf}"
        if host in self.topo.ccas:
            want[CCA_SYSCTL] = self.topo.ccas[host]
        return want

    def configure(self, host, restore=False):
        """Every setting of ``host`` written in its namespace (a key the kernel refuses
        fails the build, naming the key and the refusal, after the others were tried),
        its routes' advmss, and one read back: every value must read as set (the CCA:
        the kernel may refuse one it has not allowed in a namespace). The read is kept
        for record(). The first time, the fresh namespace's values of SET_SYSCTLS are
        read first; ``restore`` (a kept network's next point) writes them back where
        the point does not set its own, and leaves the routes (advmss) as they are."""
        net = self.net
        want = self.wanted(host)
        if host not in self.fresh:        # one call: the fresh values, then the writes
            self.fresh[host], refused = net.in_ns(host, _read_then_write, SET_SYSCTLS,
                                                  want)
        else:
            if restore:
                want = {**self.fresh[host], **want}
            refused = net.in_ns(host, nsconfig.write_sysctls, want)
        if refused:
            raise CommandError(f"{host}: " + "; ".join(
                f'setting key "{k}" to {want[k]!r}: {why}' for k, why in refused.items()))
        advmss = self.topo.params.get("advmss_bytes")
        if advmss and not restore:   # both ends advertise it: each side's segments are at most it
            for route in net.run(host, ["ip", "-4", "route", "show"]).splitlines():
                if route.strip():
                    net.run(host, ["ip", "route", "change", *route.split(),
                                   "advmss", str(int(advmss))])
        got = self.read(host)
        for key, value in want.items():
            if got.get(key) != " ".join(value.split()):
                if key == CCA_SYSCTL:
                    raise CommandError(f"{host}: congestion control is {got.get(key)!r}, "
                                       f"wanted {value!r}")
                raise CommandError(f"{host}: {key} is {got.get(key)!r}, wanted {value!r}")
        self.read_back[host] = got

    def read(self, host):
        """{sysctl: value} of HOST_SYSCTLS in ``host``'s namespace, read in this process;
        a key the namespace lacks (net.core.default_qdisc in a namespace of the 6.1
        kernel) is left out."""
        return self.net.in_ns(host, nsconfig.read_sysctls, HOST_SYSCTLS)

    def record(self):
        """{host: {sysctl: value}} of the TCP settings every host runs with, as read back
        from its namespace (the build's verifying read, or a new one for a host it did not
        configure), and its routes (``ip -4 route``, read once per network: a kept
        network's are proven unchanged by its next point)."""
        out = {}
        for host in sorted(set(self.topo.senders) | {self.topo.receiver}):
            values = self.read_back.get(host)
            out[host] = dict(values if values is not None else self.read(host))
            # its IPv4 routes too: an advertised MSS (advmss_bytes) shows there
            if host not in self.routes:
                self.routes[host] = "; ".join(
                    " ".join(r.split()) for r in self.net.run(
                        host, ["ip", "-4", "route", "show"], check=False).splitlines()
                    if r.strip())
            out[host]["ip -4 route"] = self.routes[host]
        return out


def _read_then_write(keys, values):
    """({key: value} of ``keys`` before, what ``values``' writes refused): in one call
    inside the namespace."""
    return nsconfig.read_sysctls(keys), nsconfig.write_sysctls(values)
