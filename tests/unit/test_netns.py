"""One network per network namespace (bufferbloat/net/isolation.py, cleanup.py, network.py):
the state file and lock each namespace uses, the environment's overrides, interface
indexes read the namespace-correct way, and the congestion controls: a run outside the
initial namespace never writes the global list, and is refused, naming the CCA and the
way out, when what it needs is not allowed. No root, no network: the kernel's answers
(namespace inodes, sysctls) are replaced."""
import fcntl
import json
import os
import socket

import pytest

from bufferbloat.core.errors import UsageError
from bufferbloat.net import cleanup, isolation
from bufferbloat.net import network as network_mod
from bufferbloat.net.network import Network
from bufferbloat.net.topology import CCA_CHOICES, DumbbellTopo, KDumbbellTopo

INITIAL, OTHER = 4026531833, 4026532999


@pytest.fixture
def netns(monkeypatch):
    """Pretend to be in the initial namespace (``netns("initial")``) or another one;
    no environment override."""
    monkeypatch.delenv(cleanup.STATE_ENV, raising=False)
    monkeypatch.delenv(cleanup.LOCK_ENV, raising=False)

    def be(where):
        mine = INITIAL if where == "initial" else OTHER
        monkeypatch.setattr(isolation, "netns_inode",
                            lambda pid="self": mine if pid == "self" else INITIAL)
    return be


class Kernel:
    """The CCA sysctls and modprobe, as a fake: records every write and command."""

    def __init__(self, monkeypatch, available="reno bbr cubic", allowed="reno bbr",
                 modules=("vegas",)):
        self.values = {isolation.AVAILABLE_CCAS: available, isolation.ALLOWED_CCAS: allowed}
        self.modules, self.writes, self.commands = set(modules), [], []
        monkeypatch.setattr(isolation, "read_sysctl", lambda p: self.values[p])
        monkeypatch.setattr(isolation, "write_sysctl", self.write)

    def write(self, path, value):
        self.writes.append((path, value))
        self.values[path] = value

    def run(self, argv):
        self.commands.append(list(argv))
        cca = argv[-1].removeprefix("tcp_")
        if argv[0] == "modprobe" and cca in self.modules:
            self.values[isolation.AVAILABLE_CCAS] += f" {cca}"
        return ""


class Caps:
    def require(self, features):
        pass

    def has(self, name):
        return True


def network(monkeypatch, kernel, topo=None):
    net = Network(topo or DumbbellTopo(bottleneck_mbit=1.5, cca="cubic"), switch="bridge",
                  caps=Caps())
    monkeypatch.setattr(net, "run", lambda ns, argv, **kw: kernel.run(argv))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(network_mod, "terminate_on_sigterm", lambda: None)  # pytest's own
    return net


# ------------------------------------------------------------------ paths
def test_the_initial_namespace_keeps_the_machine_wide_paths(netns):
    netns("initial")
    assert isolation.in_initial_netns()
    assert cleanup.network_paths() == ("/run/bufferbloat-network.json",
                                       "/run/bufferbloat-network.lock")
    assert cleanup.state_path() == cleanup.STATE_PATH


def test_another_namespace_has_its_own_directory(netns):
    netns("other")
    assert not isolation.in_initial_netns()
    assert cleanup.network_paths() == (f"/run/bufferbloat/netns-{OTHER}/network.json",
                                       f"/run/bufferbloat/netns-{OTHER}/network.lock")
    assert cleanup.owns_directory(cleanup.network_paths()[1])
    assert not cleanup.owns_directory(cleanup.LOCK_PATH)


def test_the_environment_overrides_each_path(netns, monkeypatch, tmp_path):
    netns("other")
    monkeypatch.setenv(cleanup.STATE_ENV, str(tmp_path / "s.json"))
    assert cleanup.network_paths() == (str(tmp_path / "s.json"), str(tmp_path / "s.lock"))
    monkeypatch.setenv(cleanup.STATE_ENV, str(tmp_path / "state.lock"))   # no clash
    assert cleanup.network_paths()[1] == str(tmp_path / "state.lock.lock")
    monkeypatch.setenv(cleanup.LOCK_ENV, str(tmp_path / "elsewhere.lock"))
    assert cleanup.network_paths() == (str(tmp_path / "state.lock"),
                                       str(tmp_path / "elsewhere.lock"))
    monkeypatch.delenv(cleanup.STATE_ENV)
    assert cleanup.network_paths() == (f"/run/bufferbloat/netns-{OTHER}/network.json",
                                       str(tmp_path / "elsewhere.lock"))
    netns("initial")
    monkeypatch.setenv(cleanup.LOCK_ENV, str(tmp_path / "elsewhere.lock"))
    assert cleanup.network_paths() == (cleanup.STATE_PATH, str(tmp_path / "elsewhere.lock"))


def test_without_proc_1_the_kernel_tells_the_initial_namespace(monkeypatch):
    """A sandbox's PID 1 may hide its namespaces even from root: then the fixed inode of
    the initial namespace, or the mode of the global CCA list, tells."""
    def inode(pid="self"):
        if pid != "self":
            raise PermissionError(13, "Permission denied")
        return mine
    monkeypatch.setattr(isolation, "netns_inode", inode)
    mine = isolation.PROC_NET_INIT_INO
    assert isolation.in_initial_netns()
    mine = 0xF0000123
    real_stat = os.stat
    for mode, initial in ((0o100644, True), (0o100444, False)):
        monkeypatch.setattr(os, "stat", lambda p, *a, m=mode, **k: os.stat_result(
            (m,) + tuple(real_stat("/")[1:])) if p.startswith("/proc/sys/") else real_stat(p))
        assert isolation.in_initial_netns() is initial


def test_private_directories_are_made_0700(tmp_path):
    path = tmp_path / "a" / "b" / "network.lock"
    cleanup.make_private_dirs(str(path))
    for d in (tmp_path / "a", tmp_path / "a" / "b"):
        assert d.is_dir() and (d.stat().st_mode & 0o777) == 0o700


# ------------------------------------------------------------------ interface indexes
def test_interface_indexes_come_from_the_callers_namespace(monkeypatch):
    assert cleanup.link_index("lo") == socket.if_nametoindex("lo")
    assert cleanup.link_index("bb-no-such-link") is None
    assert cleanup.max_ifindex() == max(i for i, _ in socket.if_nameindex())
    # answered by the netns-aware ioctls, never by /sys/class/net
    monkeypatch.setattr(socket, "if_nametoindex", lambda name: 4242)
    monkeypatch.setattr(socket, "if_nameindex", lambda: [(1, "lo"), (4242, "s0")])
    assert cleanup.link_index("s0") == 4242 and cleanup.max_ifindex() == 4242


def test_recovery_leaves_the_links_of_another_namespace_alone(monkeypatch, tmp_path):
    path = tmp_path / "state.json"
    commands = []

    def recover_with(cookie):
        path.write_text(json.dumps({"owner": {"pid": os.getpid()}, "ifindex_floor": 0,
                                    "netns": {"cookie": cookie}, "links": {"lo": 1},
                                    "procs": {}, "sysctls": {}}))
        commands.clear()
        cleanup.recover(str(path), log=lambda m: None, run=commands.append, wait_s=0)
        assert not path.exists()
        return commands
    monkeypatch.setattr(isolation, "netns_cookie", lambda: 77)
    monkeypatch.setattr(cleanup, "link_index", lambda name: 1)
    assert recover_with(77) == [["ip", "link", "del", "dev", "lo"]]   # its own: deleted
    assert recover_with(78) == []           # written in another namespace: not looked for


# ------------------------------------------------------------------ congestion control
def test_outside_the_initial_namespace_a_missing_cca_is_refused_and_nothing_written(
        netns, monkeypatch):
    netns("other")
    kernel = Kernel(monkeypatch)
    net = network(monkeypatch, kernel)
    with pytest.raises(UsageError) as exc:
        net.check()
    msg = str(exc.value)
    assert "congestion control cubic" in msg
    assert 'sysctl -w net.ipv4.tcp_allowed_congestion_control="reno bbr cubic"' in msg
    assert "initial network namespace" in msg and "bufferbloat worker" in msg
    assert "modprobe" not in msg               # cubic is loaded
    with pytest.raises(UsageError):
        net._allow_ccas()
    assert kernel.writes == [] and kernel.commands == [] and net._saved_sysctls == {}


def test_outside_the_initial_namespace_a_module_is_never_loaded(netns, monkeypatch):
    netns("other")
    kernel = Kernel(monkeypatch)
    topo = KDumbbellTopo(k=2, bottleneck_mbit=1.5, ccas="vegas,bbr")
    net = network(monkeypatch, kernel, topo)
    with pytest.raises(UsageError) as exc:
        net._allow_ccas()
    msg = str(exc.value)
    assert "congestion control vegas is not loaded" in msg
    assert 'modprobe tcp_vegas && sysctl -w net.ipv4.tcp_allowed_congestion_control=' \
           '"reno bbr vegas"' in msg
    assert kernel.writes == [] and kernel.commands == []


def test_outside_the_initial_namespace_allowed_ccas_go_on(netns, monkeypatch):
    netns("other")
    kernel = Kernel(monkeypatch, allowed="reno bbr cubic")
    net = network(monkeypatch, kernel)
    net.check()
    net._allow_ccas()
    assert kernel.writes == [] and kernel.commands == []


def test_in_the_initial_namespace_the_run_loads_and_allows_and_restores(netns, monkeypatch):
    netns("initial")
    kernel = Kernel(monkeypatch)
    topo = KDumbbellTopo(k=2, bottleneck_mbit=1.5, ccas="vegas,cubic")
    net = network(monkeypatch, kernel, topo)
    net.check()
    net._allow_ccas()
    assert kernel.commands == [["modprobe", "tcp_vegas"]]
    assert kernel.writes == [(isolation.ALLOWED_CCAS, "reno bbr cubic vegas")]
    assert net._saved_sysctls == {isolation.ALLOWED_CCAS: "reno bbr"}
    net._stop()
    assert kernel.values[isolation.ALLOWED_CCAS] == "reno bbr"


def test_prepare_ccas_allows_every_cca_a_topology_can_pick(netns, monkeypatch):
    netns("initial")
    kernel = Kernel(monkeypatch, modules=())          # this kernel has no tcp_vegas
    got = isolation.prepare_ccas(run=kernel.run)
    assert set(CCA_CHOICES) == {"reno", "cubic", "bbr", "vegas"}
    assert kernel.commands == [["modprobe", "tcp_vegas"]]
    assert got == {"added": ["cubic"], "unavailable": ["vegas"]}
    assert kernel.values[isolation.ALLOWED_CCAS] == "reno bbr cubic"
    assert isolation.prepare_ccas(["cubic", "bbr"], run=kernel.run)["added"] == []
    netns("other")                                    # kept: a namespace may use it now
    isolation.check_ccas(["cubic"])
    kernel.commands.clear()
    kernel.writes.clear()
    with pytest.raises(UsageError, match="vegas"):
        isolation.prepare_ccas(run=kernel.run)        # cannot, from here: says how
    assert kernel.writes == [] and kernel.commands == []


# ------------------------------------------------------------------ a failed start
@pytest.fixture
def private_paths(netns, monkeypatch, tmp_path):
    """Another namespace whose directory lives in tmp_path, as /run/bufferbloat would."""
    netns("other")
    monkeypatch.setattr(cleanup, "NETNS_DIR", str(tmp_path / "run"))
    monkeypatch.setattr(cleanup.isolation, "netns_cookie", lambda: 5)
    return tmp_path / "run" / f"netns-{OTHER}"


def test_a_refused_start_leaves_no_record(private_paths, monkeypatch):
    kernel = Kernel(monkeypatch)
    net = network(monkeypatch, kernel)
    monkeypatch.setattr(net, "check", lambda: None)  # the refusal comes from the build
    with pytest.raises(UsageError, match="cubic"):
        net.start()
    assert not private_paths.exists(), list(private_paths.iterdir())
    assert kernel.writes == []


def test_a_sysctl_that_cannot_be_written_is_not_left_to_restore(netns, monkeypatch,
                                                                 tmp_path):
    """What happened on main: the global CCA list was read-only, its original value was
    recorded anyway, stop() failed restoring it, and the state file stayed behind."""
    netns("initial")
    monkeypatch.setenv(cleanup.STATE_ENV, str(tmp_path / "state.json"))
    kernel = Kernel(monkeypatch)

    def read_only(path, value):
        raise PermissionError(13, "Permission denied", f"/proc/sys/{path}")
    monkeypatch.setattr(isolation, "write_sysctl", read_only)
    net = network(monkeypatch, kernel)
    with pytest.raises(PermissionError):
        net.start()
    assert not (tmp_path / "state.json").exists()
    assert net._saved_sysctls == {} and net._lock is None
    with open(tmp_path / "state.lock") as f:                   # released
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_a_clean_stop_removes_the_namespace_directory(private_paths, monkeypatch):
    kernel = Kernel(monkeypatch, allowed="reno bbr cubic")
    net = network(monkeypatch, kernel)
    net.state_path, net.lock_path = cleanup.network_paths()
    net._take_lock()
    assert (private_paths.stat().st_mode & 0o777) == 0o700
    assert (private_paths / "network.lock").read_text() == str(os.getpid())
    net.state = cleanup.NetworkState(net.state_path)
    net.state.save()
    assert json.loads((private_paths / "network.json").read_text())["netns"] == {
        "inode": OTHER, "cookie": 5}
    net.stop()
    assert not private_paths.exists()


def test_a_waiter_on_a_removed_lock_takes_the_new_one(private_paths, monkeypatch):
    """A clean stop unlinks the lock while holding it: a run that opened the old file
    just before gets its lock, sees that it is stale, and takes the file there now (else
    it and a third run would both "hold" the lock)."""
    kernel = Kernel(monkeypatch)
    first, second = network(monkeypatch, kernel), network(monkeypatch, kernel)
    path = first.lock_path = second.lock_path = cleanup.network_paths()[1]
    first._take_lock()
    real_flock, tried = fcntl.flock, []

    def flock(f, op):
        if not tried:             # between the second's open and flock, the first stops
            first._remove_namespace_dir()
            first._release_lock()
        tried.append(os.fstat(f.fileno()).st_nlink)     # 0: unlinked
        return real_flock(f, op)
    monkeypatch.setattr(fcntl, "flock", flock)
    second._take_lock()
    monkeypatch.setattr(fcntl, "flock", real_flock)
    assert tried == [0, 1], tried           # got the removed file's lock, then the new one
    assert os.fstat(second._lock.fileno()).st_ino == os.stat(path).st_ino
    with open(path) as third, pytest.raises(BlockingIOError):
        fcntl.flock(third, fcntl.LOCK_EX | fcntl.LOCK_NB)
    second._release_lock()
