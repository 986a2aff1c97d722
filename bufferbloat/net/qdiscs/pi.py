"""The PI AQM controller (Hollot, Misra, Towsley, Gong, INFOCOM 2001): its law, its
fixed-point arithmetic as the project's kernel module ``sch_pi`` (vm/guest/sch_pi) runs
it, its netlink options, and the design rule that gives the study's gains.

The law, every 1/f seconds::

    p <- clamp(p + a (q - q_ref) - b (q_old - q_ref), 0, 1)

with q, q_ref in packets (the unit of Hollot et al. and ns-2's ``queue/pi.cc``). The
module keeps p in units of 2^-32 and a, b as ``floor(a_nano * 2^32 / 1e9)`` where
``a_nano`` is a in units of 1e-9 per packet, the value netlink carries:
:func:`step_fixed` is that arithmetic exactly, so a recorded trace of the module's updates
(its xstats: p, p before, q, q_old) can be checked step by step (tests/unit/test_pi.py).

Why a = 0.001136 and b = 0.001086 (study C: 10 Mbit/s, 536 B packets, N = 20 flows,
R ~ 0.049 s, f = 160 Hz). Hollot et al.'s plant, TCP + queue linearised, is
(C^2/2N) / ((s + 2N/(R^2 C)) (s + 1/R)) e^(-sR), C the capacity in packets/s. Their PI
controller K (s/z + 1)/s puts its zero z on the TCP pole 2N/(R^2 C) and the crossover wg
below the queue pole 1/R. Here C = 10e6 / (8 * 536) = 2332 packets/s, so
z = 2 * 20 / (0.049^2 * 2332) = 7.1 rad/s; what is left of the loop, (K/z)(C^2/2N) /
(s (s + 1/R)), crosses 1 at wg ~ 7 rad/s for K/z = 0.00111, a phase margin of ~51 deg.
Discretised at f (bilinear, T = 1/f): a = K (1/z + T/2), b = K (1/z - T/2). The study's
pair is exactly that: K = (a - b) f = 0.008, K/z = (a + b)/2 = 0.001111, z = 7.2 rad/s
(:func:`controller_of`, :func:`gains`, tests/unit/test_pi.py). With q counted in bytes
the same numbers would move p by 0.6 per 536 B of error per update: a bang-bang
controller. Hence q in packets.
"""

import struct

from bufferbloat.net.qdiscs.base import LIMIT_PKTS, Param, QdiscKind, unpack_padded

ONE = 1 << 32          # p = 1.0 in the module's fixed point
NANO = 10 ** 9

# netlink attributes of TCA_OPTIONS for kind "pi" (vm/guest/sch_pi/sch_pi.c)
TCA_PI_LIMIT, TCA_PI_QREF, TCA_PI_A, TCA_PI_B, TCA_PI_FREQ, TCA_PI_ECN, \
    TCA_PI_MEAN_PKTSIZE = range(1, 8)

# the study's gains (q in packets, 160 Hz)
STUDY_A = 0.001136
STUDY_B = 0.001086
STUDY_FREQ_HZ = 160


def to_nano(x):
    """A gain per packet in the module's netlink unit (1e-9 per packet), rounded."""
    return int(round(x * NANO))


def fixed(nano):
    """The module's fixed-point gain: floor(nano * 2^32 / 1e9)."""
    return (int(nano) << 32) // NANO


def step_fixed(p, q, q_old, q_ref, a_nano, b_nano):
    """One update in the module's integer arithmetic: p, result in 2^-32 units."""
    p = p + fixed(a_nano) * (q - q_ref) - fixed(b_nano) * (q_old - q_ref)
    return min(max(p, 0), ONE)


def step(p, q, q_old, q_ref, a, b):
    """One update of the law in real numbers (p in 0..1)."""
    return min(max(p + a * (q - q_ref) - b * (q_old - q_ref), 0.0), 1.0)


def tcp_pole(flows, rtt_s, capacity_pps):
    """2N / (R^2 C): the TCP window dynamics' pole, rad/s (Hollot et al.)."""
    return 2.0 * flows / (rtt_s * rtt_s * capacity_pps)


def gains(k, zero_rad_s, freq_hz):
    """(a, b) of the discrete PI controller K (s/z + 1)/s at sampling rate ``freq_hz``
    (bilinear transform)."""
    t = 1.0 / freq_hz
    return k * (1.0 / zero_rad_s + t / 2), k * (1.0 / zero_rad_s - t / 2)


def controller_of(a, b, freq_hz):
    """(K, zero in rad/s) of the continuous controller behind gains ``a``, ``b``."""
    k = (a - b) * freq_hz
    return k, k / ((a + b) / 2.0)


# vm/guest/sch_pi: struct tc_pi_xstats (48 B): u64 prob, prob_prev (2^-32 units), u32 q,
# q_old, updates, packets_in, dropped, overlimit, ecn_mark, pad
_PI = struct.Struct("=QQIIIIIIII")
PI_PROB_ONE = float(ONE)


class Pi(QdiscKind):
    name = tc_kind = "pi"
    module = "sch_pi"
    project_module = "vm/guest/sch_pi, built into the project VM image by vm/provision.sh"
    doc = ("PI controller of Hollot, Misra, Towsley and Gong (INFOCOM 2001): p += a (q - "
           "q_ref) - b (q_old - q_ref) at freq_hz, q in packets; the project's own module "
           "(vm/guest/sch_pi, bufferbloat/net/qdiscs/pi.py)")
    params = (
        Param("limit_pkts", default=1000, doc="buffer in packets (tail drop)", **LIMIT_PKTS),
        Param("q_ref_pkts", int, 14, "reference queue, packets (8 kB of 536 B packets)",
              lo=0, hi=1_000_000),
        Param("a", float, STUDY_A, "gain on the queue's error, per packet per update",
              lo=0, hi=4),
        Param("b", float, STUDY_B, "gain on the previous error, per packet per update "
              "(a - b: the integral part)", lo=0, hi=4),
        Param("freq_hz", int, STUDY_FREQ_HZ, "updates per second (hrtimer)", lo=1, hi=10_000),
        Param("ecn", bool, False, "mark ECN-capable packets instead of dropping"),
        Param("mean_pktsize_bytes", int, None, "count the queue as backlog / this many "
              "bytes instead of packets", lo=1, hi=65535),
    )
    color = "#ff7f0e"         # orange
    # tc has no parser for "pi": bufferbloat.net.nlqdisc sends these u32 attributes
    netlink_options = {"limit": TCA_PI_LIMIT, "q_ref": TCA_PI_QREF, "a": TCA_PI_A,
                       "b": TCA_PI_B, "freq_hz": TCA_PI_FREQ, "ecn": TCA_PI_ECN,
                       "mean_pktsize": TCA_PI_MEAN_PKTSIZE}
    netlink_gains = frozenset({"a", "b"})

    def tc_args(self, p, rate_mbit):
        # not tc's syntax: nlqdisc's option words (bottleneck.shaped runs that command
        # instead of tc for this leaf)
        return ["pi", "limit", str(p["limit_pkts"]), "q_ref", str(p["q_ref_pkts"]),
                "a", f"{p['a']:.9g}", "b", f"{p['b']:.9g}", "freq_hz", str(p["freq_hz"]),
                "ecn", str(int(p["ecn"])), "mean_pktsize", str(p["mean_pktsize_bytes"] or 0)]

    def controller_freq_hz(self, p):
        return p.get("freq_hz")

    def thresholds(self, p):
        if p.get("q_ref_pkts") is None:
            return []
        return [(p["q_ref_pkts"], "packets", f"PI q_ref {p['q_ref_pkts']} pkts", "qref")]

    def decode_xstats(self, xs):
        if len(xs) < 16:
            return {}
        prob, prob_prev, q, q_old, updates, pkts_in, dropped, overlimit, ecn, _pad = \
            unpack_padded(_PI, xs)
        return {"prob": prob / PI_PROB_ONE, "ctl_prob_prev": prob_prev / PI_PROB_ONE,
                "prob_fixed": prob, "prob_prev_fixed": prob_prev, "ctl_q_pkts": q,
                "ctl_q_old_pkts": q_old, "ctl_updates": updates, "packets_in": pkts_in,
                "early_drops": dropped, "pi_overlimit": overlimit, "marks": ecn}


KIND = Pi()
