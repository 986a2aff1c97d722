"""The idle RTT probe before the traffic (bufferbloat/traffic/ping.py)."""

def test_the_idle_probe_interval_on_each_machine(monkeypatch):
    """9 ms apart on a real kernel (iputils keeps intervals below 10 ms; 0.18 s for 20
    pings, not 1 s); 50 ms under TCG, where
    the probe runs beside the sampler's start-up; the environment's value, checked."""
    import pytest

    from bufferbloat.core.errors import UsageError
    from bufferbloat.traffic.ping import IDLE_PING_ENV, IDLE_PINGS, idle_ping_interval_s
    monkeypatch.delenv(IDLE_PING_ENV, raising=False)
    monkeypatch.delenv("BUFFERBLOAT_GUEST_ACCEL", raising=False)
    assert idle_ping_interval_s() == 0.009 and IDLE_PINGS * idle_ping_interval_s() <= 0.2
    monkeypatch.setenv("BUFFERBLOAT_GUEST_ACCEL", "tcg")
    assert idle_ping_interval_s() == 0.05
    monkeypatch.setenv(IDLE_PING_ENV, "0.02")
    assert idle_ping_interval_s() == 0.02
    monkeypatch.setenv(IDLE_PING_ENV, "0.0001")
    with pytest.raises(UsageError, match=IDLE_PING_ENV):
        idle_ping_interval_s()
