"""A running emulated network: build a topology, own everything it creates, tear it down.

:class:`Network` checks every kernel feature and tool the topology needs *before* it
creates anything, then builds the Mininet hosts and switch, turns segmentation offloads
off on every emulated interface (so a "packet" is one MTU frame, not a 32 KB GSO
super-packet), installs the qdisc plan of :mod:`bufferbloat.net.bottleneck`, sets each
sender's congestion control, and reads the installed trees back for the record.

Every tool it runs is a process of its own, and under TCG each costs 60-150 ms: a
namespace's consecutive ``tc`` steps go to one ``tc -batch``, a namespace's read-back to
one ``tc -batch``. Offloads and a host's sysctls (its CCA included) take no process at
all: they are set and read back in this process, inside the host's namespace
(:mod:`bufferbloat.netlink.nsconfig`: ethtool's ioctl, /proc/sys). The processes are
counted (``tool_calls``; the record's timings hold ``build_tool_calls`` and
``readback_tool_calls``), and so are the in-namespace calls (``ns_calls``).

It owns what it starts: processes are tracked by PID and ended by PID; nothing is ever
killed by name. Use it as a context manager so that teardown runs on errors and signals.

:class:`Network` is what the rest of the suite uses; it runs every tool (``run``,
``popen``, ``in_ns``) and leaves each part of the work to a module of its own:

==================  ========================================================================
``lock``            one network per network namespace: the lock file
``sysctls``         the global sysctls set for the run (CCAs allowed, br_netfilter off),
                    restored on stop
``emulation``       Mininet's hosts, switch and links: built, recorded for recovery, stopped
``links``           the links' interfaces: their names, offloads off
``hosts``           each host's TCP sysctls (its CCA) and routes' advmss, read back
``qdiscplan``       the qdisc plan run in tc batches, the installed trees read back
``control``         control connections beside the emulated links
==================  ========================================================================
"""

import os
import subprocess
import time

from bufferbloat.core.errors import CommandError, UsageError
from bufferbloat.core.signals import deferred_signals, stop_process, terminate_on_sigterm
from bufferbloat.net import bottleneck as bn
from bufferbloat.net import emulation, isolation
from bufferbloat.net.capabilities import auto_switch, needed_for_switch, probe
from bufferbloat.net.cleanup import (
    LOCK_PATH,  # noqa: F401 - the initial namespace's lock, named here for the tests
    NetworkState,
    network_paths,
    recover,
)
from bufferbloat.net.control import ControlPaths
from bufferbloat.net.hosts import HOST_SYSCTLS, HostSettings
from bufferbloat.net.links import offloads_off
from bufferbloat.net.lock import remove_lock, take_lock
from bufferbloat.net.qdiscplan import QdiscPlan
from bufferbloat.net.sysctls import GlobalSysctls
from bufferbloat.netlink import netclean
from bufferbloat.netlink.nlstats import in_netns

HELD_NOTE = ("bufferbloat: interrupt received: finishing {what} first, so that nothing "
             "is left behind")


class Network:
    """An emulated network built from a topology (see :mod:`bufferbloat.net.topology`).

    topo: a dumbbell topology. switch: 'auto' | 'ovs' | 'bridge' (overrides the topology's
    own ``switch`` parameter when given). caps: a
    :class:`~bufferbloat.net.capabilities.Capabilities` (default: probe this machine).
    """

    #: how long the kernel gets to remove a host's veth pair once its namespace is gone
    LINKS_GONE_S = 5.0
    #: the environment variable that picks how Mininet's nodes are configured
    MININET_CONFIG_ENV = emulation.MININET_CONFIG_ENV
    #: the sysctls read back from every host for the record
    HOST_SYSCTLS = HOST_SYSCTLS
    in_process_config = staticmethod(emulation.in_process_config)

    def __init__(self, topo, switch=None, caps=None):
        self.topo = topo
        self.caps = caps or probe()
        kind = switch or topo.params.get("switch", "auto")
        if kind == "auto":
            # Open vSwitch's bridges and datapath are the initial namespace's (its daemon
            # lives there): a network in a namespace of its own takes a Linux bridge, or
            # two such networks would share one "s0" and a killed one's would outlive
            # its namespace
            kind = auto_switch(self.caps) if isolation.in_initial_netns() else "bridge"
        self.switch_kind = kind
        self.features = sorted(set(bn.features_for(topo))
                               | set(needed_for_switch(self.switch_kind)))
        self.net = None          # Mininet's network while it exists (emulation.build)
        self.procs = []
        self.plan = []
        self.timings = {}
        self.tool_calls = 0      # tool processes run (Network.run), for the record
        self.ns_calls = 0        # calls made inside a namespace in this process (in_ns)
        self.intfs = {}          # {(a, b): (interface at a, interface at b)} of each link
        self._lock = None        # the lock file while we hold it (lock.take_lock)
        self.state = None        # the state file (cleanup.NetworkState) while we exist
        self.state_path = self.lock_path = None   # this namespace's (cleanup.network_paths)
        self.recovered = None    # what a killed earlier run left and start() removed
        self.global_sysctls = GlobalSysctls(self)   # set for the run, restored on stop
        self.host_config = HostSettings(self)       # the hosts' sysctls and routes
        self.qdisc_plan = QdiscPlan(self)           # runs self.plan, reads it back
        self._control = None     # control paths beside the emulated links (control.py)
        #: {host: routes, policy rules, interfaces} read right after the build, for a
        #: kept network's proof (bufferbloat/net/reuse.py)
        self.fresh_layout = None

    # ----------------------------------------------------------------- lifecycle
    def check(self):
        """Raise before touching anything if this machine lacks what the topology needs."""
        if os.geteuid() != 0:
            raise UsageError("building a network needs root: run with sudo")
        self.caps.require(self.features)
        self.in_process_config()      # a bad BUFFERBLOAT_MININET_CONFIG, before anything
        if self.switch_kind == "ovs" and not isolation.in_initial_netns():
            raise UsageError("switch=ovs: Open vSwitch's bridges belong to the initial "
                             "network namespace, and this run is in a namespace of its "
                             "own: use switch=bridge (or auto) here")
        # outside the initial namespace: are its CCAs allowed? (nothing can change it)
        isolation.check_ccas(self.topo.ccas.values())

    def start(self):
        """Check, then build and configure the network. Returns self.

        The lock and state file are this network namespace's (cleanup.network_paths):
        networks in different namespaces run side by side. After the lock, leftovers of
        an earlier run killed with SIGKILL are removed (as its state file recorded them).
        The build itself holds SIGINT/SIGTERM until it is done (a half-built Mininet
        cannot be torn down reliably); then they interrupt. A start that fails leaves
        no state file, unless something it could not remove needs the next run's
        recovery."""
        self.check()
        self.state_path, self.lock_path = network_paths()
        self._take_lock()
        try:
            self.recovered = recover(self.state_path)
            self.state = NetworkState(self.state_path)
            self.state.save()
        except BaseException:
            self._release_lock()
            raise
        terminate_on_sigterm()
        t0, calls0, ns0 = time.monotonic(), self.tool_calls, self.ns_calls
        try:
            with deferred_signals(HELD_NOTE.format(what="the network's build")):
                self._allow_ccas()
                if self.switch_kind == "bridge":
                    self._bridge_without_netfilter()
                self._build_mininet()
            self._configure()
        except BaseException:
            self.stop()
            raise
        self.timings["build_s"] = time.monotonic() - t0
        self.timings["build_tool_calls"] = self.tool_calls - calls0
        self.timings["build_ns_calls"] = self.ns_calls - ns0
        return self

    def stop(self):
        """End every process we started (by PID), remove the network, restore sysctls.

        SIGINT/SIGTERM wait until this is done. The state file goes only when everything
        was removed; otherwise the next run's start() finishes the job."""
        with deferred_signals(HELD_NOTE.format(what="the teardown")):
            self._stop()

    def _stop(self):
        t0 = time.monotonic()
        clean = False
        try:
            for proc in reversed(self.procs):
                stop_process(proc)
            self.procs.clear()
            if self.net is not None:
                net, self.net = self.net, None
                emulation.stop(self, net)
            self.global_sysctls.restore()
            clean = True
        finally:
            self.timings["teardown_s"] = time.monotonic() - t0
            if clean and self.state is not None:
                self.state.remove()
                self.state = None
                self._remove_namespace_dir()
            self._release_lock()

    def _take_lock(self):
        """One emulated network per network namespace (:mod:`bufferbloat.net.lock`)."""
        self._lock = take_lock(self.lock_path or network_paths()[1])

    def _release_lock(self):
        if self._lock is not None:
            self._lock.close()  # closing the file releases the lock
            self._lock = None

    def _remove_namespace_dir(self):
        """In a namespace of its own, a clean stop leaves nothing under /run: the lock
        goes, while held, and its directory with it when empty (lock.remove_lock)."""
        if self._lock is not None:
            remove_lock(self.lock_path)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    # ----------------------------------------------------------------- building
    # each step is a method of its own: a test replaces one on an instance, and
    # bench/bench_build.py times each by its name
    @property
    def _saved_sysctls(self):
        """{sysctl: value before the run} of the global sysctls set (GlobalSysctls)."""
        return self.global_sysctls.saved

    def _allow_ccas(self):
        self.global_sysctls.allow_ccas()

    def _bridge_without_netfilter(self):
        self.global_sysctls.bridge_without_netfilter()

    def _build_mininet(self):
        emulation.build(self)

    def _configure(self):
        hosts = set(self.topo.senders) | {self.topo.receiver}
        for (a, b), (ia, ib) in self.intfs.items():
            self.offloads_off(bn.node_ns(a, hosts), ia)
            self.offloads_off(bn.node_ns(b, hosts), ib)
        self.plan = bn.plan_network(self.topo, self.intfs)
        self._run_plan()
        for host in sorted(hosts):
            self._configure_host(host)

    def _run_plan(self):
        self.qdisc_plan.install()

    def _configure_host(self, host):
        self.host_config.configure(host)

    def host_settings(self, host):
        """{sysctl: value} the build sets in ``host``'s namespace, its CCA included."""
        return self.host_config.wanted(host)

    def sysctls(self):
        """{host: {sysctl: value}} of the TCP settings every host runs with, as read back
        from its namespace, and its routes (``ip -4 route``): HostSettings.record."""
        calls0 = self.tool_calls
        out = self.host_config.record()
        self._count_readback(calls0)
        return out

    def offloads_off(self, ns, dev):
        """Turn TSO/GSO/GRO off on ``dev`` and verify it, in this process
        (:func:`bufferbloat.net.links.offloads_off`)."""
        offloads_off(self, ns, dev)

    # ----------------------------------------------------------------- commands
    def in_ns(self, ns, fn, *args):
        """``fn(*args)`` called in this process with its thread inside ``ns``'s network
        namespace (None: the one this process is in); counted in ``ns_calls``."""
        self.ns_calls += 1
        pid = None if ns is None else self.net[ns].pid
        return in_netns(pid, lambda: fn(*args))

    def ns_prefix(self, ns):
        """argv prefix that runs a command in host ``ns`` (None: the root namespace)."""
        if ns is None:
            return []
        return ["nsenter", "-t", str(self.net[ns].pid), "-n", "--"]

    def run(self, ns, argv, check=True, timeout=60, stdin=None):
        """Run ``argv`` (a list, never a shell string) in ``ns``, with ``stdin`` (text) as
        its input; return its stdout."""
        res = self.run_process(ns, argv, timeout=timeout, stdin=stdin)
        if check and res.returncode != 0:
            raise CommandError(f"{' '.join(res.args)} failed ({res.returncode}): "
                               f"{res.stderr.strip() or res.stdout.strip()}")
        return res.stdout

    def run_process(self, ns, argv, timeout=60, stdin=None):
        """One tool process in ``ns`` (``nsenter`` execs the tool: one process, counted
        in ``tool_calls``), waited for: its CompletedProcess, whatever its exit status."""
        full = self.ns_prefix(ns) + [str(a) for a in argv]
        self.tool_calls += 1
        return subprocess.run(full, input=stdin, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def _count_readback(self, calls0):
        """Add the tool processes run since ``calls0`` to the read-back's count."""
        self.timings["readback_tool_calls"] = (self.timings.get("readback_tool_calls", 0)
                                               + self.tool_calls - calls0)

    def popen(self, ns, argv, **kwargs):
        """Start ``argv`` in ``ns``; the process is ours and ends with the network."""
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        kwargs.setdefault("text", True)
        proc = subprocess.Popen(self.ns_prefix(ns) + [str(a) for a in argv],
                                start_new_session=True, **kwargs)
        self.procs.append(proc)
        if self.state is not None:
            self.state.add_proc(proc.pid, " ".join(str(a) for a in argv))
        return proc

    def ip(self, host):
        """IPv4 address of ``host``."""
        return self.net[host].IP()

    def listening_ports(self, host):
        """The TCP ports something listens on in ``host`` (what ``ss -Hltn`` lists), read
        in this process: no tool process (:mod:`bufferbloat.netlink.netclean`)."""
        return self.in_ns(host, netclean.listening_ports)

    def control_path(self, client, server, port):
        """Send the TCP connections from ``client`` to ``server``:``port`` over a veth
        straight between the two hosts, beside the emulated links (a tool's control
        connection: :mod:`bufferbloat.net.control`). Returns what the record keeps."""
        if self._control is None:
            self._control = ControlPaths(self)
        return self._control.add(client, server, port)

    @property
    def has_control_paths(self):
        """Whether control paths were added (a veth between two hosts, policy rules)."""
        return self._control is not None

    def remove_control_paths(self):
        """Remove every control path (their veths, routes and rules); returns how many
        pairs of hosts had one."""
        control, self._control = self._control, None
        return control.remove() if control is not None else 0

    # ----------------------------------------------------------------- bottleneck
    @property
    def bottleneck_dev(self):
        """(namespace, interface) of the bottleneck egress: the switch port to the
        receiver."""
        spec = self.topo.bottleneck
        return None, self.intfs[(spec.a, spec.b)][0]

    def qdisc_show(self, ns, dev, stats=True):
        """``tc -j [-s] qdisc show dev`` parsed."""
        return self.qdisc_plan.qdisc_show(ns, dev, stats)

    def readback(self):
        """The installed qdiscs and classes of every configured interface, as tc reports
        them: {"ns/dev": {"qdiscs": [...], "classes": "text"}} (QdiscPlan.readback)."""
        calls0 = self.tool_calls
        out = self.qdisc_plan.readback()
        self._count_readback(calls0)
        return out

    def _readback_dev(self, ns, dev):
        return self.qdisc_plan.readback_dev(ns, dev)

    def bottleneck_tree(self):
        """Readback of the bottleneck egress, checked: htb root, AQM leaf at 1:1."""
        return self.qdisc_plan.bottleneck_tree()

    def describe(self):
        """JSON-ready record: topology, switch, the network namespace it was built in
        (its inode, whether it is the initial one, its state file), plan, installed
        trees, timings."""
        return {"topology": self.topo.describe(), "switch": self.switch_kind,
                "netns": {"inode": isolation.netns_inode(),
                          "initial": isolation.in_initial_netns(),
                          "state_file": self.state_path},
                "interfaces": {f"{a}-{b}": list(v) for (a, b), v in self.intfs.items()},
                "plan": [s.to_dict() for s in self.plan],
                "installed": self.readback() if self.net else None,
                "timings": dict(self.timings)}
