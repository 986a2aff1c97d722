"""A sweep's network kept between points (bufferbloat/net/reuse.py), without a kernel:
which networks may serve the next point, what the keeper does with a network after a
point that ended well or not, what the record, the verdict and the sweep's index say.
tests/host/test_reuse_host.py proves the clean state on a real kernel."""
import contextlib
import os
from types import SimpleNamespace

import pytest

from bufferbloat.commands import common
from bufferbloat.core.errors import UsageError
from bufferbloat.net import reuse
from bufferbloat.net.bottleneck import plan_network
from bufferbloat.net.control import ControlPaths
from bufferbloat.net.network import Network
from bufferbloat.net.topology import DumbbellTopo, KDumbbellTopo
from bufferbloat.results.health import headline, network_of
from bufferbloat.run import sweep
from tests.unit.test_sweep import QUIET, SCN, _index, fake_runner


def _net(topo, started=True, switch="bridge"):
    """A Network of ``topo`` that was never built; ``started``: with the interfaces a
    build gives it (as Mininet names them)."""
    net = Network(topo, switch=switch, caps=SimpleNamespace())
    if started:
        for i, (a, b) in enumerate(topo.links(), 1):
            host, sw = (a, b) if a != "s0" else (b, a)
            ends = (f"{host}-eth0", f"{sw}-eth{i}")
            net.intfs[(a, b)] = ends if a == host else ends[::-1]
    return net


@pytest.mark.parametrize("other", [
    dict(buffer_pkts=20), dict(bottleneck_mbit=1.5, delay_ms=5, loss_pct=1),
    dict(qdisc="pie"), dict(cca="reno", ecn=True, sndbuf_bytes=65536), dict(jitter_ms=0),
])
def test_a_network_serves_a_point_that_differs_only_in_what_the_build_configures(other):
    kept = _net(DumbbellTopo(buffer_pkts=100, delay_ms=10))
    assert reuse.mismatch(kept, _net(DumbbellTopo(**other), started=False)) is None


@pytest.mark.parametrize("kept_topo, new_topo, says", [
    (DumbbellTopo(), KDumbbellTopo(k=2), "topology differ"),
    (KDumbbellTopo(k=2), KDumbbellTopo(k=3), "hosts differ"),
    (DumbbellTopo(), DumbbellTopo(advmss_bytes=1000), "advmss_bytes differ"),
    (DumbbellTopo(), DumbbellTopo(loss_pct=1, loss_link="bottleneck"), "devices differ"),
])
def test_another_shape_gets_a_fresh_network_and_says_why(kept_topo, new_topo, says):
    why = reuse.mismatch(_net(kept_topo), _net(new_topo, started=False))
    assert why and says in why, why


def test_another_switch_gets_a_fresh_network_control_paths_do_not():
    kept = _net(DumbbellTopo())
    assert "switch differ" in reuse.mismatch(kept, _net(DumbbellTopo(), False, "ovs"))
    # NetPerfMeter's control veths: the reconfiguration removes them (and proves it)
    kept._control = object()
    assert reuse.mismatch(kept, _net(DumbbellTopo(), False)) is None


def test_a_layout_that_differs_from_the_fresh_build_is_named():
    fresh = {"h1": {"routes": ["r1"], "rules": ["pref 0 table 255"], "devices": ["lo"]},
             "h2": {"routes": ["r2"], "rules": ["pref 0 table 255"], "devices": ["lo"]}}
    same = {h: dict(v) for h, v in fresh.items()}
    assert reuse.layout_differs(same, fresh) is None
    same["h2"]["rules"] = ["pref 0 table 255", "pref 1000 table 1000"]
    same["h1"]["devices"] = ["bbctl0", "lo"]
    why = reuse.layout_differs(same, fresh)
    assert "h1's devices: ['bbctl0', 'lo']" in why and "h2's rules" in why
    assert "routes" not in why
    assert "h3" in reuse.layout_differs({**fresh, "h3": {}}, fresh)


def test_removing_control_paths_deletes_each_veth_once_and_every_rule():
    calls = []

    class Net:
        net = {"h1": SimpleNamespace(pid=11), "h2": SimpleNamespace(pid=12)}

        def ip(self, host):
            return {"h1": "10.0.0.1", "h2": "10.0.0.2"}[host]

        def run(self, host, argv, stdin=None):
            calls.append((host, stdin))
            return " dev bbctl0 "

    paths = ControlPaths(Net())
    paths.add("h1", "h2", 5302)
    paths.add("h2", "h1", 5306)
    calls.clear()
    assert paths.remove() == 1 and paths.pairs == {} and paths.rules == {}
    got = dict(calls)
    assert got["h1"].splitlines() == [
        "link del bbctl0",
        "rule del to 10.0.0.2/32 ipproto tcp dport 5302 lookup 1000 pref 1000",
        "rule del to 10.0.0.2/32 ipproto tcp sport 5306 lookup 1000 pref 1000"]
    assert got["h2"].splitlines() == [
        "rule del to 10.0.0.1/32 ipproto tcp sport 5302 lookup 1000 pref 1000",
        "rule del to 10.0.0.1/32 ipproto tcp dport 5306 lookup 1000 pref 1000"]
    calls.clear()
    assert paths.remove() == 0 and calls == []


def test_the_reconfiguration_deletes_every_tree_the_point_before_installed():
    net = _net(DumbbellTopo(loss_pct=1, loss_link="bottleneck"))
    steps = reuse._removal(plan_network(net.topo, net.intfs))
    got = [(s.ns, s.argv) for s in steps]
    assert len(got) == len(set(got))          # each tree once
    assert (None, ("tc", "qdisc", "del", "dev", "s0-eth2", "root")) in got
    assert ("h2", ("tc", "qdisc", "del", "dev", "h2-eth0", "ingress")) in got
    assert ("h2", ("tc", "qdisc", "del", "dev", "ifb0", "root")) in got
    assert {s.argv[4] for s in steps} == {"h1-eth0", "s0-eth1", "s0-eth2", "h2-eth0", "ifb0"}


class FakeNet:
    """What the keeper asks of a network: start, stop, its timings."""

    def __init__(self, name):
        self.name, self.started, self.stopped = name, 0, 0
        self.timings, self.topo = {}, SimpleNamespace(senders=["h1"], receiver="h2")
        self.caps = self.features = None
        self.tool_calls = self.ns_calls = 0

    def start(self):
        self.started += 1
        return self

    def stop(self):
        self.stopped += 1


@pytest.fixture
def keeper(monkeypatch):
    monkeypatch.setattr(reuse, "layouts_of", lambda net, hosts: {})
    return reuse.NetworkKeeper(enabled=True)


def _point(keeper, net, fail=None):
    with contextlib.suppress(RuntimeError), keeper.network(net) as (got, why):
        if fail:
            raise RuntimeError(fail)
        return got, why
    return None, None


def test_the_keeper_keeps_a_network_that_ended_well_and_reuses_it_when_clean(keeper,
                                                                            monkeypatch):
    proofs = []
    monkeypatch.setattr(reuse, "mismatch", lambda kept, fresh: None)
    monkeypatch.setattr(reuse, "reconfigure", lambda net, topo: proofs.append(net) or {})
    a, b, c = FakeNet("a"), FakeNet("b"), FakeNet("c")
    got, why = _point(keeper, a)
    assert got is a and not why["reused"] and why["why"] == "the first point"
    assert (a.started, a.stopped) == (1, 0) and keeper.kept is a
    got, why = _point(keeper, b)           # b is never started: a serves, proven clean
    assert got is a and why["reused"] and why["points"] == 2 and proofs == [a]
    assert b.started == 0 and "reconfigure_s" in a.timings and "build_s" not in a.timings
    # a point that fails removes its network: the next one gets a fresh network
    assert _point(keeper, c, fail="iperf3 crashed") == (None, None)
    assert a.stopped == 1 and keeper.kept is None
    d = FakeNet("d")
    got, why = _point(keeper, d)
    assert got is d and not why["reused"] and "ended with RuntimeError" in why["why"]
    keeper.close()
    assert d.stopped == 1 and keeper.kept is None


def test_a_network_not_proven_clean_or_of_another_shape_is_removed_first(keeper,
                                                                        monkeypatch):
    a, b, c = FakeNet("a"), FakeNet("b"), FakeNet("c")
    _point(keeper, a)

    def dirty(net, topo):
        raise reuse.NotClean("sockets left after SOCK_DESTROY: tcp TIME-WAIT ...")
    monkeypatch.setattr(reuse, "mismatch", lambda kept, fresh: None)
    monkeypatch.setattr(reuse, "reconfigure", dirty)
    got, why = _point(keeper, b)
    assert got is b and a.stopped == 1 and b.started == 1 and not why["reused"]
    assert why["why"].startswith("the kept network was not proven clean: sockets left")
    assert "kept_teardown_s" in b.timings      # the old network's teardown: this point's
    monkeypatch.setattr(reuse, "mismatch", lambda kept, fresh: "another network: ...")
    got, why = _point(keeper, c)
    assert got is c and b.stopped == 1 and why["why"] == "another network: ..."
    keeper.close()
    assert c.stopped == 1


def test_an_interrupt_while_reconfiguring_removes_the_kept_network(keeper, monkeypatch):
    a = FakeNet("a")
    _point(keeper, a)
    monkeypatch.setattr(reuse, "mismatch", lambda kept, fresh: None)

    def interrupted(net, topo):
        raise KeyboardInterrupt
    monkeypatch.setattr(reuse, "reconfigure", interrupted)
    with pytest.raises(KeyboardInterrupt), keeper.network(FakeNet("b")):
        pass
    assert a.stopped == 1 and keeper.kept is None


def test_keeping_off_gives_every_point_a_fresh_network(monkeypatch):
    monkeypatch.setenv(reuse.KEEP_ENV, "off")
    keeper = reuse.NetworkKeeper()
    a, b = FakeNet("a"), FakeNet("b")
    assert _point(keeper, a)[1]["why"] == f"{reuse.KEEP_ENV}=off: a fresh network for every point"
    assert a.stopped == 1 and keeper.kept is None
    assert not _point(keeper, b)[1]["reused"] and b.stopped == 1
    monkeypatch.setenv(reuse.KEEP_ENV, "sometimes")
    with pytest.raises(UsageError, match="BUFFERBLOAT_KEEP_NETWORK"):
        reuse.NetworkKeeper()


def test_a_serial_sweep_runs_its_points_with_a_keeper_a_cluster_without():
    with common.point_runner(None) as runner:
        keeper = runner.keywords["keeper"]
        assert isinstance(keeper, reuse.NetworkKeeper)
        keeper.kept = FakeNet("kept")
    assert keeper.kept is None            # the last network kept is removed at the end
    closed = []
    with common.point_runner(SimpleNamespace(close=lambda: closed.append(1))) as runner:
        assert not hasattr(runner, "keywords")
    assert closed == [1]


def test_the_verdict_and_the_sweep_index_say_which_points_reused_their_network(tmp_path):
    reused = {"reused": True, "why": "the same network as the point before"}
    assert network_of({"network": {"reuse": dict(reused, clean={})}}) == reused
    assert network_of({"network": {}}) is None and network_of({}) is None
    assert "on the network kept from the point before" in headline(
        {"verdict": "healthy", "checks": {}, "network": reused})
    inner = fake_runner([])

    def runner(run, run_dir=None, log=None):
        inner(run, run_dir=run_dir, log=log)
        import json  # noqa: PLC0415
        path = os.path.join(run_dir, "result.json")
        with open(path) as f:
            rec = json.load(f)
        first = run.overrides["loss_pct"] == "0.5"
        rec["network"] = {"reuse": {"reused": not first, "why": "first" if first
                                    else "the same network as the point before"}}
        with open(path, "w") as f:
            json.dump(rec, f)
        return run_dir
    index, _ = sweep.run_sweep(SCN, {"loss_pct": ["0.5", "1"]}, 1, str(tmp_path), runner,
                               **QUIET)
    done = _index(index)["done"]
    assert [e["network"]["reused"] for e in done] == [False, True]
    assert _index(index)["networks"] == {"reused": 1, "built": 1}
    assert done[1]["network"]["why"] == "the same network as the point before"


def test_a_wait_for_a_process_returns_when_it_ends_not_at_the_next_poll(monkeypatch):
    """core.signals.wait_process: the kernel says when (a pidfd), where Popen's own
    wait(timeout) polls with sleeps growing to 50 ms: no sleep is taken."""
    import subprocess  # noqa: PLC0415
    import time  # noqa: PLC0415

    from bufferbloat.core.signals import wait_process  # noqa: PLC0415
    proc = subprocess.Popen(["sleep", "0.3"])
    slept = []
    monkeypatch.setattr(time, "sleep", slept.append)
    t = time.monotonic()
    assert wait_process(proc, 5.0) == 0 and time.monotonic() - t > 0.25
    assert slept == []
    monkeypatch.undo()
    proc = subprocess.Popen(["sleep", "5"])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            wait_process(proc, 0.1)
    finally:
        proc.kill()
        assert wait_process(proc, 5.0) == -9
