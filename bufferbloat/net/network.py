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
"""

import fcntl
import itertools
import json
import os
import re
import subprocess
import time

from bufferbloat.core.errors import CommandError, UsageError  # noqa: F401 - CommandError: named here too
from bufferbloat.core.signals import deferred_signals, stop_process, terminate_on_sigterm
from bufferbloat.net import bottleneck as bn
from bufferbloat.net import isolation
from bufferbloat.net.capabilities import auto_switch, needed_for_switch, probe
from bufferbloat.net.cleanup import (
    LOCK_PATH,  # noqa: F401 - the initial namespace's lock, named here for the tests
    NetworkState,
    link_index,
    make_private_dirs,
    network_paths,
    owns_directory,
    recover,
)
from bufferbloat.net.control import ControlPaths
from bufferbloat.net.isolation import ALLOWED_CCAS, AVAILABLE_CCAS
from bufferbloat.netlink import nsconfig
from bufferbloat.netlink.nlstats import in_netns

OFFLOADS = ("tso", "gso", "gro")
CCA_SYSCTL = "net.ipv4.tcp_congestion_control"
#: an argument tc -batch reads back as itself (its lines are split at white space; '#'
#: starts a comment; quotes and backslashes are its own)
_TC_BATCH_ARG = re.compile(r"[^\s#\"'\\]+")
LOCK_WAIT_ENV = "BUFFERBLOAT_NETWORK_WAIT_S"  # how long to wait for another network


HELD_NOTE = ("bufferbloat: interrupt received: finishing {what} first, so that nothing "
             "is left behind")


class Network:
    """An emulated network built from a topology (see :mod:`bufferbloat.net.topology`).

    topo: a dumbbell topology. switch: 'auto' | 'ovs' | 'bridge' (overrides the topology's
    own ``switch`` parameter when given). caps: a
    :class:`~bufferbloat.net.capabilities.Capabilities` (default: probe this machine).
    """

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
        self.net = None
        self.procs = []
        self.plan = []
        self.timings = {}
        self.tool_calls = 0      # tool processes run (Network.run), for the record
        self.ns_calls = 0        # calls made inside a namespace in this process (in_ns)
        self._host_sysctls = {}  # {host: {sysctl: value}} as the build read them back
        self._saved_sysctls = {}
        self.intfs = {}
        self._lock = None
        self.state = None        # the state file (cleanup.NetworkState) while we exist
        self.state_path = self.lock_path = None   # this namespace's (cleanup.network_paths)
        self.recovered = None    # what a killed earlier run left and start() removed
        self._control = None     # control paths beside the emulated links (control.py)

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
                self._stop_mininet(net)
            for path, value in reversed(list(self._saved_sysctls.items())):
                isolation.write_sysctl(path, value)
            self._saved_sysctls.clear()
            clean = True
        finally:
            self.timings["teardown_s"] = time.monotonic() - t0
            if clean and self.state is not None:
                self.state.remove()
                self.state = None
                self._remove_namespace_dir()
            self._release_lock()

    #: how long the kernel gets to remove a host's veth pair once its namespace is gone
    LINKS_GONE_S = 5.0

    def _stop_mininet(self, net):
        """Mininet's stop, without its ``ip link del`` of every veth end through a shell
        (150 ms each under TCG: 42 at k = 20, bench/bench_build.py). With a Linux bridge:
        end each host's shell (Mininet's terminate: its process group, by PID, waited
        for); the host's namespace goes with its last process, and the kernel removes the
        veth pairs in it, the switch's ends with them. Wait (LINKS_GONE_S at most) for the
        switch's ports to be gone; delete any still there, then the bridge (one ``ip
        link del`` each) and end the switch's shell. A link that is still there after
        that fails the stop, naming it (the state file keeps it for the next run's
        recovery). Open vSwitch keeps bridges in its database: Mininet's own stop."""
        if self.switch_kind != "bridge":
            net.stop()
            return
        ports = [i.name for sw in net.switches for i in sw.intfList() if i.name != "lo"]
        bridges = [sw.name for sw in net.switches]
        for host in net.hosts:
            host.terminate()
        deadline = time.monotonic() + self.LINKS_GONE_S
        while any(link_index(p) is not None for p in ports) and time.monotonic() < deadline:
            time.sleep(0.02)
        for name in ports + bridges:
            if link_index(name) is not None:
                self.run(None, ["ip", "link", "del", "dev", name], check=False)
        for sw in net.switches:
            sw.terminate()
        left = [n for n in ports + bridges if link_index(n) is not None]
        if left:
            raise CommandError(f"the teardown left links behind: {', '.join(left)}")

    def _remove_namespace_dir(self):
        """In a namespace of its own, a clean stop leaves nothing under /run: the lock
        goes (unlinked while held: a waiter then finds it replaced and takes the new
        one, see _take_lock) and its directory with it when empty."""
        if self._lock is None or not owns_directory(self.lock_path):
            return
        try:
            os.unlink(self.lock_path)
            os.rmdir(os.path.dirname(self.lock_path))
        except OSError:
            pass    # already gone, or another run's files are there: leave them

    def _release_lock(self):
        if self._lock is not None:
            self._lock.close()  # closing the file releases the lock
            self._lock = None

    def _take_lock(self):
        """One emulated network per network namespace: Mininet's names (h1, s0, s0-eth1)
        are the namespace's, and a second network would collide with, or tear down, the
        first. Networks in different namespaces have different locks."""
        path = self.lock_path or network_paths()[1]
        wait_s = float(os.environ.get(LOCK_WAIT_ENV) or 0)
        deadline = time.monotonic() + wait_s
        while True:
            make_private_dirs(path)
            try:
                lock = open(path, "a+")
            except FileNotFoundError:     # its directory was just removed: again
                continue
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() < deadline:
                    lock.close()
                    time.sleep(0.5)
                    continue
                lock.seek(0)
                owner = lock.read().strip() or "unknown"
                lock.close()
                where = "on this machine" if isolation.in_initial_netns() else \
                    "in this network namespace"
                raise UsageError(f"another bufferbloat network is running {where} "
                                 f"(pid {owner}); wait for it to finish (or set "
                                 f"{LOCK_WAIT_ENV}=SECONDS to wait)") from None
            if _same_file(lock, path):
                break
            lock.close()    # its holder removed it on stop: take the one there now
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()))
        lock.flush()
        self._lock = lock

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    # ----------------------------------------------------------------- building
    def _allow_ccas(self):
        """Make the senders' CCAs selectable inside namespaces (loading modules if need be).

        Non-initial namespaces (the Mininet hosts) may only pick algorithms listed in the
        global net.ipv4.tcp_allowed_congestion_control. In the initial namespace the run
        loads the modules and extends the list, restoring it on stop. In any other one
        both are global and out of reach: nothing is written, and a CCA not allowed is
        refused (isolation.check_ccas; check() did so before anything was created).
        """
        wanted = set(self.topo.ccas.values())
        if not isolation.in_initial_netns():
            isolation.check_ccas(wanted)
            return
        available = set(isolation.read_sysctl(AVAILABLE_CCAS).split())
        for cca in sorted(wanted - available):
            self.run(None, ["modprobe", f"tcp_{cca}"])
        allowed = isolation.read_sysctl(ALLOWED_CCAS).split()
        if not wanted <= set(allowed):
            self._set_sysctl(ALLOWED_CCAS, " ".join(allowed + sorted(wanted - set(allowed))))

    def _bridge_without_netfilter(self):
        """Keep bridged frames out of the host's iptables (br_netfilter), for the run.

        The switches are per network namespace since Linux 5.3: each is written where it
        is writable from here, and skipped where it is absent (br_netfilter not loaded,
        or an older kernel that shows them in the initial namespace only)."""
        for table in ("arptables", "iptables", "ip6tables"):
            path = f"net/bridge/bridge-nf-call-{table}"
            if os.access(f"/proc/sys/{path}", os.W_OK):
                self._set_sysctl(path, "0")

    def _set_sysctl(self, path, value):
        """Set a sysctl for the run; the first value seen is restored on stop. A write
        that fails changed nothing: it is not recorded, so stop() does not restore it."""
        first = path not in self._saved_sysctls
        if first:
            self._saved_sysctls[path] = isolation.read_sysctl(path)
            if self.state is not None:
                self.state.set_sysctl(path, self._saved_sysctls[path])
        try:
            isolation.write_sysctl(path, value)
        except OSError:
            if first:
                del self._saved_sysctls[path]
                if self.state is not None:
                    self.state.forget_sysctl(path)
            raise

    def _build_mininet(self):
        from mininet.link import Link  # noqa: PLC0415 - Mininet only where a network is built
        from mininet.log import setLogLevel  # noqa: PLC0415 - Mininet only where a network is built
        from mininet.net import Mininet  # noqa: PLC0415 - Mininet only where a network is built
        from mininet.node import OVSBridge  # noqa: PLC0415 - Mininet only where a network is built
        from mininet.nodelib import LinuxBridge  # noqa: PLC0415 - Mininet only where a network is built

        setLogLevel(os.environ.get("BUFFERBLOAT_MININET_LOG", "warning"))
        kinds, bridge, mininet = {}, LinuxBridge, Mininet
        if self.in_process_config():
            from bufferbloat.net import fastmn  # noqa: PLC0415 - imports Mininet
            kinds = {"host": fastmn.FastHost, "intf": fastmn.FastIntf}
            bridge, mininet, calls0 = fastmn.FastLinuxBridge, fastmn.FastMininet, fastmn.calls
        switch = OVSBridge if self.switch_kind == "ovs" else bridge
        self.net = mininet(topo=None, switch=switch, controller=None, link=Link,
                           autoSetMacs=True, build=False, waitConnected=False, **kinds)
        # Build through our reference so that a failure half-way is still torn down.
        self.net.topo = self.topo.to_mininet()
        if self.state is not None:
            self.state.plan_links(self._planned_root_links())
        try:
            self.net.build()
            self._record_mininet()
            self.net.start()
            self._record_mininet()
        finally:
            if kinds:
                self.ns_calls += fastmn.calls - calls0
        for spec in self.topo.link_specs:
            link = self.net.linksBetween(self.net[spec.a], self.net[spec.b])[0]
            i1, i2 = link.intf1, link.intf2
            if i1.node.name != spec.a:
                i1, i2 = i2, i1
            self.intfs[(spec.a, spec.b)] = (i1.name, i2.name)

    #: Mininet's interfaces, loopbacks and Linux bridges set up from this process
    #: (:mod:`bufferbloat.net.fastmn`) rather than through its shells; env
    #: BUFFERBLOAT_MININET_CONFIG=shell keeps Mininet's own way (to compare the two)
    MININET_CONFIG_ENV = "BUFFERBLOAT_MININET_CONFIG"

    @classmethod
    def in_process_config(cls):
        """Whether the build configures Mininet's nodes in-process (the default)."""
        value = os.environ.get(cls.MININET_CONFIG_ENV, "in-process")
        if value not in ("in-process", "shell"):
            raise UsageError(f"invalid value for {cls.MININET_CONFIG_ENV}: {value!r} "
                             "(allowed: in-process, shell)")
        return value == "in-process"

    def _planned_root_links(self):
        """Names of the root-namespace links the build will create: each switch (a
        bridge) and its ports (Mininet numbers a switch's ports from 1)."""
        degree = {}
        for a, b in self.topo.links():
            for n in (a, b):
                degree[n] = degree.get(n, 0) + 1
        names = []
        for sw in self.topo.switches():
            names.append(sw)
            names += [f"{sw}-eth{i}" for i in range(1, degree.get(sw, 0) + 1)]
        return names

    def _record_mininet(self):
        """Record Mininet's shells (by PID and start time) and root-namespace links."""
        if self.state is None or self.net is None:
            return
        for node in list(self.net.hosts) + list(self.net.switches):
            if getattr(node, "pid", None) and str(node.pid) not in self.state.data["procs"]:
                self.state.add_proc(node.pid, f"mininet shell {node.name}")
        names = []
        for sw in self.net.switches:
            names.append(sw.name)
            names += [i.name for i in sw.intfList() if i.name != "lo"]
        self.state.add_links(names)
        if self.switch_kind == "ovs":
            self.state.data.setdefault("ovs_bridges", [])
            for sw in self.net.switches:
                if sw.name not in self.state.data["ovs_bridges"]:
                    self.state.data["ovs_bridges"].append(sw.name)
            self.state.save()

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
        """Run the plan, one namespace after the other (no step touches a device of
        another namespace), each namespace's steps in their order; consecutive tc steps
        go to one ``tc -batch -``: one process instead of one per step."""
        by_ns = {}
        for step in self.plan:
            by_ns.setdefault(step.ns, []).append(step)
        for ns, steps in by_ns.items():
            for batched, group in itertools.groupby(steps, key=lambda s: _tc_batchable(s.argv)):
                group = list(group)
                if batched and len(group) > 1:
                    self._tc_batch(ns, group)
                    continue
                for step in group:
                    self.run(ns, list(step.argv))
                    if step.argv[:4] == ("ip", "link", "set", bn.IFB_DEV):
                        self.offloads_off(ns, bn.IFB_DEV)

    def _tc_batch(self, ns, steps):
        """Run tc ``steps`` (of namespace ``ns``) as one ``tc -batch -``. tc stops at the
        first command that fails and names its line: the error names that step."""
        script = "".join(" ".join(str(a) for a in s.argv[1:]) + "\n" for s in steps)
        res = self._exec(ns, ["tc", "-batch", "-"], stdin=script)
        if res.returncode != 0:
            line = re.search(r"Command failed -:(\d+)", res.stderr)
            n = int(line.group(1)) if line else 0
            what = steps[n - 1].argv if 0 < n <= len(steps) else ("tc", "-batch", "-")
            full = self.ns_prefix(ns) + [str(a) for a in what]
            raise CommandError(f"{' '.join(full)} failed ({res.returncode}, in a tc batch "
                               f"of {len(steps)}): {res.stderr.strip() or res.stdout.strip()}")

    def host_settings(self, host):
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

    def _configure_host(self, host):
        """Every setting of ``host`` written in its namespace (a key the kernel refuses
        fails the build, naming the key and the refusal, after the others were tried),
        its routes' advmss, and one read back: every value must read as set (the CCA:
        the kernel may refuse one it has not allowed in a namespace). The read is kept
        for sysctls()."""
        want = self.host_settings(host)
        refused = self.in_ns(host, nsconfig.write_sysctls, want)
        if refused:
            raise CommandError(f"{host}: " + "; ".join(
                f'setting key "{k}" to {want[k]!r}: {why}' for k, why in refused.items()))
        advmss = self.topo.params.get("advmss_bytes")
        if advmss:   # both ends advertise it: each side's segments are at most it
            for route in self.run(host, ["ip", "-4", "route", "show"]).splitlines():
                if route.strip():
                    self.run(host, ["ip", "route", "change", *route.split(),
                                    "advmss", str(int(advmss))])
        got = self._read_host_sysctls(host)
        for key, value in want.items():
            if got.get(key) != " ".join(value.split()):
                if key == CCA_SYSCTL:
                    raise CommandError(f"{host}: congestion control is {got.get(key)!r}, "
                                       f"wanted {value!r}")
                raise CommandError(f"{host}: {key} is {got.get(key)!r}, wanted {value!r}")
        self._host_sysctls[host] = got

    HOST_SYSCTLS = (CCA_SYSCTL, "net.ipv4.tcp_rmem",
                    "net.ipv4.tcp_wmem", "net.ipv4.tcp_ecn", "net.ipv4.tcp_no_metrics_save",
                    "net.core.default_qdisc", "net.ipv4.tcp_slow_start_after_idle")

    def _read_host_sysctls(self, host):
        """{sysctl: value} of HOST_SYSCTLS in ``host``'s namespace, read in this process;
        a key the namespace lacks (net.core.default_qdisc in a namespace of the 6.1
        kernel) is left out."""
        return self.in_ns(host, nsconfig.read_sysctls, self.HOST_SYSCTLS)

    def sysctls(self):
        """{host: {sysctl: value}} of the TCP settings every host runs with, as read back
        from its namespace (for the run record: the build's verifying read, or a new one
        for a host it did not configure), and its routes (``ip -4 route``)."""
        calls0 = self.tool_calls
        out = {}
        for host in sorted(set(self.topo.senders) | {self.topo.receiver}):
            values = self._host_sysctls.get(host)
            out[host] = dict(values if values is not None else self._read_host_sysctls(host))
            # its IPv4 routes too: an advertised MSS (advmss_bytes) shows there
            out[host]["ip -4 route"] = "; ".join(
                " ".join(r.split()) for r in self.run(host, ["ip", "-4", "route", "show"],
                                                      check=False).splitlines() if r.strip())
        self._count_readback(calls0)
        return out

    def offloads_off(self, ns, dev):
        """Turn TSO/GSO/GRO off on ``dev`` (every feature bit ``ethtool -K DEV tso off
        gso off gro off`` clears) and verify it, in this process."""
        try:
            left = self.in_ns(ns, nsconfig.offloads_off, dev, OFFLOADS)
        except (OSError, ValueError) as exc:
            raise CommandError(f"{self._where(ns)}: {getattr(exc, 'strerror', None) or exc}"
                               ) from None
        if left:
            raise CommandError(f"{self._where(ns)}: {dev}: " + "; ".join(
                f"{o} is still on ({', '.join(names)})" for o, names in left.items()))

    # ----------------------------------------------------------------- commands
    def in_ns(self, ns, fn, *args):
        """``fn(*args)`` called in this process with its thread inside ``ns``'s network
        namespace (None: the one this process is in); counted in ``ns_calls``."""
        self.ns_calls += 1
        pid = None if ns is None else self.net[ns].pid
        return in_netns(pid, lambda: fn(*args))

    @staticmethod
    def _where(ns):
        return "root namespace" if ns is None else ns

    def ns_prefix(self, ns):
        """argv prefix that runs a command in host ``ns`` (None: the root namespace)."""
        if ns is None:
            return []
        return ["nsenter", "-t", str(self.net[ns].pid), "-n", "--"]

    def run(self, ns, argv, check=True, timeout=60, stdin=None):
        """Run ``argv`` (a list, never a shell string) in ``ns``, with ``stdin`` (text) as
        its input; return its stdout."""
        res = self._exec(ns, argv, timeout=timeout, stdin=stdin)
        if check and res.returncode != 0:
            raise CommandError(f"{' '.join(res.args)} failed ({res.returncode}): "
                               f"{res.stderr.strip() or res.stdout.strip()}")
        return res.stdout

    def _exec(self, ns, argv, timeout=60, stdin=None):
        """One tool process in ``ns`` (``nsenter`` execs the tool: one process, counted
        in ``tool_calls``), waited for: its CompletedProcess."""
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

    def control_path(self, client, server, port):
        """Send the TCP connections from ``client`` to ``server``:``port`` over a veth
        straight between the two hosts, beside the emulated links (a tool's control
        connection: :mod:`bufferbloat.net.control`). Returns what the record keeps."""
        if self._control is None:
            self._control = ControlPaths(self)
        return self._control.add(client, server, port)

    # ----------------------------------------------------------------- bottleneck
    @property
    def bottleneck_dev(self):
        """(namespace, interface) of the bottleneck egress: the switch port to the
        receiver."""
        spec = self.topo.bottleneck
        return None, self.intfs[(spec.a, spec.b)][0]

    def qdisc_show(self, ns, dev, stats=True):
        """``tc -j [-s] qdisc show dev`` parsed."""
        args = ["tc", "-j"] + (["-s"] if stats else []) + ["qdisc", "show", "dev", dev]
        return json.loads(tc_json_fixed(self.run(ns, args)) or "[]")

    def readback(self):
        """The installed qdiscs and classes of every configured interface, as tc reports
        them: {"ns/dev": {"qdiscs": [...], "classes": "text"}}.

        Classes are kept as tc's text: iproute2 6.1 has no JSON output for HTB classes.
        One tc per namespace reads all its devices (readback_batch); should its output
        not parse (parse_readback_batch), that namespace is read one device at a time.
        """
        calls0 = self.tool_calls
        where = sorted({(s.ns, s.argv[4]) for s in self.plan
                        if s.argv[:2] == ("tc", "qdisc")}, key=str)
        by_ns = {}
        for ns, dev in where:
            by_ns.setdefault(ns, []).append(dev)
        got = {}
        for ns, devs in by_ns.items():
            argv, script = readback_batch(devs)
            per_dev = parse_readback_batch(self.run(ns, argv, stdin=script), devs)
            for dev in devs:
                got[ns, dev] = per_dev[dev] if per_dev else self._readback_dev(ns, dev)
        self._count_readback(calls0)
        return {f"{ns or 'root'}/{dev}": got[ns, dev] for ns, dev in where}

    def _readback_dev(self, ns, dev):
        """One device's readback entry: ``tc -j -s qdisc show dev`` and ``tc class show
        dev``, two processes."""
        classes = self.run(ns, ["tc", "class", "show", "dev", dev])
        return {"qdiscs": self.qdisc_show(ns, dev), "classes": classes.strip()}

    def bottleneck_tree(self):
        """Readback of the bottleneck egress, checked: htb root, AQM leaf at 1:1."""
        ns, dev = self.bottleneck_dev
        qdiscs = self.qdisc_show(ns, dev)
        root = next((q for q in qdiscs if q.get("root")), None)
        leaf = bn.leaf_of({"qdiscs": qdiscs})
        if not root or root.get("kind") != "htb":
            raise CommandError(f"{dev}: root qdisc is {root and root.get('kind')}, not htb")
        if not leaf:
            raise CommandError(f"{dev}: no leaf qdisc under htb class {bn.CLASS}")
        return {"dev": dev, "root": root, "leaf": leaf, "qdiscs": qdiscs}

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


def tc_json_fixed(text):
    """``tc -j`` output made valid JSON: for a kind it has no parser for (the project's
    ``pi``) iproute2 6.1 prints ``"options":{[Unknown qdisc, optlen=56] }``."""
    return re.sub(r"\{\[Unknown qdisc, optlen=(\d+)\] \}", r'{"unparsed_by_tc_bytes": \1}',
                  text)


def readback_batch(devs):
    """(argv, stdin) of the one tc that reads back ``devs`` (of one namespace): for each
    device its qdiscs (a JSON line, with statistics) then its classes (text).

    The kernel dumps classes of one device per request (no device: nothing), so the
    classes cannot come from one ``tc class show``; a batch asks for each in one process."""
    return (["tc", "-j", "-s", "-batch", "-"],
            "".join(f"qdisc show dev {d}\nclass show dev {d}\n" for d in devs))


def parse_readback_batch(text, devs):
    """{dev: {"qdiscs": [...], "classes": "text"}} from readback_batch's output, each as
    ``tc -j -s qdisc show dev DEV`` and ``tc class show dev DEV`` give it (readback);
    None unless the output is one JSON line per device, each followed by its classes
    (a tc that printed classes as JSON, say, or nothing): the caller asks per device.

    A batch's flags are global: its classes come with -s's statistics, which tc prints
    on indented or empty lines under each class's own line. They are left out: what
    remains is what ``tc class show`` prints (iproute2 6.1 prints classes as text even
    under -j)."""
    parts = []
    for line in tc_json_fixed(text).splitlines():
        if line.startswith("["):
            try:
                parts.append((json.loads(line), []))
            except ValueError:
                return None
        elif not parts:
            if line.strip():
                return None
        elif line.strip() and not line[0].isspace():
            parts[-1][1].append(line)
    if len(parts) != len(devs):
        return None
    return {dev: {"qdiscs": qdiscs, "classes": "\n".join(lines).strip()}
            for dev, (qdiscs, lines) in zip(devs, parts)}


def _tc_batchable(argv):
    """True for a tc command that ``tc -batch`` reads back argument for argument."""
    return argv[0] == "tc" and all(_TC_BATCH_ARG.fullmatch(str(a)) for a in argv[1:])


def _same_file(f, path):
    """True if open file ``f`` is still the file at ``path``."""
    try:
        return os.fstat(f.fileno()).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False
