"""Mininet's hosts, interfaces and Linux bridges, configured from this process.

Mininet sets every interface up, its MAC and its address, each host's loopback, and a
Linux bridge's ports through the node's shell (``ifconfig``, ``brctl``): a round trip
per command, ~75 ms under TCG, 191 of them for a network of 20 senders
(bench/bench_build.py). These subclasses, which Mininet takes as its ``host``,
``switch`` and link ``intf`` classes, do the same through the same ioctls in this
process, inside the node's namespace (:mod:`bufferbloat.netlink.ifconf`); anything else
(a form of ``ifconfig`` they do not know, STP) goes to the shell as before.
``tests/host/test_fastmn_host.py`` builds one network each way and finds the same
interfaces, addresses, MACs, flags, routes and bridge ports.

Imports Mininet: import it only where a network is built
(:func:`bufferbloat.net.emulation.build`).
"""

import re
from concurrent.futures import ThreadPoolExecutor, wait

from mininet.link import Intf
from mininet.net import Mininet
from mininet.node import Host
from mininet.nodelib import LinuxBridge

from bufferbloat.netlink import ifconf
from bufferbloat.netlink.nlstats import in_netns

#: ``ifconfig DEV A.B.C.D/N`` as Mininet's Intf.setIP writes it
_ADDRESS = re.compile(r"(\d{1,3}(?:\.\d{1,3}){3})/(\d{1,2})")
#: calls made inside a namespace (Network adds them to its ns_calls)
calls = 0
#: hosts' shells started at once while a build adds its hosts (:class:`FastMininet`):
#: a shell takes ~0.34 s to start under TCG, mostly the guest's exec of bash
SHELL_STARTS = 4
#: (pool, futures) while :meth:`FastMininet.buildFromTopo` adds its hosts
_starting = None


def in_node(node, fn, *args):
    """``fn(*args)`` inside ``node``'s network namespace (a switch: this process's)."""
    global calls  # noqa: PLW0603 - one counter for the module's classes
    calls += 1
    pid = node.pid if getattr(node, "inNamespace", False) else None
    return in_netns(pid, lambda: fn(*args))


def ifconfig_job(dev, args):
    """(function, args) doing ``ifconfig DEV *args`` in-process, or None for a form
    only the tool does."""
    args = tuple(str(a) for a in args)
    if args in (("up",), ("down",)):
        return ifconf.set_up, (dev, args[0] == "up")
    m = _ADDRESS.fullmatch(args[0]) if args else None
    if m and args[1:] in ((), ("up",)):
        return ifconf.set_ipv4, (dev, m[1], int(m[2]), args[1:] == ("up",))
    return None


class FastIntf(Intf):
    """Mininet's interface; ``ifconfig`` up/down/address and ``setMAC`` in-process."""

    def ifconfig(self, *args):
        job = ifconfig_job(self.name, args)
        if job is None:
            return super().ifconfig(*args)
        in_node(self.node, job[0], *job[1])
        return ""      # ifconfig's silence: Mininet reads any output as an error

    def setMAC(self, macstr):  # noqa: N802 - Mininet's name
        self.mac = macstr
        in_node(self.node, ifconf.set_mac, self.name, macstr)
        return ""


class FastHost(Host):
    """Mininet's host; its loopback set up in-process (Node.config otherwise), and its
    shell started beside the other hosts' while :class:`FastMininet` builds."""

    def startShell(self, mnopts=None):  # noqa: N802 - Mininet's name
        if _starting is None or self.privateDirs:    # (mounting them needs the shell)
            return super().startShell(mnopts)
        pool, futures = _starting
        futures.append(pool.submit(super().startShell, mnopts))
        return None

    def config(self, mac=None, ip=None, defaultRoute=None, lo="up", **_params):  # noqa: N803
        r = {}
        self.setParam(r, "setMAC", mac=mac)
        self.setParam(r, "setIP", ip=ip)
        self.setParam(r, "setDefaultRoute", defaultRoute=defaultRoute)
        if lo in ("up", "down"):
            in_node(self, ifconf.set_up, "lo", lo == "up")
        else:
            self.cmd("ifconfig lo " + lo)
        return r


class FastLinuxBridge(LinuxBridge):
    """Mininet's Linux bridge; without STP, created and its ports added in-process."""

    def start(self, controllers):
        if self.stp:
            return super().start(controllers)
        ports = [i.name for i in self.intfList() if self.name in i.name]
        in_node(self, ifconf.bridge_start, self.name, ports)
        return None


class FastMininet(Mininet):
    """Mininet, whose build starts the hosts' shells side by side (at most
    :data:`SHELL_STARTS` at once) and waits for them all before its first link (a link
    needs both ends' shells: their namespaces)."""

    def buildFromTopo(self, topo=None):  # noqa: N802 - Mininet's name
        global _starting  # noqa: PLW0603 - one build at a time in a process (its lock)
        futures = []
        with ThreadPoolExecutor(SHELL_STARTS, thread_name_prefix="mn-shell") as pool:
            _starting = (pool, futures)
            try:
                super().buildFromTopo(topo)
                _shells_ready(futures)
            except BaseException:
                for future in futures:      # those not begun: never started
                    future.cancel()
                raise
            finally:
                _starting = None
                wait(futures)      # a failed build's teardown ends every shell by PID

    def addLink(self, *args, **kwargs):  # noqa: N802 - Mininet's name
        if _starting is not None:
            _shells_ready(_starting[1])
        return super().addLink(*args, **kwargs)


def _shells_ready(futures):
    """Wait for every shell started so far; the first one that failed raises."""
    for future in futures:
        future.result()
