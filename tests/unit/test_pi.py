"""The PI controller: the kernel module's own updates against the reference law, step by
step, from a trace recorded in the project VM (tests/fixtures/tools/sch_pi: the 10 ms
qdisc samples of a 20-flow c1 run; every sample carries the module's last update: q,
q_old, p before and after, and an update count), the netlink encoding, and the gains'
design rule."""
import csv
import json
import os
import socket
import struct

import pytest

from bufferbloat.core.errors import ParameterError, UsageError
from bufferbloat.net import nlqdisc, qdiscs
from bufferbloat.net.bottleneck import shaped
from bufferbloat.net.qdiscs import make_qdisc, pi
from bufferbloat.netlink import nlstats

FIX = os.path.join(os.path.dirname(__file__), "..", "fixtures", "tools", "sch_pi")


def _trace():
    with open(os.path.join(FIX, "qdisc-pi-20flows.json")) as f:
        meta = json.load(f)
    with open(os.path.join(FIX, "qdisc-pi-20flows.csv")) as f:
        rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
    return meta["qdisc"]["params"], rows


def test_every_recorded_update_follows_the_law():
    par, rows = _trace()
    a, b, qref = par["a"], par["b"], par["q_ref_pkts"]
    clamped_low = clamped_high = moved = 0
    for r in rows:
        q, q_old, before, after = r["ctl_q_pkts"], r["ctl_q_old_pkts"], r["ctl_prob_prev"], \
            r["prob"]
        # the module's integer arithmetic, from the CSV's p (rounded to 1e-9): exact to
        # that rounding (2e-9)
        want_fixed = pi.step_fixed(round(before * pi.ONE), int(q), int(q_old), qref,
                                   pi.to_nano(a), pi.to_nano(b)) / pi.ONE
        assert after == pytest.approx(want_fixed, abs=2e-9), r
        # the law in real numbers: the gains' fixed-point floor (< 2^-32 per packet of
        # error) and the rounding stay below 5e-8 for errors up to the 86-packet limit
        assert after == pytest.approx(pi.step(before, q, q_old, qref, a, b), abs=5e-8), r
        raw = before + a * (q - qref) - b * (q_old - qref)
        clamped_low += raw < 0
        clamped_high += raw > 1
        moved += abs(after - before) > 1e-6
    # the trace exercises the law, not only an idle queue: many moving steps, and p
    # clamped at 0 when the queue empties
    assert moved > 100 and clamped_low > 10, (moved, clamped_low, clamped_high)


def test_consecutive_updates_chain():
    """Two samples one update apart: the later one's 'before' is the earlier one's
    'after' (p and q): the module keeps one state and updates it once per period."""
    _, rows = _trace()
    pairs = 0
    for prev, cur in zip(rows, rows[1:]):
        if cur["ctl_updates"] - prev["ctl_updates"] == 1:
            pairs += 1
            assert cur["ctl_prob_prev"] == pytest.approx(prev["prob"], abs=1e-9)
            assert cur["ctl_q_old_pkts"] == prev["ctl_q_pkts"]
    assert pairs > 100


def test_study_gains_follow_hollots_design_rule():
    """a, b of the study are the bilinear discretisation at 160 Hz of a PI controller
    whose zero sits on the TCP pole 2N/(R^2 C) of this link (N = 20, R = 49 ms,
    C = 10 Mbit/s of 536 B packets): within 2 %."""
    k, zero = pi.controller_of(pi.STUDY_A, pi.STUDY_B, pi.STUDY_FREQ_HZ)
    pole = pi.tcp_pole(20, 0.049, 10e6 / (8 * 536))
    assert zero == pytest.approx(pole, rel=0.02)
    a, b = pi.gains(k, zero, pi.STUDY_FREQ_HZ)
    assert (a, b) == pytest.approx((pi.STUDY_A, pi.STUDY_B), rel=1e-9)


def test_fixed_point_clamps_and_matches_reals():
    one = pi.ONE
    assert pi.step_fixed(0, 0, 0, 14, 1136000, 1086000) == 0          # empty queue: 0
    assert pi.step_fixed(one, 500, 0, 14, 1136000, 1086000) == one    # clamped at 1
    p = pi.step_fixed(0, 40, 14, 14, 1136000, 1086000) / one
    assert p == pytest.approx(0.001136 * 26, rel=1e-6)


def test_netlink_request_layout():
    """RTM_NEWQDISC create|replace|ack, tcmsg, TCA_KIND "pi", nested TCA_OPTIONS."""
    opts = nlqdisc.parse_options("pi", ["limit", "86", "a", "0.001136", "ecn", "1"])
    assert opts == [(pi.TCA_PI_LIMIT, 86), (pi.TCA_PI_A, 1136000), (pi.TCA_PI_ECN, 1)]
    msg = nlqdisc.request(7, nlqdisc.parse_handle("1:1"), nlqdisc.parse_handle("10:"), "pi",
                          opts)
    length, mtype, flags, _seq, _pid = struct.unpack_from("=IHHII", msg)
    assert length == len(msg) and mtype == nlstats.RTM_NEWQDISC
    assert flags == 0x1 | 0x4 | 0x400 | 0x100
    fam, ifindex, handle, parent, _info = struct.unpack_from("=BxxxiIII", msg, 16)
    assert (fam, ifindex, handle, parent) == (socket.AF_UNSPEC, 7, 0x100000, 0x10001)
    attrs = {t: (s, e) for t, s, e in nlstats.iter_attrs(msg, 36, len(msg))}
    s, e = attrs[nlstats.TCA_KIND]
    assert msg[s:e] == b"pi\0"
    s, e = attrs[nlqdisc.TCA_OPTIONS]
    inner = {t: struct.unpack_from("=I", msg, a)[0] for t, a, _ in nlstats.iter_attrs(msg, s, e)}
    assert inner == {pi.TCA_PI_LIMIT: 86, pi.TCA_PI_A: 1136000, pi.TCA_PI_ECN: 1}


def test_bad_options_exit_2(capsys):
    assert nlqdisc.main(["lo", "1:1", "10:", "pi", "nope", "1"]) == 2
    assert "unknown pi option" in capsys.readouterr().err
    assert nlqdisc.main(["lo", "1:1", "10:", "pi", "limit"]) == 2
    assert nlqdisc.main(["lo", "1:1", "10:", "red"]) == 2


def test_extended_ack_message_is_read():
    err = struct.pack("=IHHII", 64, nlstats.NLMSG_ERROR, nlqdisc.NLM_F_ACK_TLVS, 1, 0)
    err += struct.pack("=i", -22) + struct.pack("=IHHII", 40, 36, 0, 1, 0)
    text = b"pi: freq_hz must be 1..10000\0"
    err += struct.pack("=HH", 4 + len(text), nlqdisc.NLMSGERR_ATTR_MSG) + text
    assert nlqdisc.ack_error(err) == (22, "pi: freq_hz must be 1..10000")


def test_pi_spec_is_validated_and_installed_through_netlink():
    spec = make_qdisc("pi", limit_pkts=86, ecn=True)
    assert spec.params["q_ref_pkts"] == 14 and spec.params["freq_hz"] == 160
    steps = shaped("h2", "s0-eth2", 10, spec.tc_args(10), "bottleneck")
    leaf = steps[-1].argv
    assert leaf[1:3] == ("-m", "bufferbloat.net.nlqdisc") and leaf[3:7] == ("s0-eth2", "1:1", "10:",
                                                                       "pi")
    assert dict(zip(leaf[7::2], leaf[8::2]))["ecn"] == "1"
    with pytest.raises((ParameterError, UsageError)):
        make_qdisc("pi", freq_hz=0)
    with pytest.raises((ParameterError, UsageError)):
        make_qdisc("pi", a=-1)


def test_xstats_decode():
    raw = struct.pack("=QQIIIIIIII", pi.ONE // 4, pi.ONE // 8, 20, 14, 99, 1000, 3, 2, 50, 0)
    d = qdiscs.decode_xstats("pi", raw)
    assert d["prob"] == 0.25 and d["ctl_prob_prev"] == 0.125
    assert (d["ctl_q_pkts"], d["ctl_q_old_pkts"], d["ctl_updates"]) == (20, 14, 99)
    assert (d["early_drops"], d["marks"]) == (3, 50)
