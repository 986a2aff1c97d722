"""The rows the sampler process writes: a qdisc's (``series/qdisc.csv``) and a TCP
socket's (``series/tcp.csv``) from their netlink decodings, in the columns of
:mod:`bufferbloat.core.series`, and the CSV file they go to between flushes."""

import csv

from bufferbloat.netlink import nlstats

_U64_MAX = (1 << 64) - 1


class RowWriter:
    """CSV rows of one file, buffered between flushes."""

    def __init__(self, path, columns):
        self.f = open(path, "w", newline="")
        self.w = csv.writer(self.f, lineterminator="\n")
        self.w.writerow(columns)
        self.f.flush()
        self.rows = []

    def flush(self, rows):
        self.w.writerows(rows)
        self.f.flush()

    def close(self):
        self.f.close()


def qdisc_row(t, dev, q):
    """A qdisc.csv row from a decoded qdisc (see :func:`bufferbloat.net.qdiscs.parse_qdisc_dump`)."""
    prob = q.get("prob")
    return (t, dev, nlstats.tc_handle(q["handle"]), nlstats.tc_handle(q["parent"]),
            q["kind"], q.get("qlen"), q.get("backlog"), q.get("bytes"), q.get("packets"),
            q.get("drops"), q.get("overlimits"), q.get("requeues"), q.get("marks"),
            q.get("early_drops"), None if prob is None else round(prob, 9), q.get("delay_us"),
            q.get("maxq_pkts"), q.get("ctl_q_pkts"), q.get("ctl_q_old_pkts"),
            None if q.get("ctl_prob_prev") is None else round(q["ctl_prob_prev"], 9),
            q.get("ctl_updates"), q.get("peak_delay_us"), q.get("base_delay_us"))


def _min_rtt(info):
    """tcpi_min_rtt, us; None before the first RTT sample (the kernel reports ~0U)."""
    v = info.get("min_rtt")
    return None if not v or v >= 0xFFFFFFFF else v


def tcp_row(t, label, host, s):
    """A tcp.csv row from a decoded socket (see :func:`bufferbloat.netlink.nlstats.parse_diag_dump`)."""
    i = s["info"]
    ssth = i["snd_ssthresh"]
    pacing = i["pacing_rate"]
    dr = i["delivery_rate"]
    bw = s["bbr_bw_Bps"]
    # tcpi_rtt is 0 until the socket's first RTT sample (a connection still in its
    # handshake): "no sample yet" is an empty cell, not an RTT of 0
    no_rtt = not i["rtt"]
    return (t, label, host, s["src"], s["sport"], s["dst"], s["dport"], s["cca"], s["state"],
            i["snd_cwnd"], None if ssth is None or ssth >= nlstats.TCP_INFINITE_SSTHRESH
            else ssth, None if no_rtt else i["rtt"], None if no_rtt else i["rttvar"],
            i["snd_mss"], nlstats.in_flight_pkts(i),
            i["total_retrans"], i["bytes_acked"], None if dr is None else dr * 8,
            None if pacing is None or pacing >= _U64_MAX else pacing * 8,
            None if bw is None else bw * 8, s["bbr_min_rtt_us"], i.get("ca_state"),
            i.get("delivered_ce"), _min_rtt(i),
            i.get("data_segs_out"), i.get("bytes_sent"), i.get("busy_time"),
            i.get("rwnd_limited"), i.get("sndbuf_limited"),
            None if i.get("flags7") is None else i["flags7"] & 1,
            i.get("notsent_bytes"), i.get("bytes_retrans"))
