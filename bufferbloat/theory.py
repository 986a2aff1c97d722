"""Closed-form expectations the measurements are checked against."""

from .qdisc import MTU_FRAME_BYTES

TCP_PAYLOAD_BYTES = 1448  # MSS with timestamps on a 1500-byte MTU


def queue_delay_ms(buffer_pkts, rate_mbit, frame_bytes=MTU_FRAME_BYTES):
    """Time to drain ``buffer_pkts`` full frames at ``rate_mbit``, ms.

    HTB counts a frame as its Ethernet length (1514 bytes for a 1500-byte packet).
    E.g. 100 packets at 1.5 Mbit/s: 100 * 1514 * 8 / 1.5e6 = 807 ms.
    """
    return buffer_pkts * frame_bytes * 8 / (rate_mbit * 1e6) * 1e3


def full_queue_rtt_ms(base_rtt_ms, buffer_pkts, rate_mbit):
    """RTT seen by a probe queued behind a full FIFO: base RTT + drain time, ms."""
    return base_rtt_ms + queue_delay_ms(buffer_pkts, rate_mbit)


def tcp_goodput_ceiling(rate_mbit):
    """Best TCP goodput through a shaper counting Ethernet frames, Mbit/s (95.6 %)."""
    return rate_mbit * TCP_PAYLOAD_BYTES / MTU_FRAME_BYTES
