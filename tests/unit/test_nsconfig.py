"""What bufferbloat/netlink/nsconfig.py refuses before any system call, and the feature
names it clears (no root; tests/host/test_nsconfig_host.py sets them on a kernel)."""
import fnmatch

import pytest

from bufferbloat.netlink import nsconfig


@pytest.mark.parametrize("key", ["../../etc/passwd", "net/ipv4/tcp_ecn", "net", "",
                                 "net.ipv4.tcp_ecn ", "net..ipv4"])
def test_a_key_that_is_not_a_dotted_sysctl_is_refused(key):
    with pytest.raises(ValueError, match="not a sysctl key"):
        nsconfig.write_sysctls({key: "1"})
    with pytest.raises(ValueError, match="not a sysctl key"):
        nsconfig.read_sysctls([key])


@pytest.mark.parametrize("dev", ["", "a/b", "x" * 16])
def test_a_name_that_is_no_interface_name_is_refused(dev):
    with pytest.raises(ValueError, match="not an interface name"):
        nsconfig.offloads_off(dev)


def test_the_names_cleared_are_ethtools_for_tso_gso_gro():
    """ethtool -k's feature names of the 6.18 kernel (a veth): what each offload clears."""
    names = ["tx-scatter-gather", "tx-tcp-segmentation", "tx-tcp-ecn-segmentation",
             "tx-tcp-mangleid-segmentation", "tx-tcp6-segmentation",
             "tx-tcp-accecn-segmentation", "tx-generic-segmentation", "rx-gro",
             "rx-gro-list", "rx-udp-gro-forwarding", "tx-udp-segmentation"]
    got = {o: [n for n in names if fnmatch.fnmatchcase(n, p)]
           for o, p in nsconfig.FEATURES.items()}
    assert got == {"tso": names[1:6], "gso": ["tx-generic-segmentation"], "gro": ["rx-gro"]}
