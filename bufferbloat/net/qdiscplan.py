"""The qdisc plan installed in the kernel, and the installed trees read back.

The plan (:func:`bufferbloat.net.bottleneck.plan_network`: a list of steps, each a
command in a namespace) runs one namespace after the other, each namespace's steps in
their order; its consecutive tc steps go to one ``tc -batch -``, one process instead of
one a step (under TCG each costs 60-150 ms). The read-back reads every configured
device's qdiscs (tc's JSON, with statistics) and classes (tc's text), again one ``tc
-batch`` per namespace.
"""

import itertools
import json
import re

from bufferbloat.core.errors import CommandError
from bufferbloat.net import bottleneck as bn

#: an argument tc -batch reads back as itself (its lines are split at white space; '#'
#: starts a comment; quotes and backslashes are its own)
_TC_BATCH_ARG = re.compile(r"[^\s#\"'\\]+")


class QdiscPlan:
    """The plan (``net.plan``) of a :class:`~bufferbloat.net.network.Network` ``net``:
    install() it, read back what is installed. Every tool runs through ``net``."""

    def __init__(self, net):
        self.net = net

    def install(self, steps=None):
        """Run the plan (or ``steps``), one namespace after the other (no step touches a
        device of another namespace), each namespace's steps in their order; consecutive
        tc steps go to one ``tc -batch -``: one process instead of one per step. A step
        that brings the IFB device up is followed by its offloads off."""
        net = self.net
        by_ns = {}
        for step in net.plan if steps is None else steps:
            by_ns.setdefault(step.ns, []).append(step)
        for ns, steps in by_ns.items():
            for batched, group in itertools.groupby(steps, key=lambda s: _tc_batchable(s.argv)):
                group = list(group)
                if batched and len(group) > 1:
                    self._tc_batch(ns, group)
                    continue
                for step in group:
                    net.run(ns, list(step.argv))
                    if step.argv[:4] == ("ip", "link", "set", bn.IFB_DEV):
                        net.offloads_off(ns, bn.IFB_DEV)

    def _tc_batch(self, ns, steps):
        """Run tc ``steps`` (of namespace ``ns``) as one ``tc -batch -``. tc stops at the
        first command that fails and names its line: the error names that step."""
        script = "".join(" ".join(str(a) for a in s.argv[1:]) + "\n" for s in steps)
        res = self.net.run_process(ns, ["tc", "-batch", "-"], stdin=script)
        if res.returncode != 0:
            line = re.search(r"Command failed -:(\d+)", res.stderr)
            n = int(line.group(1)) if line else 0
            what = steps[n - 1].argv if 0 < n <= len(steps) else ("tc", "-batch", "-")
            full = self.net.ns_prefix(ns) + [str(a) for a in what]
            raise CommandError(f"{' '.join(full)} failed ({res.returncode}, in a tc batch "
                               f"of {len(steps)}): {res.stderr.strip() or res.stdout.strip()}")

    def qdisc_show(self, ns, dev, stats=True):
        """``tc -j [-s] qdisc show dev`` parsed."""
        args = ["tc", "-j"] + (["-s"] if stats else []) + ["qdisc", "show", "dev", dev]
        return json.loads(tc_json_fixed(self.net.run(ns, args)) or "[]")

    def readback(self):
        """The installed qdiscs and classes of every device the plan configured, as tc
        reports them: {"ns/dev": {"qdiscs": [...], "classes": "text"}}.

        Classes are kept as tc's text: iproute2 6.1 has no JSON output for HTB classes.
        One tc per namespace reads all its devices (readback_batch); should its output
        not parse (parse_readback_batch), that namespace is read one device at a time.
        """
        where = sorted({(s.ns, s.argv[4]) for s in self.net.plan
                        if s.argv[:2] == ("tc", "qdisc")}, key=str)
        by_ns = {}
        for ns, dev in where:
            by_ns.setdefault(ns, []).append(dev)
        got = {}
        for ns, devs in by_ns.items():
            argv, script = readback_batch(devs)
            per_dev = parse_readback_batch(self.net.run(ns, argv, stdin=script), devs)
            for dev in devs:
                got[ns, dev] = per_dev[dev] if per_dev else self.readback_dev(ns, dev)
        return {f"{ns or 'root'}/{dev}": got[ns, dev] for ns, dev in where}

    def readback_dev(self, ns, dev):
        """One device's readback entry: ``tc -j -s qdisc show dev`` and ``tc class show
        dev``, two processes."""
        classes = self.net.run(ns, ["tc", "class", "show", "dev", dev])
        return {"qdiscs": self.qdisc_show(ns, dev), "classes": classes.strip()}

    def bottleneck_tree(self):
        """Readback of the bottleneck egress, checked: htb root, AQM leaf at 1:1."""
        ns, dev = self.net.bottleneck_dev
        qdiscs = self.qdisc_show(ns, dev)
        root = next((q for q in qdiscs if q.get("root")), None)
        leaf = bn.leaf_of({"qdiscs": qdiscs})
        if not root or root.get("kind") != "htb":
            raise CommandError(f"{dev}: root qdisc is {root and root.get('kind')}, not htb")
        if not leaf:
            raise CommandError(f"{dev}: no leaf qdisc under htb class {bn.CLASS}")
        return {"dev": dev, "root": root, "leaf": leaf, "qdiscs": qdiscs}


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
