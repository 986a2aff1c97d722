"""The qdisc trees that realise a topology's links, above all the bottleneck's.

Where everything sits (and why):

* Every link direction is shaped on its sender's egress by ``htb 1:`` with one class
  ``1:1`` at the link rate; the class's leaf ``10:`` is where that direction queues.
* The bottleneck egress (switch port s0 -> receiver) has the AQM as that leaf, so the
  standing queue builds in the AQM and the AQM's own statistics measure it. An AQM
  installed as the root would replace the shaper and never see a queue.
* Propagation delay is netem, never the router buffer, and each direction of each
  sender's path crosses exactly one delaying netem: every netem stage costs a timer
  wake-up (measured in the TCG VM: ~0.3 ms each, on top of ~0.6-1 ms of the emulator's
  own forwarding), so a path is not split into one stage per link.
  - forward (sender -> receiver): the access link's and the bottleneck's one-way delays
    together, on the sender's egress, before the queue. A constant delay commutes with
    the queue: every sender's packets reach the bottleneck shifted by the same bottleneck
    delay, so arrival order, queue dynamics and RTT are those of the delay placed on the
    wire after the queue;
  - reverse (ACKs): the bottleneck's and the access link's reverse delays together, on
    the switch port towards that sender;
  - netem's limit there (:data:`NETEM_LIMIT_PKTS`) is far above any window: it delays
    and drops at random, nothing else.
* Random loss sits where its link is: on the sender's egress or the switch port towards
  it for an access link; for the bottleneck's forward direction *after* the queue (a
  lost packet has taken its place in the queue first), on the receiver's ingress through
  an IFB device in the receiver's namespace; for its reverse direction on the receiver's
  egress.
* ``reverse_qdisc``: the bottleneck's reverse direction (the receiver's egress: a
  server's own NIC, study B's downloads' bottleneck) gets that kind, with its defaults.
* ``aqm_both_ways``: the bottleneck's reverse direction (the receiver's egress) gets the
  same AQM as its leaf, for bidirectional loads such as RRUL.
* Leaves without impairment are a pfifo of :data:`HOST_QUEUE_PKTS` packets: links at host
  rate never hold a queue worth the name, and if they did it would show in the readback
  rather than silently cap the experiment.

Building is planning (:func:`plan_network`, pure, unit-tested) plus executing the plan
(:class:`bufferbloat.net.network.Network`). A plan is a list of :class:`Step`: an argument
list for ``tc`` or ``ip`` and the namespace (host name, or None for the root namespace
where the switch ports live).
"""

import os
import sys
from dataclasses import dataclass

from bufferbloat.core.machine import under_tcg
from bufferbloat.core.params import env_number
from bufferbloat.net.qdiscs import DEFAULT_KIND, NETLINK_KINDS, make_qdisc
from bufferbloat.net.topology import Impairment

NETEM_LIMIT_PKTS = 100_000
HOST_QUEUE_PKTS = 10_000
ROOT = "1:"
CLASS = "1:1"
LEAF_HANDLE = "10:"
IFB_DEV = "ifb0"


@dataclass(frozen=True)
class Step:
    """One command of a plan: ``argv`` run in host ``ns`` (None: root namespace)."""

    ns: str | None
    argv: tuple
    why: str

    def to_dict(self):
        """JSON-ready form for the run record."""
        return {"ns": self.ns, "argv": list(self.argv), "why": self.why}


def rate_arg(rate_mbit):
    """tc rate in bit/s (exact integer, no unit rounding by tc)."""
    return f"{int(round(rate_mbit * 1e6))}bit"


def netem_args(imp, limit=NETEM_LIMIT_PKTS):
    """netem arguments for an :class:`~bufferbloat.net.topology.Impairment`."""
    args = ["netem", "limit", str(limit), "delay", f"{imp.delay_ms:g}ms"]
    if imp.jitter_ms:
        args.append(f"{imp.jitter_ms:g}ms")
    if imp.loss_pct:
        args += ["loss", "random", f"{imp.loss_pct:g}%"]
    return args


#: HTB's burst, as time at the class's rate. tc's default is one MTU (1600 B: it divides
#: the rate by the timer resolution, 1 ns with high-resolution timers), so the class
#: needs a timer wake-up per packet; a wake-up that comes late cannot be made up, and the
#: link sends below its rate while it holds a queue. Under TCG the guest's timers come
#: late by a millisecond or more: 20 Mbit/s then carried 0.50 of its rate. A burst of
#: HTB_BURST_MS lets a late wake-up send what the timer owed; the average rate is the
#: token bucket's, unchanged, and the queue's delay is the same (docs/design/health.md). 5 ms
#: was enough for one flow; 40 flows of 536 B (study C) measured 0.84 with 5 ms and 0.94
#: with 20 ms, the guest's timers coming later under that load.
HTB_BURST_MS = 20.0
HTB_MIN_BURST_BYTES = 1600
HTB_MAX_BURST_BYTES = 64 * 1024


#: Env: another burst time, ms (the tc commands in result.json show what was used).
HTB_BURST_ENV = "BUFFERBLOAT_HTB_BURST_MS"


def htb_burst_bytes(rate_mbit, burst_ms=None):
    """HTB burst (and cburst) for ``rate_mbit``: ``burst_ms`` (default HTB_BURST_MS, env
    BUFFERBLOAT_HTB_BURST_MS) of its bytes, at least one MTU and at most 64 KiB; None
    (tc's one-MTU default) outside the TCG VM unless the environment asks: a kernel whose
    timers fire on time shapes exactly with it (docs/design/platform.md: 100.0 % of 1.5-100 Mbit/s),
    and a burst would let a short transfer on an idle link (a web fetch) go faster than
    the link."""
    if burst_ms is None and HTB_BURST_ENV not in os.environ \
            and not under_tcg():
        return None
    if burst_ms is None:
        burst_ms = env_number(HTB_BURST_ENV, HTB_BURST_MS, 0, 1000, "a time in ms, 0 to 1000")
    return int(min(HTB_MAX_BURST_BYTES,
                   max(HTB_MIN_BURST_BYTES, rate_mbit * 1e6 / 8 * burst_ms / 1e3)))


def shaped(ns, dev, rate_mbit, leaf, why, handle=LEAF_HANDLE):
    """Steps for ``htb`` at ``rate_mbit`` on ``dev`` with qdisc ``leaf`` (argument list)."""
    rate = rate_arg(rate_mbit)
    nbytes = htb_burst_bytes(rate_mbit)
    burst = () if nbytes is None else ("burst", f"{nbytes}b", "cburst", f"{nbytes}b")
    return [
        Step(ns, ("tc", "qdisc", "replace", "dev", dev, "root", "handle", ROOT, "htb",
                  "default", "1"), f"{why}: rate shaper root"),
        Step(ns, ("tc", "class", "replace", "dev", dev, "parent", ROOT, "classid", CLASS,
                  "htb", "rate", rate, "ceil", rate) + burst,
             f"{why}: {rate_mbit:g} Mbit/s class"
             + (f", burst {nbytes} B" if nbytes else "")),
        leaf_step(ns, dev, CLASS, handle, leaf, f"{why}: leaf {leaf[0]}"),
    ]


def leaf_step(ns, dev, parent, handle, leaf, why):
    """The step installing qdisc ``leaf`` (kind and options) under ``parent``: ``tc``, or
    for a kind tc cannot parse (qdiscs.NETLINK_KINDS) one RTM_NEWQDISC sent by
    ``python3 -m bufferbloat.net.nlqdisc``."""
    if leaf[0] in NETLINK_KINDS:
        return Step(ns, (sys.executable or "python3", "-m", "bufferbloat.net.nlqdisc", dev,
                         parent, handle) + tuple(leaf), why + " (netlink)")
    return Step(ns, ("tc", "qdisc", "replace", "dev", dev, "parent", parent, "handle", handle)
                + tuple(leaf), why)


def ingress_netem(ns, dev, imp, why):
    """Steps putting ``imp`` on ``dev``'s ingress through an IFB device in ``ns``."""
    return [
        Step(ns, ("ip", "link", "add", IFB_DEV, "type", "ifb"), f"{why}: IFB device"),
        Step(ns, ("ip", "link", "set", IFB_DEV, "up"), f"{why}: IFB up"),
        Step(ns, ("tc", "qdisc", "replace", "dev", dev, "handle", "ffff:", "ingress"),
             f"{why}: ingress hook"),
        Step(ns, ("tc", "filter", "replace", "dev", dev, "parent", "ffff:", "protocol", "all",
                  "prio", "1", "u32", "match", "u32", "0", "0", "action", "mirred", "egress",
                  "redirect", "dev", IFB_DEV), f"{why}: redirect ingress to IFB"),
        Step(ns, ("tc", "qdisc", "replace", "dev", IFB_DEV, "root", "handle", ROOT)
             + tuple(netem_args(imp)), f"{why}: delay/loss after the queue"),
    ]


def node_ns(node, hosts):
    """Namespace of a node: hosts have their own, the switch lives in the root one."""
    return node if node in hosts else None


def plan_network(topo, intfs):
    """Plan every qdisc of ``topo``.

    topo: a built :class:`~bufferbloat.net.topology.BaseDumbbell`. intfs: {(a, b): (ifname at
    a, ifname at b)} for every link spec. Returns the list of :class:`Step`.
    """

    bnl = topo.bottleneck
    bn_out, rx_in = intfs[(bnl.a, bnl.b)]
    rx = bnl.b
    steps = []
    for acc in topo.link_specs:
        if acc.bottleneck:
            continue
        host_if, port_if = intfs[(acc.a, acc.b)]
        fwd = Impairment(acc.ab.delay_ms + bnl.ab.delay_ms, acc.ab.jitter_ms, acc.ab.loss_pct)
        rev = Impairment(acc.ba.delay_ms + bnl.ba.delay_ms, acc.ba.jitter_ms, acc.ba.loss_pct)
        steps += shaped(acc.a, host_if, acc.rate_mbit, _plain_leaf(fwd),
                        f"{acc.a}->{rx} path (delay of both links)")
        steps += shaped(None, port_if, acc.rate_mbit, _plain_leaf(rev),
                        f"{rx}->{acc.a} path (delay of both links)")
    steps += shaped(None, bn_out, bnl.rate_mbit, topo.qdisc.tc_args(bnl.rate_mbit),
                    f"bottleneck {bnl.a}->{rx}")
    if bnl.ab.loss_pct:
        steps += ingress_netem(rx, rx_in, Impairment(0.0, 0.0, bnl.ab.loss_pct),
                               f"bottleneck {bnl.a}->{rx} wire loss")
    rev_rate = topo.params.get("reverse_mbit") or bnl.rate_mbit
    reverse = getattr(topo, "reverse_qdisc", None)
    if topo.params.get("aqm_both_ways"):
        steps += shaped(rx, rx_in, rev_rate, topo.qdisc.tc_args(rev_rate),
                        f"bottleneck {rx}->{bnl.a} (the same AQM both ways)")
    elif reverse is not None:
        steps += shaped(rx, rx_in, rev_rate, reverse.tc_args(rev_rate),
                        f"bottleneck {rx}->{bnl.a} (the receiver's own queue: "
                        f"{reverse.kind})")
    else:
        steps += shaped(rx, rx_in, rev_rate,
                        _plain_leaf(Impairment(0.0, 0.0, bnl.ba.loss_pct)),
                        f"bottleneck {rx}->{bnl.a}")
    return steps


def _plain_leaf(imp):
    if imp.active:
        return netem_args(imp)
    return make_qdisc(DEFAULT_KIND, limit_pkts=HOST_QUEUE_PKTS).tc_args(rate_mbit=None)


def features_for(topo):
    """Kernel features and tools that building ``topo`` needs (for the capability check)."""
    need = {"netns", "veth", "sch_htb", "sch_fifo", topo.qdisc.module, "tc", "ip",
            "nsenter", "mnexec", "mininet"}
    if getattr(topo, "reverse_qdisc", None) is not None:
        need.add(topo.reverse_qdisc.module)
    for spec in topo.link_specs:
        if spec.ab.active or spec.ba.active:
            need.add("sch_netem")
        if spec.bottleneck and spec.ab.loss_pct:
            need |= {"ifb", "sch_ingress", "act_mirred", "cls_u32"}
    need |= set(topo.ccas.values())
    return sorted(need)


def leaf_of(readback, dev_qdiscs_key="qdiscs"):
    """The qdisc dict at parent 1:1 in a ``tc -j qdisc show`` readback, or None."""
    for q in readback.get(dev_qdiscs_key, []):
        if q.get("parent") == CLASS:
            return q
    return None
