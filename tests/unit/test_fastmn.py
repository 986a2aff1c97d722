"""Which of Mininet's ifconfig commands the in-process configuration takes over
(bufferbloat/net/fastmn.py), and the ioctl helpers' refusals of bad names and MACs
before any ioctl (bufferbloat/netlink/ifconf.py). tests/host/test_fastmn_host.py
builds networks both ways on the kernel."""
import pytest

from bufferbloat.net import fastmn
from bufferbloat.netlink import ifconf


@pytest.mark.parametrize("args, want", [
    (("up",), (ifconf.set_up, ("h1-eth0", True))),
    (("down",), (ifconf.set_up, ("h1-eth0", False))),
    (("10.0.0.1/8",), (ifconf.set_ipv4, ("h1-eth0", "10.0.0.1", 8, False))),
    (("10.0.0.12/24", "up"), (ifconf.set_ipv4, ("h1-eth0", "10.0.0.12", 24, True))),
])
def test_the_forms_mininet_writes_are_done_in_process(args, want):
    assert fastmn.ifconfig_job("h1-eth0", args) == want


@pytest.mark.parametrize("args", [(), ("10.0.0.1",), ("10.0.0.1/8", "down"),
                                  ("mtu", "9000"), ("hw", "ether", "00:00:00:00:00:01")])
def test_any_other_form_goes_to_the_shell(args):
    assert fastmn.ifconfig_job("h1-eth0", args) is None


@pytest.mark.parametrize("dev", ["", "a" * 16, "a/b", "a b", ".", "..", "a\0b"])
def test_a_bad_interface_name_is_refused_before_any_ioctl(dev):
    with pytest.raises(ValueError, match="not an interface name"):
        ifconf.set_up(dev)


@pytest.mark.parametrize("mac", ["00:00:00:00:01", "00:00:00:00:00:01:02"])
def test_a_bad_mac_is_refused_before_any_ioctl(mac):
    with pytest.raises(ValueError, match="not a MAC address"):
        ifconf.set_mac("h1-eth0", mac)


def test_an_interface_that_does_not_exist_is_named():
    with pytest.raises(OSError) as err:
        ifconf.set_up("bbnosuchdev0")
    assert "bbnosuchdev0: reading its flags" in str(err.value)
