"""What bufferbloat/netlink/nsconfig.py refuses before any system call, and the feature
names it clears (no root; tests/host/test_nsconfig_host.py sets them on a kernel)."""
import ctypes
import fnmatch
import struct

import pytest

from bufferbloat.netlink import nsconfig


@pytest.mark.parametrize("key", ["../../etc/passwd", "net/ipv4/tcp_ecn", "net", "",
                                 "net.ipv4.tcp_ecn ", "net..ipv4", "net.ipv4.tcp_ecn\n"])
def test_a_key_that_is_not_a_dotted_sysctl_is_refused_before_any_write(key, monkeypatch):
    def no_open(*a, **kw):
        raise AssertionError("a file was opened")
    monkeypatch.setattr("builtins.open", no_open)
    with pytest.raises(ValueError, match="not a sysctl key"):
        nsconfig.write_sysctls({"net.ipv4.tcp_ecn": "1", key: "1"})
    with pytest.raises(ValueError, match="not a sysctl key"):
        nsconfig.read_sysctls([key])


@pytest.mark.parametrize("dev", ["", "a/b", "x" * 16, "a b", "..", "eth0\n", "eth0\0x"])
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


class FakeKernel:
    """SIOCETHTOOL as the kernel answers it, on a device with ``names`` (bit order) and
    ``active`` bits; it reads and writes the struct through ifr_data (offset 16 of a
    40-byte ifreq), as copy_from_user/copy_to_user do."""

    def __init__(self, names, active, fixed=0):
        self.names, self.active, self.fixed = names, active, fixed
        self.words = (len(names) + 31) // 32
        self.cmds = []

    def ioctl(self, fd, request, ifr):
        assert request == nsconfig.SIOCETHTOOL and len(ifr) == nsconfig.IFREQ_SIZE
        assert ifr[:16].rstrip(b"\0") == b"veth0"
        addr = struct.unpack_from("@P", ifr, 16)[0]
        cmd = ctypes.c_uint32.from_address(addr).value
        self.cmds.append(cmd)
        if cmd == nsconfig.ETHTOOL_GSSET_INFO:
            assert ctypes.c_uint64.from_address(addr + 8).value == 1 << nsconfig.ETH_SS_FEATURES
            ctypes.c_uint32.from_address(addr + 16).value = len(self.names)
        elif cmd == nsconfig.ETHTOOL_GSTRINGS:
            assert ctypes.c_uint32.from_address(addr + 4).value == nsconfig.ETH_SS_FEATURES
            for i, name in enumerate(self.names):
                ctypes.memmove(addr + 12 + 32 * i, name.encode(), len(name))
        elif cmd == nsconfig.ETHTOOL_SFEATURES:   # the kernel refuses any other size
            assert ctypes.c_uint32.from_address(addr + 4).value == self.words
            valid = sum(ctypes.c_uint32.from_address(addr + 8 + 8 * w).value << (32 * w)
                        for w in range(self.words))
            requested = sum(ctypes.c_uint32.from_address(addr + 12 + 8 * w).value
                            << (32 * w) for w in range(self.words))
            changeable = valid & ~self.fixed
            self.active = (self.active & ~changeable) | (requested & changeable)
        elif cmd == nsconfig.ETHTOOL_GFEATURES:
            assert ctypes.c_uint32.from_address(addr + 4).value == self.words
            for w in range(self.words):
                ctypes.c_uint32.from_address(addr + 8 + 16 * w + 8).value = \
                    (self.active >> (32 * w)) & 0xFFFFFFFF
        return ifr


#: 40 names: two 32-bit words, rx-gro in the second
NAMES = ([f"feature-{i}" for i in range(33)] + ["tx-tcp-segmentation", "tx-tcp6-segmentation",
         "tx-tcp-accecn-segmentation", "tx-generic-segmentation", "tx-udp-segmentation",
         "rx-gro-list", "rx-gro"])


def test_the_structs_sent_clear_every_named_bit_in_both_words(monkeypatch):
    every = (1 << len(NAMES)) - 1
    kernel = FakeKernel(NAMES, active=every)
    monkeypatch.setattr(nsconfig.fcntl, "ioctl", kernel.ioctl)
    assert nsconfig.offloads_off("veth0") == {}
    cleared = {NAMES[i] for i in range(len(NAMES)) if not kernel.active >> i & 1}
    assert cleared == {"tx-tcp-segmentation", "tx-tcp6-segmentation",
                       "tx-tcp-accecn-segmentation", "tx-generic-segmentation", "rx-gro"}
    assert kernel.cmds == [nsconfig.ETHTOOL_GSSET_INFO, nsconfig.ETHTOOL_GSTRINGS,
                           nsconfig.ETHTOOL_SFEATURES, nsconfig.ETHTOOL_GFEATURES]


def test_a_bit_the_kernel_keeps_on_is_named_not_done(monkeypatch):
    fixed = 1 << NAMES.index("tx-tcp6-segmentation")
    kernel = FakeKernel(NAMES, active=(1 << len(NAMES)) - 1, fixed=fixed)
    monkeypatch.setattr(nsconfig.fcntl, "ioctl", kernel.ioctl)
    assert nsconfig.offloads_off("veth0") == {"tso": ["tx-tcp6-segmentation"]}


def test_an_offload_this_kernel_does_not_name_is_an_error_not_done(monkeypatch):
    kernel = FakeKernel([n for n in NAMES if n != "rx-gro"], active=0)
    monkeypatch.setattr(nsconfig.fcntl, "ioctl", kernel.ioctl)
    with pytest.raises(OSError, match="veth0: ethtool ioctl: no feature named rx-gro"):
        nsconfig.offloads_off("veth0")
