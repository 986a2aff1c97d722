"""The project's PI qdisc in the VM's kernel: `bufferbloat check` lists sch_pi as this
project's module, the module in the image is built for the running kernel, a Network
with qdisc=pi installs it over netlink as the bottleneck's AQM leaf (autoloaded), tc's
readback names it, and a bad option comes back as the kernel's own message."""
import platform
import subprocess
import sys

from bufferbloat.net import capabilities
from bufferbloat.net.network import Network
from bufferbloat.net.topology import DumbbellTopo


def test_check_lists_sch_pi_built_for_this_kernel():
    caps = capabilities.probe(refresh=True)
    assert caps.has("sch_pi"), caps.missing(["sch_pi"])
    out = subprocess.run([sys.executable, "-m", "bufferbloat", "check"], capture_output=True,
                         text=True, timeout=120).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("sch_pi "))
    assert "yes" in line and "this project's module" in line
    magic = subprocess.run(["modinfo", "-F", "vermagic", "sch_pi"], capture_output=True,
                           text=True, check=True).stdout.split()[0]
    assert magic == platform.release()
    path = subprocess.run(["modinfo", "-n", "sch_pi"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert path == f"/lib/modules/{platform.release()}/extra/sch_pi.ko"


def test_bottleneck_pi_installed_over_netlink_and_read_back():
    topo = DumbbellTopo(bottleneck_mbit=10, delay_ms=5, qdisc="pi", buffer_pkts=86,
                        qdisc_params={"ecn": True, "q_ref_pkts": 14})
    with Network(topo) as net:
        tree = net.bottleneck_tree()
        assert tree["leaf"]["kind"] == "pi"
        assert tree["leaf"]["parent"] == "1:1"
        step = next(s for s in net.plan if "bufferbloat.net.nlqdisc" in s.argv)
        words = step.argv[step.argv.index("pi") + 1:]
        assert dict(zip(words[::2], words[1::2])) == {
            "limit": "86", "q_ref": "14", "a": "0.001136", "b": "0.001086",
            "freq_hz": "160", "ecn": "1", "mean_pktsize": "0"}
        # every host asks for ECN because the qdisc marks
        assert {h: v["net.ipv4.tcp_ecn"] for h, v in net.sysctls().items()} == \
            {"h1": "1", "h2": "1"}
        ns, dev = net.bottleneck_dev
        res = subprocess.run(net.ns_prefix(ns) + [sys.executable, "-m", "bufferbloat.net.nlqdisc",
                                                  dev, "1:1", "10:", "pi", "freq_hz", "0"],
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 1
        assert "freq_hz must be 1..10000" in res.stderr     # the kernel's extended ack
