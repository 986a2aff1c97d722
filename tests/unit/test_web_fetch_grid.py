"""The web fetcher's grid: fetch i is due at its scheduled time + i x every_s, only
before its part's stop, never shifted by a late start (bufferbloat/traffic/web.py).

A fetch due exactly at the part's stop once raced the schedule's stop and won on a loaded
host (6 fetches in a 15 s run at 3 s; the gate's FIFO test counts 5). Here curl is a fake
that answers at once, the clock is the real monotonic one, and the bounds are a thread's
wake-up on a loaded 2-core machine."""

import time

import pytest

from bufferbloat.core.errors import ParameterError
from bufferbloat.traffic import kinds
from bufferbloat.traffic.base import PartContext
from bufferbloat.traffic.web import WebFetcher

#: how late a fetch may start after its due time here (a thread's wake-up on a loaded
#: 2-core machine: the grids below keep their fetches more than this apart from their
#: stops, so that no count depends on it)
LATE_S = 0.3


class _Proc:
    pid = 10 ** 7
    returncode = 0

    def __init__(self, takes_s=0.0):
        self.takes_s = takes_s

    def communicate(self, timeout=None):
        time.sleep(self.takes_s)
        return "0.001 0.002 0.003 200 100\n", None


class _Net:
    """curl launched on a host: records the monotonic time of each launch; fetch i
    takes ``takes_s[i]`` s (default none)."""

    def __init__(self, takes_s=None):
        self.launched = []
        self.takes_s = takes_s or {}

    def ip(self, host):
        return "10.0.0." + host[1:]

    def popen(self, host, argv, **kw):
        assert argv[0] == "curl"
        self.launched.append(time.monotonic())
        return _Proc(self.takes_s.get(len(self.launched) - 1, 0.0))


def _run(fetcher, stop_after_s):
    fetcher.start()
    time.sleep(stop_after_s)
    fetcher.stop()
    return [r["t"] for r in fetcher.fetches]


def test_no_fetch_is_due_at_or_after_the_window_even_when_the_stop_comes_late():
    t0 = time.monotonic()
    f = WebFetcher(_Net(), "h1", "h2", every_s=0.2, window_s=1.0, t0=t0,
                   realtime_minus_monotonic=0.0)
    f.scheduled_s = 0.0
    # the schedule's stop 0.4 s after the window's end: the fetch due at 1.0 s (the
    # window's end) and the one at 1.2 s are not started
    t = _run(f, 1.4)
    assert len(t) == 5, t
    for i, ti in enumerate(t):
        assert i * 0.2 <= ti <= i * 0.2 + LATE_S, (i, t)
    assert f.summary()["fetches"] == 5


def test_a_fetch_held_past_the_window_by_a_slow_one_is_not_started():
    t0 = time.monotonic()
    # fetch 2 (due 0.4 s) lasts until ~1.6 s: fetch 3, due at 0.6, would start then,
    # after the window's end (1.0 s), were the stop late
    f = WebFetcher(_Net(takes_s={2: 1.2}), "h1", "h2", every_s=0.2, window_s=1.0, t0=t0,
                   realtime_minus_monotonic=0.0)
    f.scheduled_s = 0.0
    f.start()
    f._thread.join(5)        # the loop ends by itself after its window
    assert not f._thread.is_alive()
    f.stop()
    assert [r["index"] for r in f.fetches] == [0, 1, 2], f.fetches


def test_a_late_start_makes_the_first_fetch_late_never_the_grid():
    t0 = time.monotonic()
    f = WebFetcher(_Net(), "h1", "h2", every_s=0.5, window_s=2.0, t0=t0,
                   realtime_minus_monotonic=0.0)
    f.scheduled_s = 0.0
    time.sleep(0.6)          # its schedule's thread woke 0.6 s after the due time
    t = _run(f, 1.7)
    # due at 0, 0.5, 1.0, 1.5: the first two at once (caught up), then on the grid (a
    # grid from the late start would put them at 1.6 and 2.1)
    assert len(t) == 4, t
    assert 0.6 <= t[0] <= 0.6 + LATE_S and t[0] <= t[1] <= 0.6 + LATE_S, t
    for i in (2, 3):
        assert i * 0.5 <= t[i] <= i * 0.5 + LATE_S, (i, t)
    # health judges the late first fetch: its launch against the due time
    assert f.summary()["t_launch"] - f.scheduled_s >= 0.6


def test_used_on_its_own_the_grid_starts_at_start_and_runs_until_stop():
    t0 = time.monotonic()
    net = _Net()
    f = WebFetcher(net, "h1", "h2", every_s=0.6, t0=t0, realtime_minus_monotonic=0.0,
                   start_s=0.1)
    time.sleep(0.2)
    t = _run(f, 1.6)         # started at 0.2: due 0.3, 0.9, 1.5 before the stop at 1.8
    assert len(t) >= 3, t
    for i, ti in enumerate(t[:3]):
        assert 0.3 + 0.6 * i <= ti <= 0.3 + 0.6 * i + LATE_S, (i, t)
    time.sleep(0.8)          # past the next due time: nothing fetches after stop()
    assert len(net.launched) == len(t)


@pytest.mark.parametrize("bad", [-1, "x", float("nan")])
def test_a_bad_window_is_refused(bad):
    with pytest.raises(ParameterError):
        WebFetcher(_Net(), "h1", "h2", every_s=1.0, window_s=bad)


def test_the_part_gives_its_fetcher_its_window():
    ctx = PartContext(net=_Net(), duration_s=15.0, t0=0.0, realtime_minus_monotonic=0.0)
    part = kinds.build({"kind": "web", "name": "web", "client": "h1", "server": "h2",
                  "every_s": 3.0, "start": 0.2, "stop": 0.8}, ctx)
    assert part.fetcher.window_s == pytest.approx(9.0)


def test_a_stop_that_raises_is_listed_and_the_other_parts_still_stop():
    """finish() closes the record whatever a part's stop does (a stop a signal had
    interrupted raised "I/O operation on closed file" when called again, and the record
    stayed "running")."""
    from bufferbloat.run.engine import stop_parts  # noqa: PLC0415

    stopped = []

    class Part:
        def __init__(self, name, fails):
            self.name, self.fails = name, fails

        def stop(self):
            stopped.append(self.name)
            if self.fails:
                raise ValueError("I/O operation on closed file.")

    parts = [Part("a", False), Part("web", True), Part("c", False)]
    errors = []
    stop_parts(parts, errors)
    assert stopped == ["c", "web", "a"]
    assert errors == ["web: ValueError: I/O operation on closed file."]
    with pytest.raises(ValueError):      # without a list, as run_network calls it
        stop_parts(parts)
