"""Offloads and sysctls set in this process inside another network namespace
(bufferbloat/netlink/nsconfig.py through nlstats.in_netns), on the host kernel, checked
with the tools they replace: ``ethtool -k`` and ``sysctl``, run in that namespace.

The namespace is a holder process's (``unshare --net sleep``), ended by PID; the veth
pair lives and dies with it.
"""
import os
import subprocess
import time

import pytest

from bufferbloat.netlink import nsconfig
from bufferbloat.netlink.nlstats import in_netns

GROUPS = ("tcp-segmentation-offload", "generic-segmentation-offload",
          "generic-receive-offload")


@pytest.fixture
def netns():
    """(pid of a process in a fresh network namespace with a veth pair va/vb, argv prefix
    that runs a tool there)."""
    assert os.geteuid() == 0, "network tests need root"
    holder = subprocess.Popen(["unshare", "--net", "sleep", "300"])
    try:
        ns = ["nsenter", "-t", str(holder.pid), "-n", "--"]
        for _ in range(50):   # unshare has exec'd sleep once the namespace differs
            if os.stat(f"/proc/{holder.pid}/ns/net").st_ino != \
                    os.stat("/proc/self/ns/net").st_ino:
                break
            time.sleep(0.02)
        else:
            pytest.fail("unshare --net did not enter a namespace of its own within 1 s")
        subprocess.run([*ns, "ip", "link", "add", "va", "type", "veth", "peer", "name",
                        "vb"], check=True)
        yield holder.pid, ns
    finally:
        holder.kill()
        holder.wait()


def tool(ns, *argv):
    return subprocess.run([*ns, *argv], check=True, capture_output=True, text=True).stdout


def test_offloads_go_off_as_ethtool_reads_them(netns):
    pid, ns = netns
    before = tool(ns, "ethtool", "-k", "va")
    assert "tcp-segmentation-offload: on" in before     # a veth's default: on
    assert in_netns(pid, lambda: nsconfig.offloads_off("va")) == {}
    after = tool(ns, "ethtool", "-k", "va")
    for group in GROUPS:
        assert f"{group}: off" in after, after
    # every TSO bit, a kernel's newer ones too (6.18: tx-tcp-accecn-segmentation)
    tso = [line for line in after.splitlines()
           if line.strip().startswith("tx-tcp") and "segmentation" in line]
    assert len(tso) >= 4 and all(line.split(":")[1].strip().startswith("off") for line in tso)
    # the peer, not named, is untouched
    assert "tcp-segmentation-offload: on" in tool(ns, "ethtool", "-k", "vb")


def test_a_device_the_namespace_lacks_is_named(netns):
    pid, _ = netns
    with pytest.raises(OSError, match="nodev: ethtool ioctl: No such device"):
        in_netns(pid, lambda: nsconfig.offloads_off("nodev"))
    with pytest.raises(OSError):   # this namespace's own veths are not seen there
        in_netns(None, lambda: nsconfig.offloads_off("va"))


def test_sysctls_are_written_and_read_in_that_namespace_only(netns):
    pid, ns = netns
    key = "net.ipv4.tcp_no_metrics_save"
    with open("/proc/sys/net/ipv4/tcp_no_metrics_save") as f:
        ours = f.read().strip()
    want = "0" if ours == "1" else "1"
    refused = in_netns(pid, lambda: nsconfig.write_sysctls(
        {key: want, "net.ipv4.tcp_rmem": "4096 1048576 16777216",
         "net.ipv4.tcp_congestion_control": "no_such_cca"}))
    assert list(refused) == ["net.ipv4.tcp_congestion_control"]   # the others still set
    assert tool(ns, "sysctl", "-n", key).strip() == want
    assert tool(ns, "sysctl", "-n", "net.ipv4.tcp_rmem").split() == \
        ["4096", "1048576", "16777216"]
    with open("/proc/sys/net/ipv4/tcp_no_metrics_save") as f:
        assert f.read().strip() == ours                          # ours untouched
    got = in_netns(pid, lambda: nsconfig.read_sysctls(
        [key, "net.ipv4.tcp_rmem", "net.ipv4.no_such_key"]))
    assert got == {key: want, "net.ipv4.tcp_rmem": "4096 1048576 16777216"}
