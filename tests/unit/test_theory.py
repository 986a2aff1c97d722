"""Closed-form expectations, checked against hand-computed values."""
import pytest

from bufferbloat.results.theory import full_queue_rtt_ms, queue_delay_ms, tcp_goodput_ceiling


def test_full_queue_rtt_of_the_textbook_cases():
    assert full_queue_rtt_ms(0, 100, 1.5) == pytest.approx(807.47, abs=0.01)
    assert full_queue_rtt_ms(20, 100, 10) == pytest.approx(141.12, abs=0.01)
    assert queue_delay_ms(20, 1.5) == pytest.approx(161.49, abs=0.01)


def test_probes_take_their_share_of_a_packet_limited_buffer():
    # T = 100 t / (1 + (t - tp)/I), t = 8.075 ms, tp = 98*8/1.5e6 s = 0.523 ms, I = 100 ms
    t, tp = 1514 * 8 / 1.5e3, 98 * 8 / 1.5e3
    expected = 100 * t / (1 + (t - tp) / 100)
    assert full_queue_rtt_ms(0, 100, 1.5, probe_interval_s=0.1) == pytest.approx(expected)
    assert 745 < expected < 752
    # self-consistent: the queue of T ms holds T/I probes and (100 - T/I) full frames
    k = expected / 100
    assert (100 - k) * t + k * tp == pytest.approx(expected)
    # sparser probes converge to the probe-free figure
    assert full_queue_rtt_ms(0, 100, 1.5, probe_interval_s=100) == pytest.approx(
        full_queue_rtt_ms(0, 100, 1.5), rel=1e-3)


def test_goodput_ceiling_is_mss_over_frame():
    assert tcp_goodput_ceiling(10) == pytest.approx(10 * 1448 / 1514)
