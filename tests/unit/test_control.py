"""The control path's commands (bufferbloat/net/control.py), without a kernel: what each
host's ``ip -batch`` gets, the read-back that must name the veth, and the refusal that
names what the kernel lacks. tests/host/test_control_host.py runs them on the kernel."""
import pytest

from bufferbloat.core.errors import CommandError
from bufferbloat.net import control


class FakeNet:
    """Records each host's commands; ``refuse``: a host whose ip -batch fails;
    ``route_dev``: the device ``ip route get`` answers with."""

    def __init__(self, refuse=None, route_dev="bbctl0"):
        self.calls, self.refuse, self.route_dev = [], refuse, route_dev
        self.net = {"h1": type("N", (), {"pid": 101})(), "h2": type("N", (), {"pid": 202})()}

    def ip(self, host):
        return {"h1": "10.0.0.1", "h2": "10.0.0.2"}[host]

    def run(self, host, argv, stdin=None, **_):
        self.calls.append((host, argv, stdin))
        if argv[:2] == ["ip", "-batch"] and host == self.refuse:
            raise CommandError("ip -batch - failed (2): Error: argument \"ipproto\" is wrong")
        if argv[:4] == ["ip", "-o", "route", "get"]:
            return f"{argv[4]} from {argv[6]} via 169.254.0.2 dev {self.route_dev} table 1000"
        return ""


def batches(net):
    return {h: stdin.splitlines() for h, argv, stdin in net.calls if argv[1] == "-batch"}


def test_the_first_port_makes_the_veth_the_routes_and_the_rules():
    net = FakeNet()
    got = control.ControlPaths(net).add("h1", "h2", 5202)
    assert got == {"dev": "bbctl0", "table": 1000, "port": 5202, "client": "h1",
                   "server": "h2"}
    b = batches(net)
    assert b["h1"] == [
        "link add bbctl0 address 02:bb:00:00:00:01 type veth peer name bbctl0 address "
        "02:bb:00:00:00:02 netns 202",
        "address add 169.254.0.1/30 dev bbctl0",
        "neighbour add 169.254.0.2 lladdr 02:bb:00:00:00:02 dev bbctl0 nud permanent",
        "link set bbctl0 up",
        "route add 10.0.0.2/32 via 169.254.0.2 dev bbctl0 src 10.0.0.1 table 1000",
        "rule add to 10.0.0.2/32 ipproto tcp dport 5202 lookup 1000 pref 1000"]
    assert b["h2"] == [
        "address add 169.254.0.2/30 dev bbctl0",
        "neighbour add 169.254.0.1 lladdr 02:bb:00:00:00:01 dev bbctl0 nud permanent",
        "link set bbctl0 up",
        "route add 10.0.0.1/32 via 169.254.0.1 dev bbctl0 src 10.0.0.2 table 1000",
        "rule add to 10.0.0.1/32 ipproto tcp sport 5202 lookup 1000 pref 1000"]
    # read back on both hosts, each for its own direction of the connection
    gets = [(h, argv[-2:]) for h, argv, _ in net.calls if argv[:4] == ["ip", "-o", "route", "get"]]
    assert gets == [("h1", ["dport", "5202"]), ("h2", ["sport", "5202"])]


def test_a_second_port_adds_only_its_rules_and_the_reverse_direction_reuses_the_pair():
    net = FakeNet()
    paths = control.ControlPaths(net)
    paths.add("h1", "h2", 5202)
    net.calls.clear()
    paths.add("h1", "h2", 5204)
    assert batches(net) == {
        "h1": ["rule add to 10.0.0.2/32 ipproto tcp dport 5204 lookup 1000 pref 1000"],
        "h2": ["rule add to 10.0.0.1/32 ipproto tcp sport 5204 lookup 1000 pref 1000"]}
    net.calls.clear()
    assert paths.add("h2", "h1", 5206)["dev"] == "bbctl0"
    assert batches(net) == {
        "h2": ["rule add to 10.0.0.1/32 ipproto tcp dport 5206 lookup 1000 pref 1000"],
        "h1": ["rule add to 10.0.0.2/32 ipproto tcp sport 5206 lookup 1000 pref 1000"]}


def test_a_kernel_without_port_rules_is_named():
    with pytest.raises(CommandError) as err:
        control.ControlPaths(FakeNet(refuse="h1")).add("h1", "h2", 5202)
    assert "ipproto" in str(err.value) and "4.17" in str(err.value)
    assert "h1: setting up the control path to h2" in str(err.value)


def test_a_rule_that_does_not_apply_fails_the_read_back():
    with pytest.raises(CommandError) as err:
        control.ControlPaths(FakeNet(route_dev="h1-eth0")).add("h1", "h2", 5202)
    assert "dev h1-eth0" in str(err.value) and "wanted dev bbctl0" in str(err.value)


def test_a_rule_matches_one_direction_of_a_port():
    with pytest.raises(ValueError):
        control.rule_command(0, "port", 5202, "10.0.0.1")


def test_a_failed_set_up_is_not_taken_for_a_pair_that_exists():
    net = FakeNet(refuse="h2")
    paths = control.ControlPaths(net)
    with pytest.raises(CommandError):
        paths.add("h1", "h2", 5202)
    net.refuse = None
    net.calls.clear()
    paths.add("h1", "h2", 5202)              # the veth and routes are made again
    assert batches(net)["h1"][0].startswith("link add bbctl0 ")


@pytest.mark.parametrize("ip", ["10.0.0.2 table 1", "10.0.0.300", ""])
def test_an_address_that_is_not_one_never_reaches_a_batch(ip):
    net = FakeNet()
    net.ip = lambda host: ip if host == "h2" else "10.0.0.1"
    with pytest.raises(ValueError):
        control.ControlPaths(net).add("h1", "h2", 5202)
    assert not net.calls
