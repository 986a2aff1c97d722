"""What this kernel and machine can emulate: ``bufferbloat check``.

The answer comes from the kernel's own build configuration (``/proc/config.gz`` or
``/boot/config-RELEASE``), its module index (``modules.dep``/``modules.builtin``), the
congestion controls it lists, and the tools on PATH. Nothing here touches the network, so
a scenario can be refused before any namespace or link exists.

The pure function :func:`assess` takes those inputs as text, which is how the unit tests
feed it recorded configurations of other kernels.
"""

import gzip
import importlib.util
import os
import platform
import re
import shutil
import sys
from dataclasses import dataclass

from bufferbloat.core.errors import MissingFeature
from bufferbloat.net.qdiscs import KINDS as QDISC_KINDS

# feature -> (kernel config symbol, module name, what it is for)
KERNEL_FEATURES = {
    "sch_htb": ("CONFIG_NET_SCH_HTB", "sch_htb", "rate shaper of every link"),
    # the bottleneck's queue disciplines: each kind's module (bufferbloat/net/qdiscs/)
    **{k.module: (k.config, k.module, k.doc) for k in QDISC_KINDS.values()
       if not k.project_module},
    "sch_netem": ("CONFIG_NET_SCH_NETEM", "sch_netem", "propagation delay, jitter, loss"),
    "sch_ingress": ("CONFIG_NET_SCH_INGRESS", "sch_ingress", "ingress hook for IFB"),
    "ifb": ("CONFIG_IFB", "ifb", "impairments after the bottleneck queue"),
    "act_mirred": ("CONFIG_NET_ACT_MIRRED", "act_mirred", "redirect to IFB"),
    "cls_u32": ("CONFIG_NET_CLS_U32", "cls_u32", "match-all filter for IFB"),
    "openvswitch": ("CONFIG_OPENVSWITCH", "openvswitch", "OVS kernel datapath switch"),
    "bridge": ("CONFIG_BRIDGE", "bridge", "Linux bridge switch"),
    "veth": ("CONFIG_VETH", "veth", "emulated links"),
    "netns": ("CONFIG_NET_NS", None, "network namespaces (Mininet hosts)"),
    "sctp": ("CONFIG_IP_SCTP", "sctp", "NetPerfMeter's passive side (its control socket)"),
    "policy_routing": ("CONFIG_IP_MULTIPLE_TABLES", None, "a tool's control path beside "
                       "the emulated links (rules by TCP port: Linux >= 4.17)"),
}
#: the first kernel whose FIB rules match a TCP port (FRA_IP_PROTO, FRA_DPORT_RANGE)
PORT_RULES_KERNEL = (4, 17)
# the project's own modules: (module, what it is for, where it is built)
PROJECT_MODULES = {k.module: (k.doc, k.project_module) for k in QDISC_KINDS.values()
                   if k.project_module}
CCAS = {"reno": None, "cubic": "CONFIG_TCP_CONG_CUBIC", "bbr": "CONFIG_TCP_CONG_BBR",
        "vegas": "CONFIG_TCP_CONG_VEGAS"}
CCA_MODULES = {"cubic": "tcp_cubic", "bbr": "tcp_bbr", "vegas": "tcp_vegas"}
# tool -> Debian package that provides it
TOOLS = {"iperf3": "iperf3", "ping": "iputils-ping", "curl": "curl", "tc": "iproute2",
         "ip": "iproute2", "ethtool": "ethtool", "mnexec": "mininet",
         "nsenter": "util-linux", "brctl": "bridge-utils",
         "ovs-vsctl": "openvswitch-switch", "irtt": "irtt",
         "netperfmeter": "netperfmeter"}
#: Python module -> Debian package that installs it for Debian's /usr/bin/python3
PYTHON_PACKAGES = {"mininet": "mininet", "numpy": "python3-numpy",
                   "matplotlib": "python3-matplotlib"}


@dataclass
class Capability:
    """One row of the check: ``name``, ``kind`` (qdisc/module/cca/tool/python),
    ``ok``, and ``detail`` (how it is provided or why it is missing)."""

    name: str
    kind: str
    ok: bool
    detail: str


class Capabilities:
    """The assessed capabilities of one machine, indexable by feature name."""

    def __init__(self, rows, kernel_release, hz):
        self.rows = rows
        self.kernel_release = kernel_release
        self.hz = hz
        self._by_name = {r.name: r for r in rows}

    def has(self, name):
        """True if feature/tool/CCA ``name`` is usable here."""
        row = self._by_name.get(name)
        return bool(row and row.ok)

    def missing(self, names):
        """One line per missing feature of ``names``: name, kind and why."""
        out = []
        for n in sorted(set(names)):
            row = self._by_name.get(n)
            if row is None:
                out.append(f"{n}: unknown feature")
            elif not row.ok:
                out.append(f"{n} ({row.kind}): {row.detail}")
        return out

    def require(self, names, hint=None):
        """Raise :class:`MissingFeature` naming every missing one of ``names``."""
        missing = self.missing(names)
        if missing:
            raise MissingFeature(missing, hint)

    def to_dict(self):
        """JSON-ready form, recorded with every run."""
        return {"kernel_release": self.kernel_release, "hz": self.hz,
                "features": {r.name: {"kind": r.kind, "ok": r.ok, "detail": r.detail}
                             for r in self.rows}}

    def table(self):
        """A plain-text table for ``bufferbloat check``."""
        lines = [f"kernel {self.kernel_release}, HZ={self.hz}",
                 f"{'feature':<14} {'kind':<7} {'status':<8} detail"]
        for r in self.rows:
            lines.append(f"{r.name:<14} {r.kind:<7} {'yes' if r.ok else 'MISSING':<8} "
                         f"{r.detail}")
        return "\n".join(lines)


def parse_config(text):
    """Parse a kernel .config: {symbol: 'y'|'m'|value}; unset symbols are absent."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("CONFIG_") and "=" in line:
            key, _, val = line.partition("=")
            out[key] = val.strip('"')
    return out


def parse_modules(modules_dep="", modules_builtin=""):
    """Module names (without .ko suffix, '-' as '_') listed in modules.dep/builtin."""
    names = set()
    for text in (modules_dep, modules_builtin):
        for line in text.splitlines():
            path = line.split(":", 1)[0].strip()
            if not path:
                continue
            base = os.path.basename(path)
            for suffix in (".ko.xz", ".ko.zst", ".ko.gz", ".ko"):
                if base.endswith(suffix):
                    base = base[: -len(suffix)]
                    break
            names.add(base.replace("-", "_"))
    return names


def assess(config_text, modules_dep="", modules_builtin="", available_ccas="",
           tools=None, python_modules=None, kernel_release="unknown"):
    """Assess capabilities from recorded inputs (see module doc).

    config_text: the kernel .config. modules_dep/modules_builtin: the module index texts.
    available_ccas: content of net.ipv4.tcp_available_congestion_control. tools: {name:
    path or None}. python_modules: {name: bool}.
    """
    cfg = parse_config(config_text)
    loadable = cfg.get("CONFIG_MODULES") == "y"
    modules = parse_modules(modules_dep, modules_builtin)
    rows = []

    def kernel_row(name, symbol, module, kind):
        val = cfg.get(symbol) if symbol else None
        if val == "y":
            return Capability(name, kind, True, "built into the kernel")
        if val == "m":
            if not loadable:
                return Capability(name, kind, False, f"{symbol}=m but this kernel cannot "
                                  "load modules")
            if module and module not in modules:
                return Capability(name, kind, False, f"{symbol}=m but {module}.ko is not "
                                  "installed for this kernel")
            return Capability(name, kind, True, "loadable module")
        if not cfg:
            return Capability(name, kind, False, "kernel configuration not readable")
        return Capability(name, kind, False, f"{symbol} is not set in this kernel")

    release = _release_tuple(kernel_release)
    for name, (symbol, module, _why) in KERNEL_FEATURES.items():
        kind = "qdisc" if name.startswith("sch_") else "kernel"
        row = kernel_row(name, symbol, module, kind)
        if name == "policy_routing" and row.ok and release and release < PORT_RULES_KERNEL:
            row = Capability(name, kind, False, f"{symbol}=y, but Linux {kernel_release} "
                             "rules cannot match a TCP port (Linux >= 4.17)")
        rows.append(row)
    for name, (_why, where) in PROJECT_MODULES.items():
        if loadable and name in modules:
            rows.append(Capability(name, "qdisc", True, f"this project's module ({where})"))
        else:
            why = ("this kernel cannot load modules" if cfg and not loadable
                   else f"{name}.ko is not installed for this kernel")
            rows.append(Capability(name, "qdisc", False, f"{why}: it is this project's own "
                                   f"module ({where}); run in the project VM "
                                   "(sudo ./run_all.sh, or vm/run -- python3 -m bufferbloat ...)"))
    listed = set(available_ccas.split())
    for name, symbol in CCAS.items():
        if name in listed or name == "reno":
            rows.append(Capability(name, "cca", True, "available"))
        else:
            rows.append(kernel_row(name, symbol, CCA_MODULES.get(name), "cca"))
    for tool, package in TOOLS.items():
        path = (tools or {}).get(tool)
        rows.append(Capability(tool, "tool", bool(path), path or
                               f"not found on PATH: install the Debian package {package}"))
    for mod, ok in (python_modules or {}).items():
        rows.append(Capability(mod, "python", ok, "importable" if ok else
                               python_hint(mod)))
    return Capabilities(rows, kernel_release, int(cfg.get("CONFIG_HZ", 0) or 0) or None)


def _release_tuple(release):
    """(major, minor) of a kernel release ('6.1.0-56-amd64' -> (6, 1)), None if unknown."""
    m = re.match(r"(\d+)\.(\d+)", release or "")
    return (int(m[1]), int(m[2])) if m else None


def python_hint(module):
    """What to do when this Python cannot import ``module`` (mininet, numpy...)."""
    package = PYTHON_PACKAGES.get(module, f"python3-{module}")
    text = (f"not importable by this Python ({sys.executable}): run with /usr/bin/python3, "
            f"Debian's, with the package {package} installed (sudo apt-get install "
            f"{package}; sudo ./run_all.sh installs everything)")
    if module != "mininet":   # Mininet comes with its mnexec binary: Debian's package only
        text += f", or pip install {module} into this Python's environment"
    return text


def _read(path, opener=open):
    try:
        with opener(path, "rt") as f:
            return f.read()
    except OSError:
        return ""


_CACHE = {}


def probe(refresh=False):
    """Assess this machine (cached for the process; ``refresh`` re-reads)."""
    if "caps" in _CACHE and not refresh:
        return _CACHE["caps"]
    release = platform.release()
    config = _read("/proc/config.gz", gzip.open) or _read(f"/boot/config-{release}")
    moddir = f"/lib/modules/{release}"
    caps = assess(
        config,
        _read(f"{moddir}/modules.dep"),
        _read(f"{moddir}/modules.builtin"),
        _read("/proc/sys/net/ipv4/tcp_available_congestion_control"),
        tools={t: shutil.which(t, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
               for t in TOOLS},
        python_modules={m: importlib.util.find_spec(m) is not None
                        for m in ("mininet", "numpy", "matplotlib")},
        kernel_release=release,
    )
    _CACHE["caps"] = caps
    return caps


def needed_for_switch(kind):
    """Features a switch kind needs ('ovs' or 'bridge')."""
    return ["openvswitch", "ovs-vsctl"] if kind == "ovs" else ["bridge", "brctl"]


def auto_switch(caps):
    """OVS kernel datapath where it exists, Linux bridge otherwise."""
    return "ovs" if caps.has("openvswitch") and caps.has("ovs-vsctl") else "bridge"

