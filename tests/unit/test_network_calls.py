"""What a point's build and read-back cost in tool processes (bufferbloat/net/network.py),
and that running fewer changes nothing they set or record.

Under TCG each process run in a Mininet host (nsenter + sysctl, ethtool, ip, tc) costs
tens of ms. The read-back's one ``tc -batch`` per namespace is parsed here from tc's own
output (tests/fixtures/tools/readback, captured from a dumbbell's tree) into what one
call per device gave; the build and the read-back run against :class:`Tools`, a fake of
every tool they call that counts the processes. No root, no network."""
import json
import os
import subprocess

import pytest

from bufferbloat.net import cleanup, hosts, isolation, links, qdiscplan
from bufferbloat.net import network as network_mod
from bufferbloat.net.network import CommandError, Network
from bufferbloat.net.qdiscplan import parse_readback_batch
from bufferbloat.net.topology import DumbbellTopo, KDumbbellTopo

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(HERE), "fixtures")
READBACK = os.path.join(FIXTURES, "tools", "readback")
CCA = hosts.CCA_SYSCTL


def fixture(name, where=READBACK):
    with open(os.path.join(where, name)) as f:
        return f.read()


# ------------------------------------------------------------------ read-back parsing
def per_device(dev):
    """The entry the read-back made from one call per device and kind (the old way)."""
    raw = json.loads(fixture("per_device.json"))[dev]
    return {"qdiscs": json.loads(qdiscplan.tc_json_fixed(raw["qdisc"]) or "[]"),
            "classes": raw["class"].strip()}


@pytest.mark.parametrize("group", ["switch", "h3"])
def test_one_batch_per_namespace_reads_what_one_call_per_device_read(group):
    devs = json.loads(fixture("meta.json"))["groups"][group]
    argv, script = qdiscplan.readback_batch(devs)
    assert script == fixture(f"batch_{group}.in")   # what the capture fed tc
    got = parse_readback_batch(fixture(f"batch_{group}.txt"), devs)
    assert got == {dev: per_device(dev) for dev in devs}
    assert list(got) == devs
    for dev in devs:   # the statistics' lines of the batch's -s are not in the text
        assert got[dev]["classes"].startswith("class htb 1:1 root leaf 10: prio 0 rate ")
        assert "Sent" not in got[dev]["classes"] and "tokens" not in got[dev]["classes"]
        assert got[dev]["qdiscs"][0]["bytes"] == 0   # -s: the qdiscs' statistics kept


def test_the_batch_drops_the_statistics_of_every_class_kind():
    """The project VM's fq_codel bottleneck (``tc -s class show``: htb's class and a flow
    class of fq_codel, each with its statistics' lines) after its qdiscs' JSON line."""
    qdiscs = fixture("vm_fq_codel.tc.json", os.path.join(FIXTURES, "netlink"))
    classes = fixture("vm_fq_codel.tc-class.txt", os.path.join(FIXTURES, "netlink"))
    text = json.dumps(json.loads(qdiscs), separators=(",", ":")) + "\n" + classes
    got = parse_readback_batch(text, ["s0-eth2"])["s0-eth2"]
    assert got["classes"] == ("class htb 1:1 root leaf 10: prio 0 rate 8bit ceil 8bit "
                              "burst 225b cburst 225b \nclass fq_codel 10:35d parent 10:")
    assert got["qdiscs"] == json.loads(qdiscs)


@pytest.mark.parametrize("text", [
    "",                                                  # nothing at all
    '[{"kind":"htb"}]\n',                                # one device of two
    '[{"kind":"htb"}]\n[{"class":"htb"}]\n[{"kind":"htb"}]\n[{"class":"htb"}]\n',  # JSON classes
    'Error: something\n[{"kind":"htb"}]\n[{"kind":"htb"}]\n',  # text before the first
    '[{"kind":"htb"]\n[{"kind":"htb"}]\n',               # not JSON
])
def test_output_the_parser_does_not_know_is_refused_not_guessed(text):
    assert parse_readback_batch(text, ["a", "b"]) is None


# ------------------------------------------------------------------ the tools, faked
class Tools:
    """Every tool the build and the read-back run (through ``subprocess.run`` in
    bufferbloat/net/network.py), answering as the real ones do, and the in-namespace
    calls (``in_netns`` and ``nsconfig``'s offloads and sysctls), with per-namespace
    sysctls, offloads and qdisc trees; ``calls`` lists each process (namespace, argv),
    ``ops`` the processes and the in-namespace calls."""

    DEFAULTS = {CCA: "bbr", "net.ipv4.tcp_rmem": "4096\t131072\t6291456",
                "net.ipv4.tcp_wmem": "4096\t16384\t4194304", "net.ipv4.tcp_ecn": "2",
                "net.ipv4.tcp_no_metrics_save": "0",
                "net.ipv4.tcp_slow_start_after_idle": "1"}
    PIPE = subprocess.PIPE

    def __init__(self, pids):
        self.ns_of = {str(pid): name for name, pid in pids.items()}
        self.calls = []         # tool processes, in order
        self.ops = []           # tool processes and in-namespace calls, in order
        self.current = None     # the namespace an in-namespace call is in
        self.stuck = set()      # offloads that stay on
        self.sysctl, self.offloads, self.trees = {}, {}, {}
        self.refused = set()    # keys a write fails on (sysctl goes on with the others)
        self.ignored = set()    # keys a write "sets" while nothing changes
        self.failing = None     # a tc command containing this fails
        self.applied = []       # (namespace, tc's words) of every change, in order

    # ------------------------------------------- in-namespace calls (netlink.nsconfig)
    def in_netns(self, pid, fn):
        """nlstats.in_netns: ``fn`` runs "in" the namespace of ``pid``."""
        self.current = None if pid is None else self.ns_of[str(pid)]
        try:
            return fn()
        finally:
            self.current = None

    def offloads_off(self, dev, offloads):
        self.ops.append((self.current, ["offloads", dev]))
        self.offloads[self.current, dev] = set(offloads) - self.stuck
        return {o: [f"{o}-feature"] for o in offloads if o in self.stuck}

    def write_sysctls(self, values):
        self.ops.append((self.current, ["sysctl", "write"]))
        have = self.sysctl.setdefault(self.current, dict(self.DEFAULTS))
        refused = {}
        for key, value in values.items():
            if key in self.refused:
                refused[key] = "Invalid argument"
            elif key not in self.ignored:
                have[key] = "\t".join(value.split())
        return refused

    def read_sysctls(self, keys):
        self.ops.append((self.current, ["sysctl", "read"]))
        have = self.sysctl.setdefault(self.current, dict(self.DEFAULTS))
        return {k: " ".join(have[k].split()) for k in keys if k in have}

    # ------------------------------------------------------------ tool processes
    def run(self, full, input=None, **kwargs):  # noqa: A002 - subprocess.run's name
        argv, ns = list(full), None
        if argv[0] == "nsenter":
            ns, argv = self.ns_of[argv[2]], argv[5:]
        self.calls.append((ns, argv))
        self.ops.append((ns, argv))
        out, err, rc = self.answer(ns, argv, input)
        return subprocess.CompletedProcess(full, rc, out, err)

    def answer(self, ns, argv, stdin):
        tool = argv[0]
        if tool in ("sysctl", "ethtool"):   # now in-process (nsconfig)
            raise AssertionError(f"{tool} ran as a process: {argv}")
        if tool == "tc":
            return self.tc(ns, argv[1:], stdin)
        if tool == "ip" and argv[1:] == ["-4", "route", "show"]:
            return f"10.0.0.0/8 dev {ns}-eth0 proto kernel scope link src 10.0.0.9 \n", "", 0
        return "", "", 0   # ip route change, ip link, modprobe

    def tc(self, ns, args, stdin):
        flags = [a for a in args if a.startswith("-")]
        if "-batch" in flags:
            out = []
            for i, line in enumerate(stdin.splitlines(), 1):
                text, err, rc = self.tc_one(ns, flags, line.split())
                if rc:
                    return "".join(out), f"{err}\nCommand failed -:{i}", 1
                out.append(text)
            return "".join(out), "", 0
        return self.tc_one(ns, flags, args[len(flags):])

    def tc_one(self, ns, flags, words):
        if self.failing and self.failing in words:
            return "", "Error: Specified qdisc kind is unknown.", 2
        obj, verb, dev = words[0], words[1], words[3]
        tree = self.trees.setdefault((ns, dev), {"qdisc": {}, "class": {}})
        if verb == "replace":
            self.applied.append((ns, words))
            if obj not in tree:   # a filter: not read back
                return "", "", 0
            at = words[4:6] if words[4] == "parent" else ["root", None]
            handle = words[words.index("handle") + 1] if "handle" in words else None
            ident = words[words.index("classid") + 1] if obj == "class" else handle
            tree[obj][ident] = (at, words[words.index(ident) + 1:])
            return "", "", 0
        if obj == "qdisc":   # show: one JSON line per command in a batch, as tc
            qdiscs = [{"kind": rest[0], "handle": handle,
                       **({"root": True} if at[0] == "root" else {"parent": at[1]}),
                       "options": {}, **({"bytes": 0, "packets": 0} if "-s" in flags else {})}
                      for handle, (at, rest) in tree["qdisc"].items()]
            return json.dumps(qdiscs, separators=(",", ":")) + "\n", "", 0
        text = ""
        for classid, (_, rest) in tree["class"].items():
            text += f"class {rest[0]} {classid} root leaf 10: prio 0 {' '.join(rest[1:])} \n"
            if "-s" in flags:
                text += " Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n\n"
        return text, "", 0


class FakeNode:
    def __init__(self, name, pid, ended):
        self.name, self.pid, self._ended = name, pid, ended

    def terminate(self):
        self._ended.append(self.name)


class FakeMininet:
    """Hosts by name and PID; no switch (its ports and bridge are the host tests')."""

    def __init__(self, names):
        self.pids = {name: 1000 + i for i, name in enumerate(names)}
        self.ended = []     # hosts whose shells the teardown ended, in order
        self.hosts = [FakeNode(n, p, self.ended) for n, p in self.pids.items()]
        self.switches = []

    def __getitem__(self, name):
        return FakeNode(name, self.pids[name], self.ended)


class Caps:
    def require(self, features):
        pass


def mininet_intfs(topo):
    """{(a, b): (ifname at a, ifname at b)} as Mininet names them."""
    ports, out = {}, {}
    for spec in topo.link_specs:
        names = []
        for node in (spec.a, spec.b):
            if node in topo.switches():
                ports[node] = ports.get(node, 0) + 1
                names.append(f"{node}-eth{ports[node]}")
            else:
                names.append(f"{node}-eth0")
        out[(spec.a, spec.b)] = tuple(names)
    return out


def on_tools(module, topo, monkeypatch, tmp_path, setup=None):
    """A Network of ``module`` (this network.py, or another version of it) whose tools
    are Tools (``setup(tools)`` first) and whose Mininet, global sysctls and state paths
    are fakes: (network, tools). Nothing is built until its start()."""
    monkeypatch.setenv(cleanup.STATE_ENV, str(tmp_path / "state.json"))
    monkeypatch.setenv(cleanup.LOCK_ENV, str(tmp_path / "state.lock"))
    monkeypatch.setattr(module, "terminate_on_sigterm", lambda: None)  # pytest's own

    def no_global_write(path, value):
        raise AssertionError(f"the test wrote {path}")
    monkeypatch.setattr(isolation, "write_sysctl", no_global_write)
    mininet = FakeMininet(sorted(set(topo.senders) | {topo.receiver}))
    tools = Tools(mininet.pids)
    if setup:
        setup(tools)
    monkeypatch.setattr(module, "subprocess", tools)
    monkeypatch.setattr(module, "in_netns", tools.in_netns)
    monkeypatch.setattr(hosts, "nsconfig", tools)     # the hosts' sysctls
    monkeypatch.setattr(links, "nsconfig", tools)     # the interfaces' offloads
    net = module.Network(topo, switch="bridge", caps=Caps())

    def build_mininet():
        net.net, net.intfs = mininet, mininet_intfs(topo)
    for name, fake in (("check", lambda: None), ("_allow_ccas", lambda: None),
                       ("_bridge_without_netfilter", lambda: None),
                       ("_build_mininet", build_mininet)):
        monkeypatch.setattr(net, name, fake)
    return net, tools


def built(module, topo, monkeypatch, tmp_path):
    """on_tools' network built and read back as a run does: (network, tools, the
    build's tool processes, the read-back's)."""
    net, tools = on_tools(module, topo, monkeypatch, tmp_path)
    net.start()
    build = len(tools.calls)
    net.describe()      # the engine: the record's network (installed), then its sysctls
    net.sysctls()
    net.readback()      # and after the traffic: installed_after
    return net, tools, build, len(tools.calls) - build


#: (build, read-back, build's in-namespace calls) of a network of 1 and of 20 senders on
#: Tools. The code before batching (one process per tc step, sysctl key, device read
#: back) ran (26, 20) and (292, 210) processes on the same Tools: 46 and 502, 24 more a
#: host; with batching, before offloads and sysctls moved in-process, (15, 8) and
#: (148, 65): 10 more a host.
CALLS = {1: (3, 8, 8), 20: (22, 65, 84)}


def test_the_build_and_read_back_run_this_many_tool_processes(monkeypatch, tmp_path):
    """Each host more costs 4 processes: its namespace's tc batch (1), its read-back (one
    tc batch, twice) and its routes for the record (1); the switch's tc steps and
    read-back are one batch each whatever the number of ports. Its offloads (both ends
    of its link: ethtool took one process a device, twice) and its sysctls (a write and
    a verifying read) are 4 calls in this process, inside its namespace, and no
    process."""
    got = {}
    for senders, topo in ((1, DumbbellTopo()), (20, KDumbbellTopo(k=20))):
        net, tools, build, readback = built(network_mod, topo, monkeypatch,
                                            tmp_path / str(senders))
        assert net.timings["build_tool_calls"] == build
        assert net.timings["readback_tool_calls"] == readback
        assert not [argv for _, argv in tools.calls if argv[0] in ("ethtool", "sysctl")]
        mininet, before = net.net, len(tools.calls)
        net.stop()
        # the teardown ends every host's shell; with the veths gone with the namespaces,
        # no ``ip link del`` is run (tests/host: the ports and bridge on a real kernel)
        assert sorted(mininet.ended) == sorted(mininet.pids) and len(tools.calls) == before
        got[senders] = (build, readback, net.timings["build_ns_calls"])
    assert got == CALLS
    assert (got[20][0] + got[20][1] - got[1][0] - got[1][1]) / 19 == 4
    assert (got[20][2] - got[1][2]) / 19 == 4


def test_what_is_set_and_recorded_is_what_one_call_each_set_and_recorded(monkeypatch,
                                                                         tmp_path):
    topo = KDumbbellTopo(k=2, ccas="reno,cubic", ecn=True, sndbuf_bytes=65536,
                         slow_start_after_idle=0, qdisc="fifo", buffer_pkts=50)
    net, tools, _, _ = built(network_mod, topo, monkeypatch, tmp_path)
    for host, values in tools.sysctl.items():   # every setting, CCA included, as set
        want = net.host_settings(host)
        assert want["net.ipv4.tcp_ecn"] == "1" and want["net.ipv4.tcp_wmem"] \
            and want["net.ipv4.tcp_slow_start_after_idle"] == "0"
        assert want.get(CCA) == topo.ccas.get(host)
        for key, value in want.items():
            assert values[key].split() == value.split()
        assert set(want) <= set(Network.HOST_SYSCTLS)
    record = net.sysctls()
    assert record["h1"][CCA] == "reno" and record["h2"][CCA] == "cubic"
    assert record["h3"][CCA] == "bbr"      # the receiver's is not set
    assert record["h1"]["net.ipv4.tcp_rmem"] == "4096 1048576 16777216"
    assert record["h1"]["ip -4 route"].startswith("10.0.0.0/8 dev h1-eth0")
    assert len(tools.offloads) == 6
    for (ns, dev), off in tools.offloads.items():
        assert off == {"tso", "gso", "gro"}, (ns, dev)
    # every tc step of the plan ran, in its namespace, in its order there
    for ns in {s.ns for s in net.plan}:
        assert [w for n, w in tools.applied if n == ns] == \
            [list(s.argv[1:]) for s in net.plan if s.ns == ns]
    # the batched read-back equals the one of one call per device and kind
    installed = net.readback()
    assert set(installed) == {"h1/h1-eth0", "h2/h2-eth0", "h3/h3-eth0", "root/s0-eth1",
                              "root/s0-eth2", "root/s0-eth3"}
    for key, entry in installed.items():
        ns, dev = key.split("/")
        assert entry == net._readback_dev(None if ns == "root" else ns, dev)
        assert entry["classes"].startswith("class htb 1:1 root leaf 10: prio 0 rate ")
        assert [q["kind"] for q in entry["qdiscs"]] == ["htb", "pfifo"]
    net.stop()


@pytest.fixture
def failed_start(monkeypatch, tmp_path):
    """The error of a 1-sender Network's start() on Tools that ``setup`` set up; the
    failed start removed what it made."""
    def start(setup):
        net, _ = on_tools(network_mod, DumbbellTopo(), monkeypatch, tmp_path, setup)
        with pytest.raises(CommandError) as err:
            net.start()
        assert net.net is None and not (tmp_path / "state.json").exists()
        return str(err.value)
    return start


def test_a_key_the_write_fails_on_fails_the_build_naming_it(failed_start):
    message = failed_start(lambda tools: tools.refused.add(CCA))
    assert 'setting key "net.ipv4.tcp_congestion_control"' in message


def test_a_cca_that_does_not_take_fails_the_build_as_before(failed_start):
    message = failed_start(lambda tools: tools.ignored.add(CCA))
    assert message == "h1: congestion control is 'bbr', wanted 'cubic'"


def test_any_setting_that_does_not_read_back_fails_the_build_naming_it(failed_start):
    message = failed_start(lambda tools: tools.ignored.add("net.ipv4.tcp_no_metrics_save"))
    assert message == "h1: net.ipv4.tcp_no_metrics_save is '0', wanted '1'"


def test_an_offload_that_stays_on_fails_the_build_naming_it(failed_start):
    message = failed_start(lambda tools: tools.stuck.add("gso"))
    assert message == "h1: h1-eth0: gso is still on (gso-feature)"


def test_a_device_the_kernel_refuses_fails_the_build_naming_it(failed_start):
    def setup(tools):
        def refuse(dev, offloads):
            raise OSError(19, f"{dev}: ethtool ioctl: No such device")
        tools.offloads_off = refuse
    message = failed_start(setup)
    assert message == "h1: h1-eth0: ethtool ioctl: No such device"


def test_a_failing_tc_step_of_a_batch_is_named(failed_start):
    def setup(tools):
        tools.failing = "pfifo"
    message = failed_start(setup)
    assert "tc qdisc replace dev h1-eth0 parent 1:1 handle 10: pfifo" in message
    assert "in a tc batch of 3" in message and "Specified qdisc kind is unknown" in message


def test_steps_a_batch_cannot_hold_run_alone_in_their_place(monkeypatch, tmp_path):
    """PI's leaf (a Python process: tc has no parser for it) and the IFB device (ip, then
    its offloads) run alone where the plan has them; the tc steps around them go in a
    batch, in their order."""
    topo = DumbbellTopo(qdisc="pi", loss_pct=1, loss_link="bottleneck")
    net, tools = on_tools(network_mod, topo, monkeypatch, tmp_path)
    net.start()

    def ran(ns):
        return [("python -m" if "python" in a[0] else f"{a[0]} {a[1]}")
                for n, a in tools.ops if n == ns]
    # the sysctls: the fresh namespace's values read before the write, in the same call
    # (a kept network's next point writes them back, bufferbloat/net/reuse.py)
    assert ran("h2") == ["offloads h2-eth0", "ip link", "ip link", "offloads ifb0",
                         "tc -batch", "sysctl read", "sysctl write", "sysctl read"]
    assert ran(None) == ["offloads s0-eth1", "offloads s0-eth2", "tc -batch", "python -m"]
    for ns in ("h1", "h2", None):
        assert [w for n, w in tools.applied if n == ns] == \
            [list(s.argv[1:]) for s in net.plan if s.ns == ns and s.argv[0] == "tc"]
    assert tools.offloads["h2", "ifb0"] == {"tso", "gso", "gro"}
    assert not qdiscplan._tc_batchable(("tc", "filter", "add", "a b"))
    assert not qdiscplan._tc_batchable(("tc", "qdisc", "add", "#1"))
    net.stop()


def test_a_kept_networks_next_point_writes_back_what_it_does_not_set(monkeypatch,
                                                                    tmp_path):
    """bufferbloat/net/reuse.py: the next point's sysctls on a kept network are its own,
    and every key the build may set that it does not set is the fresh namespace's
    value again (read once, before the build's first write), all read back."""
    topo = KDumbbellTopo(k=2, ccas="reno,cubic", ecn=True, sndbuf_bytes=65536,
                         slow_start_after_idle=0, qdisc="fifo", buffer_pkts=50)
    net, tools, _, _ = built(network_mod, topo, monkeypatch, tmp_path)
    assert tools.sysctl["h1"]["net.ipv4.tcp_ecn"] == "1"
    net.topo = KDumbbellTopo(k=2, cca="bbr", qdisc="fifo", buffer_pkts=20)
    before = len(tools.calls)
    for host in ("h1", "h2", "h3"):
        net.host_config.configure(host, restore=True)
    assert len(tools.calls) == before          # no process: no route (advmss) touched
    for host in ("h1", "h2", "h3"):
        got = {k: " ".join(v.split()) for k, v in tools.sysctl[host].items()}
        assert got["net.ipv4.tcp_ecn"] == "2" and got[CCA] == "bbr"
        assert got["net.ipv4.tcp_wmem"] == "4096 16384 4194304"
        assert got["net.ipv4.tcp_slow_start_after_idle"] == "1"
        assert got["net.ipv4.tcp_no_metrics_save"] == "1"      # the build's, always
    assert net.sysctls()["h1"]["net.ipv4.tcp_ecn"] == "2"      # as read back
