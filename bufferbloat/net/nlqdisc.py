"""Install a qdisc that ``tc`` cannot parse (the project's PI) with one RTM_NEWQDISC.

``tc`` needs a parser per kind (q_pi.so); the kernel needs none: the request carries
``TCA_KIND`` and a nested ``TCA_OPTIONS`` of u32 attributes. Used as a command so that a
plan step is an argument list run in a host's namespace like every ``tc`` step::

    python3 -m bufferbloat.net.nlqdisc DEV PARENT HANDLE pi limit 1000 q_ref 14 \\
        a 0.001136 b 0.001086 freq_hz 160 ecn 1 mean_pktsize 0

It exits 0 once the kernel acknowledged the qdisc, 2 on bad arguments, and 1 with the
kernel's error otherwise (e.g. "No such file or directory: the kernel has no qdisc 'pi'
(module sch_pi not installed)").
"""

import os
import socket
import struct
import sys

from bufferbloat.net.qdiscs import KINDS as _REGISTRY
from bufferbloat.net.qdiscs.pi import to_nano
from bufferbloat.netlink.nlstats import NLM_F_REQUEST, NLMSG_ERROR, RTM_NEWQDISC, TCA_KIND

NLM_F_ACK = 0x4
NLM_F_REPLACE = 0x100
NLM_F_CREATE = 0x400
TCA_OPTIONS = 2
NLA_F_NESTED = 0x8000
_HDR = struct.Struct("=IHHII")
_TCMSG = struct.Struct("=BxxxiIII")

#: {kind: {option word: TCA_OPTIONS attribute}}: the registry's kinds tc cannot parse
KINDS = {k.tc_kind: dict(k.netlink_options) for k in _REGISTRY.values() if k.netlink_options}
#: {kind: option words given as real numbers, sent in units of 1e-9}
GAINS = {k.tc_kind: k.netlink_gains for k in _REGISTRY.values() if k.netlink_options}


def parse_handle(text):
    """``1:1`` / ``10:`` / ``root`` -> the 32-bit handle."""
    if text == "root":
        return 0xFFFFFFFF
    maj, sep, mnr = text.partition(":")
    if not sep:
        raise ValueError(f"bad handle {text!r} (e.g. 10: or 1:1)")
    return (int(maj or "0", 16) << 16) | int(mnr or "0", 16)


def _attr(atype, payload):
    n = 4 + len(payload)
    return struct.pack("=HH", n, atype) + payload + b"\0" * ((4 - n % 4) % 4)


def request(ifindex, parent, handle, kind, u32s, seq=1):
    """The RTM_NEWQDISC message (create or replace) for ``kind`` with options
    ``[(attr, u32)]``."""
    opts = b"".join(_attr(t, struct.pack("=I", v)) for t, v in u32s)
    body = (_TCMSG.pack(socket.AF_UNSPEC, ifindex, handle, parent, 0)
            + _attr(TCA_KIND, kind.encode() + b"\0")
            + _attr(TCA_OPTIONS | NLA_F_NESTED, opts))
    flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE
    return _HDR.pack(16 + len(body), RTM_NEWQDISC, flags, seq, 0) + body


SOL_NETLINK = 270
NETLINK_CAP_ACK, NETLINK_EXT_ACK = 10, 11
NLM_F_ACK_TLVS = 0x200
NLMSGERR_ATTR_MSG = 1


def ack_error(data):
    """(errno, the kernel's extended-ack message or None) of an answer; errno 0: ok."""
    length, mtype, flags, _seq, _pid = _HDR.unpack_from(data)
    if mtype != NLMSG_ERROR:
        return 0, None
    err = -struct.unpack_from("=i", data, 16)[0]
    text = None
    if flags & NLM_F_ACK_TLVS:           # capped ack: error, the request's header, TLVs
        off = 16 + 4 + 16
        while off + 4 <= min(length, len(data)):
            alen, atype = struct.unpack_from("=HH", data, off)
            if alen < 4:
                break
            if atype == NLMSGERR_ATTR_MSG:
                text = bytes(data[off + 4:off + alen]).rstrip(b"\0").decode(errors="replace")
            off += (alen + 3) & ~3
    return err, text


def send(msg):
    """Send ``msg`` on NETLINK_ROUTE in this namespace; raise OSError (with the kernel's
    own message where it gives one) on an error."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as s:
        s.settimeout(5.0)
        for opt in (NETLINK_CAP_ACK, NETLINK_EXT_ACK):
            try:
                s.setsockopt(SOL_NETLINK, opt, 1)
            except OSError:
                pass
        s.bind((0, 0))
        s.send(msg)
        data = s.recv(65536)
    err, text = ack_error(data)
    if err:
        raise OSError(err, os.strerror(err) + (f" ({text})" if text else ""))


def parse_options(kind, words):
    """``["limit", "1000", "a", "0.001", ...]`` -> [(attr, u32)] for ``kind``."""
    names = KINDS[kind]
    if len(words) % 2:
        raise ValueError(f"options come in pairs (name value): {' '.join(words)}")
    out = []
    for name, value in zip(words[::2], words[1::2]):
        if name not in names:
            raise ValueError(f"unknown {kind} option {name!r} (valid: {', '.join(names)})")
        v = to_nano(float(value)) if name in GAINS[kind] else int(value)
        if not 0 <= v < 1 << 32:
            raise ValueError(f"{name} {value} is out of range")
        out.append((names[name], v))
    return out


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 4 or argv[3] not in KINDS:
        print("usage: python3 -m bufferbloat.net.nlqdisc DEV PARENT HANDLE KIND [NAME VALUE]..."
              f" (KIND: {', '.join(KINDS)})", file=sys.stderr)
        return 2
    dev, parent, handle, kind = argv[:4]
    try:
        msg = request(socket.if_nametoindex(dev), parse_handle(parent), parse_handle(handle),
                      kind, parse_options(kind, argv[4:]))
    except (ValueError, OSError) as exc:
        print(f"nlqdisc: {exc}", file=sys.stderr)
        return 2
    try:
        send(msg)
    except OSError as exc:
        hint = (f": the kernel has no qdisc {kind!r} (module sch_{kind} not installed; "
                "it is built in the project VM image)" if exc.errno == 2 else "")
        print(f"nlqdisc: {dev} {kind}: {exc.strerror}{hint}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
