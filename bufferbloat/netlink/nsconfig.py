"""A namespace's offloads and sysctls, set and read in this process: no tool process.

Under TCG every process started in a Mininet host (nsenter, then ethtool or sysctl)
costs 60-150 ms; a network of 20 senders ran 84 ethtool and 42 sysctl processes
(9.4 s of its build in the project VM, bench/bench_build.py). These functions do the
same through the kernel's own interfaces, called inside the host's namespace with
:func:`bufferbloat.netlink.nlstats.in_netns` (a short-lived thread that enters it):

* offloads: the ``SIOCETHTOOL`` ioctl's feature commands (include/uapi/linux/ethtool.h:
  ``ETHTOOL_GSTRINGS`` of the feature set for the names, ``ETHTOOL_SFEATURES`` to clear
  them, ``ETHTOOL_GFEATURES`` to read back), by the names ``ethtool -K DEV tso off gso off
  gro off`` clears: every ``tx-tcp*-segmentation`` (so a newer kernel's new TSO bit, e.g.
  6.18's ``tx-tcp-accecn-segmentation``, which the old one-feature ``ETHTOOL_STSO``
  leaves on, goes too), ``tx-generic-segmentation`` and ``rx-gro``;
* sysctls: the files under ``/proc/sys``, whose ``net`` part is the namespace of the
  thread that opens them (``net_ctl_header_lookup`` uses ``current``).
"""

import ctypes
import errno
import fcntl
import fnmatch
import re
import socket
import struct

SIOCETHTOOL = 0x8946
IFNAMSIZ = 16
#: sizeof(struct ifreq) on 64-bit Linux: the name, then a 24-byte union (ifr_data)
IFREQ_SIZE = 40
ETHTOOL_GSTRINGS, ETHTOOL_GSSET_INFO = 0x1B, 0x37
ETHTOOL_GFEATURES, ETHTOOL_SFEATURES = 0x3A, 0x3B
ETH_SS_FEATURES, ETH_GSTRING_LEN = 4, 32
#: ethtool -K's offload -> the feature names it clears (ethtool's off_flag_def patterns)
FEATURES = {"tso": "tx-tcp*-segmentation", "gso": "tx-generic-segmentation",
            "gro": "rx-gro"}
#: a sysctl key as this project writes one: dotted words, no path tricks
SYSCTL_KEY = re.compile(r"[a-z0-9_]+(\.[a-z0-9_-]+)+")


def _ethtool(sock, dev, payload):
    """One ethtool command (``payload``: its struct, ``cmd`` first) on ``dev``: the struct
    as the kernel left it."""
    buf = ctypes.create_string_buffer(payload, len(payload))
    ifr = struct.pack(f"@{IFNAMSIZ}sP", dev.encode(), ctypes.addressof(buf))
    fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifr.ljust(IFREQ_SIZE, b"\0"))
    return buf.raw


def feature_names(sock, dev):
    """The kernel's feature names, in bit order (``ethtool -k``'s lines)."""
    info = _ethtool(sock, dev, struct.pack("=IIQI", ETHTOOL_GSSET_INFO, 0,
                                           1 << ETH_SS_FEATURES, 0))
    count = struct.unpack_from("=I", info, 16)[0]
    raw = _ethtool(sock, dev, struct.pack("=III", ETHTOOL_GSTRINGS, ETH_SS_FEATURES, count)
                   + bytes(count * ETH_GSTRING_LEN))
    return [raw[12 + i * ETH_GSTRING_LEN:12 + (i + 1) * ETH_GSTRING_LEN]
            .split(b"\0", 1)[0].decode() for i in range(count)]


def active_features(sock, dev, words):
    """The bits of ``dev``'s active features (``words`` 32-bit words) as one int."""
    raw = _ethtool(sock, dev, struct.pack("=II", ETHTOOL_GFEATURES, words) + bytes(16 * words))
    return sum(struct.unpack_from("=I", raw, 8 + 16 * w + 8)[0] << (32 * w)
               for w in range(words))


def ifname(dev):
    """``dev`` as the bytes of an ifreq's name; ValueError, before any ioctl, when the
    kernel could hold no interface by that name (its dev_valid_name: empty, IFNAMSIZ
    bytes or more, ``.``, ``..``, a ``/`` or whitespace) or the ioctl would read another
    (a NUL ends it early). A ``:`` passes: ifconfig's address labels (``eth0:1``) are
    ifreq names, though no interface's."""
    if (not dev or len(dev.encode()) >= IFNAMSIZ or dev in (".", "..") or "/" in dev
            or "\0" in dev or any(c.isspace() for c in dev)):
        raise ValueError(f"not an interface name: {dev!r}")
    return dev.encode()


def offloads_off(dev, offloads=tuple(FEATURES)):
    """Turn ``offloads`` (ethtool -K's names) of ``dev`` off, in this thread's namespace,
    then read them back: {offload: [its feature names still on]} of those not done
    (empty: done). OSError naming ``dev`` when the device or a command is refused."""
    ifname(dev)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            names = feature_names(sock, dev)
            words = (len(names) + 31) // 32
            bits = {o: [i for i, n in enumerate(names) if fnmatch.fnmatchcase(n, FEATURES[o])]
                    for o in offloads}
            unknown = [o for o, b in bits.items() if not b]
            if unknown:   # never "done" for a feature this kernel does not name
                raise OSError(errno.ENOENT, f"no feature named {FEATURES[unknown[0]]}")
            mask = sum(1 << i for b in bits.values() for i in b)
            blocks = b"".join(struct.pack("=II", (mask >> (32 * w)) & 0xFFFFFFFF, 0)
                              for w in range(words))
            _ethtool(sock, dev, struct.pack("=II", ETHTOOL_SFEATURES, words) + blocks)
            active = active_features(sock, dev, words)
        except OSError as exc:
            raise OSError(exc.errno, f"{dev}: ethtool ioctl: {exc.strerror}") from None
    left = {o: [names[i] for i in b if active >> i & 1] for o, b in bits.items()}
    return {o: on for o, on in left.items() if on}


def _path(key):
    if not SYSCTL_KEY.fullmatch(key):
        raise ValueError(f"not a sysctl key: {key!r}")
    return "/proc/sys/" + key.replace(".", "/")


def write_sysctls(values):
    """Write {key: value} (this thread's namespace), each key in one write; returns
    {key: the kernel's refusal} for those it refused, after trying every key (as
    ``sysctl -w`` goes on past a key that fails)."""
    paths = {key: _path(key) for key in values}   # every key checked before any write
    refused = {}
    for key, value in values.items():
        try:
            with open(paths[key], "w") as f:
                f.write(str(value))
        except OSError as exc:
            refused[key] = exc.strerror or str(exc)
    return refused


def read_sysctls(keys):
    """{key: value} of ``keys`` (this thread's namespace), white space as single spaces;
    a key the namespace lacks (or will not let us read) is left out."""
    paths = {key: _path(key) for key in keys}
    out = {}
    for key, path in paths.items():
        try:
            with open(path) as f:
                out[key] = " ".join(f.read().split())
        except OSError:   # missing here, or unreadable: left out, as sysctl's read did
            continue
    return out
