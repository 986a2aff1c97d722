"""Closed-form expectations the measurements are checked against."""

from .qdisc import MTU_FRAME_BYTES

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


def tcp_goodput_ceiling(rate_mbit):
    """Best TCP goodput through a shaper counting Ethernet frames, Mbit/s (95.6 %)."""
    return rate_mbit * TCP_PAYLOAD_BYTES / MTU_FRAME_BYTES
