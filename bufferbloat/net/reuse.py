"""A sweep's network kept between its points, and the proof that it starts each one clean.

Building and tearing down a network is the largest part of a point's cost beyond its
traffic that nothing measures (docs/design/cost.md). Two points whose networks have the
same hosts, links, interfaces and switch differ only in what the build configures on
them: the qdisc plan (kind, limits, rates, delays, loss), the hosts' sysctls (CCA, ECN,
buffers). :class:`NetworkKeeper` keeps a point's network when it ended well and hands
it to the next point when :func:`mismatch` finds nothing that only a new network would
give; :func:`reconfigure` then puts the new point's configuration on it and proves the
state clean, as a fresh network's would be:

* no process of the previous point alive: every one the network started has ended, and
  no process but the host's shell is in any host's namespace;
* no socket left in any host (TIME-WAIT and orphans too: destroyed, then none found);
* every qdisc of the plan replaced (the root qdiscs deleted, the plan installed again:
  new qdiscs, their counters from zero), the interfaces' counters read as the baseline;
* the hosts' sysctls written again, each key the build may set at its value of the
  fresh namespace unless the point sets it, and read back;
* the control paths of the point before (NetPerfMeter's veth and policy rules,
  :mod:`bufferbloat.net.control`) removed;
* the TCP metrics cache flushed and found empty; neighbour entries deleted and none
  left; the route cache flushed; each host's IPv4 routes, policy rules and interfaces
  those of the fresh build; the switch's learned addresses flushed.

Any step that fails, or finds something left, ends the kept network (its teardown, by
PID and by name of what it made, as always) and the point gets a fresh one; the record
says which, and why (``network.reuse``, docs/reference/results.md).
"""

import contextlib
import os
import time

from bufferbloat.core.errors import CommandError
from bufferbloat.core.signals import deferred_signals
from bufferbloat.net import bottleneck as bn
from bufferbloat.net.cleanup import link_index
from bufferbloat.netlink import netclean

#: env: ``off`` gives every point a fresh network (to compare, or to rule reuse out)
KEEP_ENV = "BUFFERBLOAT_KEEP_NETWORK"
HELD_NOTE = ("bufferbloat: interrupt received: finishing the network's reconfiguration "
             "first, so that nothing is left behind")


class NotClean(RuntimeError):
    """The kept network's state could not be proven clean: it gets no further point."""


def keeping_wanted():
    """Whether networks are kept between points (env BUFFERBLOAT_KEEP_NETWORK: on, off)."""
    value = os.environ.get(KEEP_ENV, "on")
    if value not in ("on", "off"):
        from bufferbloat.core.errors import UsageError  # noqa: PLC0415
        raise UsageError(f"invalid value for {KEEP_ENV}: {value!r} (allowed: on, off)")
    return value == "on"


def shape(net):
    """What must be the same for a network to serve another point: the topology's class,
    hosts, switches and links (with them every interface's name), the switch's kind, the
    routes' advertised MSS, and (:func:`devices`) the plan's steps that are not qdiscs."""
    topo = net.topo
    return {"topology": type(topo).__name__, "hosts": topo.hosts(),
            "switches": topo.switches(), "links": topo.links(),
            "switch": net.switch_kind, "advmss_bytes": topo.params.get("advmss_bytes")}


def devices(topo, intfs):
    """The steps of ``topo``'s plan on the interfaces ``intfs`` that are not qdiscs (an
    IFB device made and brought up): a reconfiguration installs qdiscs only."""
    return [s.to_dict() for s in bn.plan_network(topo, intfs) if not _qdisc_step(s)]


def mismatch(kept, fresh):
    """Why the kept network ``kept`` cannot serve the point of the unbuilt network
    ``fresh`` (same topology description, not started), or None when it can."""
    old, new = shape(kept), shape(fresh)
    if old == new:     # the same links: the same interface names
        old["devices"] = devices(kept.topo, kept.intfs)
        new["devices"] = devices(fresh.topo, kept.intfs)
    for key in old:
        if old[key] != new[key]:
            return f"another network: its {key} differ ({old[key]} -> {new[key]})"
    return None


def _qdisc_step(step):
    """True for a plan step that installs a qdisc, a class or a filter (tc, or the
    netlink installer of a kind tc cannot parse)."""
    return step.argv[0] == "tc" or "bufferbloat.net.nlqdisc" in step.argv


def _host_pids(net):
    """{namespace inode: (host, shell pid)} of the hosts of ``net``."""
    out = {}
    for host in net.net.hosts:
        out[os.stat(f"/proc/{host.pid}/ns/net").st_ino] = (host.name, host.pid)
    return out


def strangers(net):
    """Processes in a host's namespace other than its shell: ["host: pid (comm)"]."""
    hosts = _host_pids(net)
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            ino = os.stat(f"/proc/{name}/ns/net").st_ino
        except OSError:
            continue
        if ino in hosts and int(name) != hosts[ino][1]:
            try:
                with open(f"/proc/{name}/comm") as f:
                    comm = f.read().strip()
            except OSError:
                continue
            found.append(f"{hosts[ino][0]}: pid {name} ({comm})")
    return found


def reconfigure(net, topo):
    """Put ``topo``'s configuration on the kept network ``net`` (the same shape:
    :func:`mismatch`) and prove its state clean; returns the proof (what the record
    keeps). Raises :class:`NotClean` naming what was found."""
    alive = [p.pid for p in net.procs if p.poll() is None]
    if alive:
        raise NotClean(f"processes of the point before still run: {alive}")
    net.procs.clear()
    if net.state is not None:
        net.state.prune_procs()
    left = strangers(net)
    if left:
        raise NotClean("processes other than the hosts' shells in their namespaces: "
                       + ", ".join(left[:5]))
    hosts = sorted(set(topo.senders) | {topo.receiver})
    # the control paths (NetPerfMeter's) go: a fresh network has none, and the next
    # point's part adds its own; the layout below proves them gone
    removed = net.remove_control_paths()
    # each host cleaned in one call inside its namespace: sockets, TCP metrics,
    # neighbours, route cache; its routes, rules and interfaces read
    found = {host: net.in_ns(host, netclean.clean) for host in hosts}
    for what, left in (("sockets", "sockets_left"), ("TCP metrics entries",
                                                     "tcp_metrics_left"),
                       ("neighbour entries", "neighbours_left")):
        rest = [f"{host}: {x}" for host, got in found.items() for x in got[left]]
        if rest:
            raise NotClean(f"{what} left after the flush: {', '.join(rest[:5])}")
    differs = layout_differs({host: got["layout"] for host, got in found.items()},
                             net.fresh_layout)
    if differs:
        raise NotClean(differs)
    proof = {"processes_left": 0, "routes": "as built", "route_cache": "flushed",
             "control_paths_removed": removed}
    for key in ("sockets_destroyed", "tcp_metrics_flushed", "neighbours_flushed"):
        proof[key] = sum(got[key] for got in found.values())
    old_plan = net.plan
    net.topo = topo
    net.plan = bn.plan_network(topo, net.intfs)
    net.qdisc_plan.install(_removal(old_plan) + [s for s in net.plan if _qdisc_step(s)])
    proof["qdiscs"] = "replaced"
    net.global_sysctls.allow_ccas()
    for host in hosts:
        net.host_config.configure(host, restore=True)
    proof["sysctls"] = "written and read back"
    flush_switch(net)
    proof["switch_fdb"] = "flushed"
    return proof


def _removal(plan):
    """Steps deleting the root (and ingress) qdisc of every device ``plan`` set up: the
    trees go, with their counters and queues; the plan then installs new ones."""
    out, seen = [], set()
    for step in plan:
        argv = step.argv
        if argv[:3] != ("tc", "qdisc", "replace"):
            continue
        where = "ingress" if "ingress" in argv else "root" if "root" in argv else None
        if where and (step.ns, argv[4], where) not in seen:
            seen.add((step.ns, argv[4], where))
            out.append(type(step)(step.ns, ("tc", "qdisc", "del", "dev", argv[4], where),
                                  f"the point before's {where} qdisc removed"))
    return out


def layouts_of(net, hosts):
    """{host: its routes, policy rules and interfaces}
    (:func:`bufferbloat.netlink.netclean.layout`)."""
    return {h: net.in_ns(h, netclean.layout) for h in hosts}


def layout_differs(now, fresh):
    """What of the hosts' layouts ``now`` ({host: netclean.layout()}) differs from the
    fresh build's ``fresh``, as text; None when nothing does."""
    out, fresh = [], fresh or {}
    for host in sorted(set(now) | set(fresh)):
        if (host in now) != (host in fresh):
            out.append(f"{host} {'is not' if host in now else 'only'} in the fresh build")
            continue
        a, b = now[host], fresh[host]
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                out.append(f"{host}'s {key}: {a.get(key)} (fresh: {b.get(key)})")
    return ("the hosts differ from the fresh build: " + "; ".join(out)) if out else None


def flush_switch(net):
    """Forget the addresses the switch learned: a Linux bridge's dynamic forwarding
    entries (its sysfs ``flush``, checked to be this namespace's bridge), Open vSwitch's
    (``ovs-appctl fdb/flush``)."""
    for sw in net.net.switches:
        if net.switch_kind == "ovs":
            net.run(None, ["ovs-appctl", "fdb/flush", sw.name])
            continue
        base = f"/sys/class/net/{sw.name}"
        try:
            with open(f"{base}/ifindex") as f:
                same = int(f.read()) == link_index(sw.name)
        except (OSError, ValueError):
            same = False
        if not same:
            raise NotClean(f"cannot reach bridge {sw.name}'s forwarding table from here "
                           "(sysfs shows another network namespace)")
        with open(f"{base}/bridge/flush", "w") as f:
            f.write("1\n")


def counters(net):
    """{"ns/dev": interface counters} of every interface of the topology's links, read
    as the point's baseline (:func:`bufferbloat.netlink.netclean.interface_counters`)."""
    hosts = set(net.topo.senders) | {net.topo.receiver}
    by_ns = {}
    for (a, b), (ia, ib) in net.intfs.items():
        by_ns.setdefault(bn.node_ns(a, hosts), set()).add(ia)
        by_ns.setdefault(bn.node_ns(b, hosts), set()).add(ib)
    out = {}
    for ns in sorted(by_ns, key=str):
        got = net.in_ns(ns, netclean.interface_counters, by_ns[ns])
        out.update({f"{ns or 'root'}/{dev}": v for dev, v in sorted(got.items())})
    return out


class NetworkKeeper:
    """Keeps the network of a point that ended well for the next one (a serial sweep's
    points, one after the other in this process). :meth:`network` gives a point its
    network; :meth:`close` ends the one kept (at the sweep's end, or on its interrupt).

    ``enabled`` False (env BUFFERBLOAT_KEEP_NETWORK=off): every point gets a fresh
    network, and its record says so."""

    def __init__(self, enabled=None):
        self.enabled = keeping_wanted() if enabled is None else enabled
        self.kept = None
        self.why_not = ("the first point" if self.enabled
                        else f"{KEEP_ENV}=off: a fresh network for every point")
        self.points = 0         # points the kept network has served
        #: seconds the kept networks' teardowns took outside any point (close())
        self.closing_s = 0.0

    @contextlib.contextmanager
    def network(self, fresh):
        """The network for a point whose own, unstarted, is ``fresh`` (checked): the
        kept one, reconfigured and proven clean, or ``fresh`` started. Yields (network,
        {"reused", "why", ...}). A block that ends well hands the network back to be
        kept; any exception or interrupt ends it."""
        try:
            net, reuse = self._take(fresh)
        except BaseException as exc:
            self._ended(exc)
            raise
        kept = False
        try:
            yield net, reuse
        except BaseException as exc:
            self._ended(exc)
            raise
        else:
            kept = self._keep(net)
        finally:
            if not kept:
                net.stop()

    def _ended(self, exc):
        self.why_not = (f"the point before ended with {type(exc).__name__}: its network "
                        "was removed")

    def _take(self, fresh):
        kept, self.kept = self.kept, None
        if kept is None:
            return self._fresh(fresh, self.why_not)
        why = mismatch(kept, fresh)
        if why is None:
            t0, calls0, ns0 = time.monotonic(), kept.tool_calls, kept.ns_calls
            try:
                with deferred_signals(HELD_NOTE):
                    proof = reconfigure(kept, fresh.topo)
            except (NotClean, CommandError, OSError) as exc:
                why = f"the kept network was not proven clean: {exc}"
            except BaseException:
                kept.stop()
                raise
            else:
                kept.caps, kept.features = fresh.caps, fresh.features
                kept.timings = {"reconfigure_s": time.monotonic() - t0,
                                "reconfigure_tool_calls": kept.tool_calls - calls0,
                                "reconfigure_ns_calls": kept.ns_calls - ns0}
                kept.recovered = None
                self.points += 1
                return kept, {"reused": True, "points": self.points, "clean": proof,
                              "why": f"the same network as the point before (point "
                                     f"{self.points} on it): qdiscs and sysctls set "
                                     "again, its state proven clean"}
        t0 = time.monotonic()
        kept.stop()
        fresh.timings["kept_teardown_s"] = time.monotonic() - t0
        return self._fresh(fresh, why)

    def _fresh(self, fresh, why):
        fresh.start()
        if self.enabled:
            try:
                fresh.fresh_layout = layouts_of(
                    fresh, sorted(set(fresh.topo.senders) | {fresh.topo.receiver}))
            except BaseException:
                fresh.stop()
                raise
        self.points = 1
        return fresh, {"reused": False, "why": why, "points": 1}

    def _keep(self, net):
        """Keep ``net`` for the next point, unless keeping is off."""
        if not self.enabled:
            return False
        self.kept = net
        self.why_not = "the point before ended without handing its network back"
        return True

    def close(self):
        """End the kept network, if any (by PID and by name of what it made)."""
        kept, self.kept = self.kept, None
        if kept is not None:
            t0 = time.monotonic()
            kept.stop()
            self.closing_s += time.monotonic() - t0
        self.why_not = "the network kept before was closed"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


@contextlib.contextmanager
def own_network(fresh, why="each run builds its own network"):
    """A point's network without a keeper: ``fresh`` started, and stopped at the end."""
    with fresh as net:
        yield net, {"reused": False, "why": why, "points": 1}
