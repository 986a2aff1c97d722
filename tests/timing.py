"""Which timing bands hold on this machine.

The host tier's timing bands (a sampler tick's p99, a process started on time, departures
against an ideal link, a full FIFO's RTT) are a real-time machine's: the host kernel here,
or a stock Debian kernel on real hardware. Inside the project VM under qemu's software
emulation (TCG; ``vm/run`` sets BUFFERBLOAT_GUEST_ACCEL in the guest) the guest's timers
come late and a process takes seconds to start (docs/design/health.md), so those bands do not
hold there, and the VM tier measures the same behaviours with the bands TCG holds.

Inside such a VM, a test that is a real-time band as a whole is skipped with the name of
the VM test that measures it (``realtime_only``); a test that checks a function and also
a real-time timing checks the function everywhere and the timing against the band this
machine holds (``sampler_timing_misses``, ``START_SLACK_S``). Nothing is skipped on a host.
"""
import os

import pytest

from bufferbloat.results.health_record import MAX_MISSED_TICKS, check_sampler

#: the CPU is emulated: the project VM under TCG (bufferbloat/vm/session.py GUEST_ACCEL_ENV)
EMULATED_CPU = os.environ.get("BUFFERBLOAT_GUEST_ACCEL") == "tcg"
#: a band whose bounds differ under TCG is another series there: its name ends in this
UNDER_TCG = " under TCG" if EMULATED_CPU else ""

#: how late a traffic process may start after its scheduled time, in these tests, whose
#: processes start right at t0 with no lead time (a run's engine starts them ahead). A
#: real-time host: the tests' slack (an iperf3 flow 0.5 s, a scheduled ping 0.2 s, a UDP
#: stream's first packet 20 ms, a web fetch on its 3 s grid 0.1 s). Under TCG a process
#: takes seconds to start: measured in the VM, a UDP stream's first packet 3.2 s late
#: (its receiver's and its sender's Python started one after the other), an iperf3
#: download 0.8 s, a scheduled ping 0.46 s (4 s bounds them), a fetch 0.26 s (1 s). A
#: run's processes are judged in every run by the health verdict's `flows_on_time`
#: (MAX_START_LATE_S), in the VM tier too.
START_SLACK_S = ({"ping": 4.0, "iperf3": 4.0, "udp": 4.0, "fetch": 1.0} if EMULATED_CPU
                 else {"ping": 0.2, "iperf3": 0.5, "udp": 0.02, "fetch": 0.1})


def realtime_only(vm_test):
    """Skip, under an emulated CPU, a test whose bands are a real-time host's as a whole;
    ``vm_test`` names the VM tier's test of the same behaviour with TCG's bands."""
    return pytest.mark.skipif(
        EMULATED_CPU, reason=f"a real-time host's timing band (tests/timing.py); under "
                             f"TCG the VM tier measures it: {vm_test}")


def sampler_timing_misses(stats, p99_ms):
    """What a sampler's stats miss of this machine's timing band: a real-time host's tick
    p99 <= ``p99_ms``; under TCG the VM tier's band (tests/vm/test_sampler_vm.py: the
    median tick within 1 ms of 10) and the health verdict's limit on skipped ticks
    (docs/design/health.md `sampler_missed_ticks`). Returns a list of what missed; the
    values judged go into the test record (tests.retries.observe)."""
    from tests.retries import observe  # noqa: PLC0415 - the record is the session's
    miss = []
    if not EMULATED_CPU:
        observe("sampler tick p99", stats["period_p99_ms"], hi=p99_ms, unit="ms")
        if stats["period_p99_ms"] > p99_ms:
            miss.append(f"tick p99 {stats['period_p99_ms']} ms > {p99_ms}")
        return miss
    observe("sampler tick p50 under TCG", stats["period_p50_ms"], 9.0, 11.0, "ms")
    if abs(stats["period_p50_ms"] - 10) > 1.0:
        miss.append(f"tick p50 {stats['period_p50_ms']} ms not within 1 ms of 10")
    check = check_sampler({"sampler": stats}).get("sampler_missed_ticks")
    observe("sampler missed ticks' share under TCG", check and check["value"],
            hi=MAX_MISSED_TICKS)
    if not check or not check["ok"]:
        miss.append(f"skipped ticks: {check}")
    return miss
