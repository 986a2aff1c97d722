"""The series schema: every standard series of a run directory (``series/NAME.csv``), its
columns in order, which of them are labels, and when its rows happened (docs/reference/results.md,
"Series"). The one place column names are defined: the sampler writes qdisc.csv and
tcp.csv with them (its compiled queue helper writes the same header, checked by the
tests), the engine writes the traffic parts' rows with them, :mod:`.results` loads them
and :mod:`.metrics` reads them. Standard library only (the sampler process imports it).

Other series may be written (a kind of traffic defined elsewhere writes its own, its
columns those of its rows); these are the ones the metrics know.
"""

#: {series: its columns, in file order}
SERIES_COLUMNS = {
    "qdisc": ("t", "dev", "handle", "parent", "kind", "qlen_pkts", "backlog_bytes",
              "sent_bytes", "sent_pkts", "drops", "overlimits", "requeues", "marks",
              "early_drops", "prob", "delay_us", "maxq_pkts",
              # the controller's last update (sch_pi, docs/design/pi.md): q, q_old, p before it,
              # and the update count
              "ctl_q_pkts", "ctl_q_old_pkts", "ctl_prob_prev", "ctl_updates",
              # the largest and the smallest recent sojourn (CAKE's per-tin peak and
              # base delay, bufferbloat/net/qdiscs/cake.py)
              "peak_delay_us", "base_delay_us"),
    "tcp": ("t", "flow", "host", "src", "sport", "dst", "dport", "cca", "state",
            "cwnd_pkts", "ssthresh_pkts", "srtt_us", "rttvar_us", "mss_bytes",
            "in_flight_pkts", "retrans_total", "bytes_acked", "delivery_rate_bps",
            "pacing_rate_bps", "bbr_bw_bps", "bbr_min_rtt_us",
            # tcpi_ca_state (0 open, 1 disorder, 2 CWR, 3 recovery, 4 loss) and
            # tcpi_delivered_ce (segments delivered with ECE echoed: CE marks seen)
            "ca_state", "delivered_ce_pkts",
            # tcpi_min_rtt (the kernel's minimum RTT of the flow), tcpi_data_segs_out
            # and tcpi_bytes_sent (cumulative, retransmissions included)
            "min_rtt_us", "data_segs_out", "bytes_sent",
            # the kernel's chrono statistics (cumulative us): time the socket had data
            # to send (busy), and of it limited by the receive window and by the send
            # buffer; the delivery-rate sample's app-limited flag (0/1)
            "busy_us", "rwnd_limited_us", "sndbuf_limited_us", "app_limited",
            # written but not yet sent; retransmitted (cumulative): the highest byte
            # sent is bytes_sent - bytes_retrans (docs/reference/one-way-delay.md)
            "notsent_bytes", "bytes_retrans"),
    "ping": ("probe", "t", "seq", "rtt_ms"),
    "iperf": ("flow", "t_start", "t_end", "bytes", "bits_per_second", "retransmits",
              "snd_cwnd_bytes", "rtt_us"),
    # cut: 1 for a fetch still running when the run ended (ended by it: not a failure)
    "web": ("fetch", "t", "total_s", "connect_s", "ttfb_s", "size_bytes", "http_code",
            "ok", "cut"),
    "udp": ("stream", "seq", "t_sent", "t_recv", "size_bytes"),
    "irtt": ("probe", "t", "seq", "rtt_ms", "owd_up_ms", "owd_down_ms", "lost"),
    "npm": ("flow", "node", "t_start", "t_end", "sent_bytes", "received_bytes",
            "lost_bytes"),
    # abs_bytes: the message's end in the flow's data (the tool's AbsBytes)
    "npm_msg": ("flow", "seq", "t_sent", "t_recv", "size_bytes", "abs_bytes"),
    # every packet that left a watched leaf, timed by the kernel (bufferbloat/measure/
    # departures.py): its length, enqueue-to-departure time, 1 if the leaf held it
    # before the previous departure
    "departures": ("t", "dev", "len_bytes", "sojourn_ms", "backlogged"),
}

#: Columns that are labels: always loaded as strings, even when they look like numbers.
STRING_COLUMNS = {
    "qdisc": {"dev", "handle", "parent", "kind"},
    "tcp": {"flow", "host", "src", "dst", "cca", "state"},
    "ping": {"probe"},
    "iperf": {"flow"},
    "web": {"fetch"},
    "udp": {"stream"},
    "irtt": {"probe", "lost"},
    "npm": {"flow", "node"},
    "npm_msg": {"flow"},
    "departures": {"dev"},
}

#: The series the traffic leaves, each with the column that says when a row happened
#: (s since the run's t0): the earliest of them is when traffic started.
TRAFFIC_TIME_COLUMNS = (("tcp", "t"), ("iperf", "t_start"), ("udp", "t_sent"),
                        ("web", "t"), ("ping", "t"), ("irtt", "t"))


def columns_of(name, rows):
    """The columns to write series ``name`` with: its schema's when it is a standard
    series (a row with another column is then an error when written), else the keys of
    its first row."""
    return SERIES_COLUMNS.get(name) or tuple(rows[0])


class CellRows(list):
    """Rows of a series already formatted as its CSV cells: tuples of strings in the
    series' column order, each as ``results.records_csv.format_cell`` formats its value
    (a float's shortest exact repr, an int's digits, "" for None/NaN). The series
    writer writes them as they are, checking only each row's length: for a series of
    many rows a tool leaves at once (NetPerfMeter's per-message rows, 75,000 a minute at
    15 Mbit/s), where a dict per row and a format per cell cost seconds under TCG."""


def float_cell(value):
    """A float's cell, as ``format_cell`` makes it: "" for NaN, else its repr."""
    return "" if value != value else repr(value)
