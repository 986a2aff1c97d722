"""The capability check, fed with recorded kernel configurations."""
import gzip
import os

import pytest
from conftest import FIXTURES

from bufferbloat.core.errors import MissingFeature
from bufferbloat.net.capabilities import assess, auto_switch, parse_modules

KDIR = os.path.join(FIXTURES, "kernels")


def read(name):
    path = os.path.join(KDIR, name)
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rt") as f:
        return f.read()


def host():
    return assess(read("host-6.18-config.gz"), available_ccas=read("host-6.18-ccas.txt"),
                  tools={"tc": "/usr/sbin/tc", "iperf3": None}, kernel_release="6.18")


def test_host_kernel_has_htb_and_lacks_the_aqms():
    caps = host()
    for ok in ("sch_htb", "sch_fifo", "bridge", "veth", "netns", "ifb", "reno", "cubic", "bbr"):
        assert caps.has(ok), ok
    for missing in ("sch_pie", "sch_netem", "sch_red", "sch_codel", "sch_fq_codel",
                    "openvswitch", "vegas", "sctp"):  # no SCTP: no NetPerfMeter passive side
        assert not caps.has(missing), missing
    assert caps.hz == 250
    assert auto_switch(caps) == "bridge"


def test_missing_feature_error_names_it_and_the_way_out():
    with pytest.raises(MissingFeature) as err:
        host().require(["sch_htb", "sch_pie", "iperf3"])
    msg = str(err.value)
    assert "sch_pie" in msg and "CONFIG_NET_SCH_PIE is not set" in msg
    assert "iperf3" in msg and "Debian package iperf3" in msg
    assert "--vm" in msg
    assert "sch_htb" not in msg


@pytest.fixture
def guest_inputs():
    cfg = read("guest-6.1-config.gz")
    return cfg, read("guest-6.1-modules.dep.gz"), read("guest-6.1-modules.builtin.gz")


def test_debian_guest_kernel_has_everything_as_modules(guest_inputs):
    cfg, dep, builtin = guest_inputs
    caps = assess(cfg, dep, builtin, available_ccas="reno cubic",
                  tools={"ovs-vsctl": "/usr/bin/ovs-vsctl"})
    for name in ("sch_pie", "sch_netem", "sch_red", "sch_codel", "sch_fq_codel",
                 "openvswitch", "vegas", "bbr", "ifb", "sch_htb", "sctp"):
        assert caps.has(name), name
    assert "loadable module" in {r.detail for r in caps.rows if r.name == "sch_pie"}
    assert auto_switch(caps) == "ovs"


def test_module_configured_but_not_installed_is_missing(guest_inputs):
    cfg, dep, builtin = guest_inputs
    dep = "\n".join(line for line in dep.splitlines() if "sch_pie" not in line)
    caps = assess(cfg, dep, builtin)
    assert not caps.has("sch_pie")
    assert "not installed" in next(r.detail for r in caps.rows if r.name == "sch_pie")


def test_module_kernel_without_module_support():
    caps = assess("CONFIG_NET_SCH_PIE=m\nCONFIG_NET_SCH_HTB=y\n", "kernel/sch_pie.ko:\n")
    assert caps.has("sch_htb") and not caps.has("sch_pie")


def test_unreadable_config_is_reported_not_assumed():
    caps = assess("")
    assert not caps.has("sch_htb")
    assert "not readable" in next(r.detail for r in caps.rows if r.name == "sch_htb")


def test_parse_modules_handles_compressed_names():
    names = parse_modules("kernel/net/sched/sch_fq_codel.ko.xz: kernel/x.ko\n"
                          "kernel/net/ipv4/tcp-vegas.ko.zst:\n", "kernel/net/sched/sch_htb.ko\n")
    assert names == {"sch_fq_codel", "tcp_vegas", "sch_htb"}


def test_port_rules_for_the_control_path(guest_inputs):
    """NetPerfMeter's control path needs FIB rules that match a TCP port: both recorded
    kernels have them; a kernel without multiple tables, or older than 4.17, is named."""
    cfg, dep, builtin = guest_inputs
    assert assess(cfg, dep, builtin, kernel_release="6.1.0-56-amd64").has("policy_routing")
    assert host().has("policy_routing")
    old = assess(cfg, dep, builtin, kernel_release="4.9.0-8-amd64")
    assert not old.has("policy_routing")
    assert "Linux >= 4.17" in next(r.detail for r in old.rows if r.name == "policy_routing")
    without = assess(cfg.replace("CONFIG_IP_MULTIPLE_TABLES=y", ""), dep, builtin,
                     kernel_release="6.1.0-56-amd64")
    assert not without.has("policy_routing")
    assert "CONFIG_IP_MULTIPLE_TABLES is not set" in next(
        r.detail for r in without.rows if r.name == "policy_routing")
