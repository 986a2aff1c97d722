"""Closed-form expectations the measurements are checked against."""

from bufferbloat.net.qdiscs import MTU_FRAME_BYTES, defaults, kind_of
from bufferbloat.net.scaling import two_way_traffic

TCP_PAYLOAD_BYTES = 1448  # MSS with timestamps on a 1500-byte MTU


def queue_delay_ms(buffer_pkts, rate_mbit, frame_bytes=MTU_FRAME_BYTES):
    """Time to drain ``buffer_pkts`` full frames at ``rate_mbit``, ms.

    HTB counts a frame as its Ethernet length (1514 bytes for a 1500-byte packet).
    E.g. 100 packets at 1.5 Mbit/s: 100 * 1514 * 8 / 1.5e6 = 807 ms.
    """
    return buffer_pkts * frame_bytes * 8 / (rate_mbit * 1e6) * 1e3


PING_FRAME_BYTES = 98  # ping's default 56-byte payload in an Ethernet frame


def full_queue_rtt_ms(base_rtt_ms, buffer_pkts, rate_mbit, probe_interval_s=None,
                      probe_frame_bytes=PING_FRAME_BYTES):
    """RTT seen by a probe queued behind a full packet-limited FIFO, ms.

    Without ``probe_interval_s``: base RTT + drain time of ``buffer_pkts`` full frames
    (807 ms for 100 packets at 1.5 Mbit/s). With it, the probes' own share of the buffer
    is accounted for: a FIFO limited in *packets* that holds T ms of queue also holds
    k = T / interval probes, which take a slot each but almost no time, so
    T = (buffer - k) * t_frame + k * t_probe, i.e.
    T = buffer * t_frame / (1 + (t_frame - t_probe) / interval).
    E.g. pings every 0.1 s into 100 packets at 1.5 Mbit/s: 747 ms, not 807.
    """
    t_frame = queue_delay_ms(1, rate_mbit)
    if not probe_interval_s:
        return base_rtt_ms + buffer_pkts * t_frame
    t_probe = queue_delay_ms(1, rate_mbit, probe_frame_bytes)
    interval_ms = probe_interval_s * 1e3
    return base_rtt_ms + buffer_pkts * t_frame / (1 + (t_frame - t_probe) / interval_ms)


#: Linux TCP's smallest congestion window after a loss (segments; after a timeout it is 1)
MIN_CWND_SEGMENTS = 2


def min_window_floor_ms(flows, rate_mbit, base_rtt_ms, frame_bytes=MTU_FRAME_BYTES):
    """The standing queue that ``flows`` TCP flows hold at their smallest window, ms: no
    AQM can keep the queue below it by drops (Morris, "TCP behavior with many flows",
    1997). Each flow keeps :data:`MIN_CWND_SEGMENTS` frames in flight; what the path's
    bandwidth-delay product does not hold waits in the queue:
    max(0, flows * 2 * frame * 8 / rate - base RTT).
    E.g. 4 flows at 10 Mbit/s over 1 ms: 9.7 - 1.0 = 8.7 ms, above a 5 ms target;
    at 100 Mbit/s: 0 (the path holds their windows)."""
    return max(0.0, flows * MIN_CWND_SEGMENTS * queue_delay_ms(1, rate_mbit, frame_bytes)
               - base_rtt_ms)


def tcp_goodput_ceiling(rate_mbit):
    """Best TCP goodput through a shaper counting Ethernet frames, Mbit/s (95.6 %)."""
    return rate_mbit * TCP_PAYLOAD_BYTES / MTU_FRAME_BYTES


# ------------------------------------------------------------- of a recorded run
# What theory says about one run, from its record (a results.Run: a recorded run, or a
# scenario's default setting for ``describe``): the figures draw these lines, the
# headline metrics (bufferbloat/results/headline.py) print them next to the measurements.


def qdisc_info(run):
    """(kind, params) of the bottleneck AQM (:attr:`bufferbloat.results.records.Run.qdisc`)."""
    return run.qdisc


def target_ms(run):
    """The AQM's queueing-delay target, ms, else None (``Run.aqm_target_ms``)."""
    return run.aqm_target_ms


def base_rtt_ms(run):
    """The propagation RTT of the path, ms (``Run.base_rtt_ms``)."""
    return run.base_rtt_ms


def reverse_target_ms(run):
    """The target, ms, of the queue a round trip waits in on the bottleneck's way back:
    0.0 when the load runs one way (the way back carries ACKs: no standing queue);
    under a load both ways the same AQM's with ``aqm_both_ways``, the default of the
    receiver's own kind with ``reverse_qdisc`` (study B's server NIC: fq_codel, 5 ms);
    None when the way back's queue has no target (a FIFO, the default leaf)."""
    if not two_way_traffic(run.record.get("traffic")):
        return 0.0
    params = run.params
    if params.get("aqm_both_ways"):
        return target_ms(run)
    kind = params.get("reverse_qdisc")
    info = kind_of(kind) if kind else None
    if info is None:
        return None
    try:
        value = info.target_ms(defaults(info))
    except (TypeError, KeyError):
        return None
    return float(value) if isinstance(value, (int, float)) else None


def targets_plus_base_ms(run):
    """Latency under load as an AQM sees it: the base RTT plus the target of every AQM
    queue the round trip crosses (the bottleneck's, and the way back's with a load in
    both directions: study B's dumbbell 2 x 20 + 20 = 60 ms; its testbed PIE 20 +
    fq_codel 5 + 1 = 26 ms), else None."""
    target, back, base = target_ms(run), reverse_target_ms(run), base_rtt_ms(run)
    if target is None or back is None or base is None:
        return None
    return target + back + base


def ping_interval_s(run):
    """The ping period of the run's (first) ping traffic, s, or None
    (``Run.ping_interval_s``)."""
    return run.ping_interval_s


def is_drop_tail(kind):
    """Whether qdisc ``kind`` (registry or tc name) is drop-tail: the FIFO theory
    applies."""
    info = kind_of(kind)
    return bool(info is not None and info.drop_tail)


def fifo_buffer(run):
    """(packets, bytes) of a FIFO bottleneck's buffer (one of them None), or None when
    the run's qdisc is not a FIFO."""
    kind, params = qdisc_info(run)
    if not is_drop_tail(kind):
        return None
    pkts = params.get("limit_pkts", run.params.get("buffer_pkts"))
    nbytes = params.get("limit_bytes", run.params.get("buffer_bytes"))
    return (pkts if isinstance(pkts, (int, float)) else None,
            nbytes if isinstance(nbytes, (int, float)) else None)


def fifo_drain_ms(run):
    """How long a full FIFO bottleneck buffer takes to drain, ms (the largest queueing
    delay a FIFO adds), or None when the qdisc is not a FIFO or the record lacks it."""
    buf, rate = fifo_buffer(run), run.bottleneck_mbit
    if not buf or not rate:
        return None
    pkts, nbytes = buf
    if pkts is not None:
        return queue_delay_ms(pkts, rate)
    return nbytes * 8 / (rate * 1e6) * 1e3 if nbytes is not None else None


def run_full_queue_rtt_ms(run, rate_mbit=None):
    """FIFO theory: the RTT of a probe behind a full buffer, ms (:func:`full_queue_rtt_ms`
    with the run's ping interval for a packet-limited buffer; base RTT + bytes x 8 / rate
    for a byte-limited one), at ``rate_mbit`` (default: the run's bottleneck rate), or
    None when the run's qdisc is not a FIFO or the record lacks a number."""
    buf, base = fifo_buffer(run), base_rtt_ms(run)
    rate = rate_mbit or run.bottleneck_mbit
    if not buf or not rate or base is None:
        return None
    pkts, nbytes = buf
    if pkts is not None:
        return full_queue_rtt_ms(base, pkts, rate, probe_interval_s=ping_interval_s(run))
    return base + nbytes * 8 / (rate * 1e6) * 1e3 if nbytes is not None else None


def varying_rate_range_mbit(run):
    """(lowest, highest) rate of a link whose rate varied (``link_trace`` /
    ``link_schedule``: the plan's 10 ms windows, as set), or None on a constant link."""
    lt = run.record.get("link_trace")
    if not isinstance(lt, dict):
        return None
    lo, hi = lt.get("min_mbit"), lt.get("max_mbit")
    if not isinstance(lo, (int, float)) or not isinstance(hi, (int, float)) or hi <= 0:
        return None
    return lo, hi
