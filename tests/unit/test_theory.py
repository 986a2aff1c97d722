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


def _aqm_run(qdisc_params, rrul=False, **params):
    from bufferbloat.results.records import Run
    traffic = [{"kind": "rrul", "name": "rrul"}] if rrul else [{"kind": "iperf"}]
    return Run("/nonexistent", {"params": params, "traffic": traffic,
                                "qdisc": {"kind": "pie", "params": qdisc_params}})


def test_latency_under_load_counts_every_aqm_queue_the_round_trip_crosses():
    from bufferbloat.results.theory import reverse_target_ms, targets_plus_base_ms
    # A.2: PIE one way (target 20 ms), a 20 ms base RTT: 40 ms
    one_way = _aqm_run({"target_ms": 20}, delay_ms=5)
    assert reverse_target_ms(one_way) == 0.0
    assert targets_plus_base_ms(one_way) == pytest.approx(40.0)
    # B's dumbbell: PIE both ways under RRUL: 2 x 20 + 20 = 60 ms
    both = _aqm_run({"target_ms": 20}, rrul=True, delay_ms=5, aqm_both_ways=True)
    assert targets_plus_base_ms(both) == pytest.approx(60.0)
    # the same AQM both ways under a one-way load: the way back holds ACKs only
    acks = _aqm_run({"target_ms": 20}, delay_ms=5, aqm_both_ways=True)
    assert targets_plus_base_ms(acks) == pytest.approx(40.0)
    # B's testbed: PIE 20 on the uploads, the server NIC's fq_codel (5 ms) on the
    # downloads, 0.25 ms a link: 20 + 5 + 1 = 26 ms
    testbed = _aqm_run({"target_ms": 20}, rrul=True, delay_ms=0.25,
                       reverse_qdisc="fq_codel")
    assert reverse_target_ms(testbed) == pytest.approx(5.0)
    assert targets_plus_base_ms(testbed) == pytest.approx(26.0)
    # a two-way load whose way back is a FIFO (named, or the default leaf): no theory
    # rather than a wrong one
    for way_back in ({"reverse_qdisc": "fifo"}, {}):
        assert targets_plus_base_ms(_aqm_run({"target_ms": 20}, rrul=True, delay_ms=5,
                                             **way_back)) is None


def test_the_smallest_window_floor():
    """N flows at 2 segments each hold N * 2 frames, less what the path holds: RRUL's 4
    flows at 10 Mbit/s over 1 ms hold 8.7 ms (above a 5 ms target), at 100 Mbit/s none."""
    from bufferbloat.results.theory import min_window_floor_ms
    frame = queue_delay_ms(1, 10)                                # 1.2112 ms
    assert min_window_floor_ms(4, 10, 1.0) == pytest.approx(8 * frame - 1.0, abs=1e-9)
    assert min_window_floor_ms(4, 10, 1.0) == pytest.approx(8.69, abs=0.01)
    assert min_window_floor_ms(4, 100, 1.0) == 0.0
    assert min_window_floor_ms(1, 1.5, 20.0) == 0.0              # a2_pie: one flow
    assert min_window_floor_ms(8, 10, 1.0) > min_window_floor_ms(4, 10, 1.0)
