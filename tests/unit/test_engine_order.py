"""The engine's start-up order: the sampler's start-up runs beside the idle
RTT probe, except when a part labels its flows only once prepared (NetPerfMeter); the
departure trace starts only once the sampler is ready (the order docs/design/cost.md
measured), and the traffic's origin always follows a sampler
that is ready and prepared parts."""
import types

import pytest

from bufferbloat.run import engine


class _Part:
    origin_at = None
    probes_rtt = False

    def __init__(self, calls, after_prepare):
        self.calls, self.flows_known_after_prepare = calls, after_prepare
        self.name = "p"

    def endpoints(self):
        return ("h1", "h2")

    def prepare(self):
        self.calls.append("prepare")

    def start(self, origin):
        self.calls.append("start")

    def wait(self, timeout):
        pass

    def stop(self):
        pass

    def problem(self):
        return None

    def reported_error(self):
        return None


#: the run's prewarmed sampler process, alive
WARM = types.SimpleNamespace(alive=lambda: True)


class _Sampler:
    def __init__(self, calls):
        self.calls = calls

    prewarmed = False

    def launch(self, prewarmed=None):
        self.calls.append("sampler_launch")
        self.prewarmed = prewarmed is WARM
        return self

    def wait_ready(self):
        self.calls.append("sampler_ready")
        return self

    def alive(self):
        return True

    def stop(self):
        self.calls.append("sampler_stop")


def _ctx(calls, after_prepare, monkeypatch):
    parts = [_Part(calls, after_prepare)]
    monkeypatch.setattr(engine, "build_parts",
                        lambda *a, **k: calls.append(("warm", k["sampler_warm"])) or parts)
    monkeypatch.setattr(engine, "idle_rtt",
                        lambda *a: calls.append("idle_rtt") or {"samples": 0})
    monkeypatch.setattr(engine, "make_sampler", lambda ctx, t0: _Sampler(calls))
    monkeypatch.setattr(engine, "start_departures",
                        lambda ctx, t0: calls.append("departures_start"))
    monkeypatch.setattr(engine, "stop_departures", lambda ctx: None)
    monkeypatch.setattr(engine, "health_problem", lambda *a: None)
    writer = types.SimpleNamespace(start_clock=lambda: 0.0, dir="/nonexistent")
    net = types.SimpleNamespace(readback=lambda: {})
    ctx = types.SimpleNamespace(
        net=net, writer=writer, record={"realtime_minus_monotonic": 0.0, "network": {}},
        traffic=[], duration_s=0.01, run_dir="/nonexistent", topo=None, parts=[],
        sampler=None, departures=None, measured=False, phases={},
        prewarmed=WARM)
    ctx.phase = lambda name: _Phase(ctx, name)
    return ctx


class _Phase:
    def __init__(self, ctx, name):
        self.ctx, self.name = ctx, name

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.ctx.phases[self.name] = self.ctx.phases.get(self.name, 0.0)
        return False


@pytest.mark.parametrize("after_prepare,order", [
    (False, ["sampler_launch", "idle_rtt", "sampler_ready", "departures_start",
             "prepare", "start"]),
    (True, ["idle_rtt", "prepare", "sampler_launch", "sampler_ready",
            "departures_start", "start"]),
])
def test_the_sampler_starts_beside_the_idle_probe_unless_flows_need_prepare(
        after_prepare, order, monkeypatch):
    calls = []
    ctx = _ctx(calls, after_prepare, monkeypatch)
    engine.measure(ctx)
    # the parts are told the sampler's process is warm (NetPerfMeter's shorter lead)
    assert calls[0] == ("warm", True)
    assert calls[1:len(order) + 1] == order
    assert ctx.measured and "traffic_start_s" in ctx.record
    # the process started with the network is the one launched, and the record says so
    assert ctx.record["sampler_prewarmed"] is True
    # one sampler_start phase however many steps it took
    assert {"sampler_start", "idle_rtt", "prepare", "departures_start"} <= set(ctx.phases)


def test_netperfmeter_parts_label_their_flows_once_prepared():
    from bufferbloat.traffic.base import TrafficPart
    from bufferbloat.traffic.netperfmeter import NetPerfMeterPart
    assert NetPerfMeterPart.flows_known_after_prepare is True
    assert TrafficPart.flows_known_after_prepare is False


def test_tool_versions_are_asked_once_per_process_and_returned_as_copies(monkeypatch):
    from bufferbloat.core import machine
    asked = []
    monkeypatch.setattr(machine, "_TOOL_VERSIONS", None)
    monkeypatch.setattr(machine, "_ask_tool_versions",
                        lambda: asked.append(1) or {"iperf3": "iperf 3.12"})
    first = machine.tool_versions()
    first["iperf3"] = "changed by a caller"
    assert machine.tool_versions() == {"iperf3": "iperf 3.12"}
    assert len(asked) == 1


@pytest.mark.parametrize("ahead_s", [0.3, -2.0])
def test_the_origin_is_a_pre_connected_parts_own_start_even_when_passed(ahead_s,
                                                                        monkeypatch):
    """A pre-connected part (NetPerfMeter) begins its flows at ``origin_at`` by its own
    clock. The origin waits for it when ahead; when the sampler's start-up took longer
    than the lead and that time has passed, the origin is still that time (the other
    parts late: the emulator behind), never later (which made the flows look early: a
    D run judged faulty on a loaded machine)."""
    import time
    calls = []
    ctx = _ctx(calls, True, monkeypatch)
    clock = time.monotonic()
    monkeypatch.setattr(_Part, "origin_at", clock + ahead_s)
    starts = []
    monkeypatch.setattr(_Part, "start", lambda self, origin: starts.append(origin))
    engine.measure(ctx)
    assert starts == [pytest.approx(clock + ahead_s)]
    assert ctx.record["traffic_start_s"] == pytest.approx(clock + ahead_s)
    if ahead_s < 0:
        assert ctx.record["origin_passed_s"] >= 2.0
    else:
        assert "origin_passed_s" not in ctx.record


@pytest.mark.parametrize("warm", [True, False])
def test_netperfmeter_leaves_a_warm_sampler_less_lead(warm):
    """Its flows connect, then wait the lead before the origin: the sampler's start-up
    and the departure trace's fit in it; a process started ahead needs less."""
    from bufferbloat.traffic import netperfmeter
    part = object.__new__(netperfmeter.NetPerfMeterPart)
    part.start_s = 0
    part.ctx = types.SimpleNamespace(sampler_warm=warm)
    leads = []
    part.run = types.SimpleNamespace(prepare=lambda: None, runtime_s=10.0,
                                     preconnect=lambda lead: leads.append(lead) or 99.0)
    part.prepare()
    want = netperfmeter.PRECONNECT_LEAD_WARM_S if warm else netperfmeter.PRECONNECT_LEAD_S
    assert leads == [want] and part.origin_at == 99.0
    assert netperfmeter.PRECONNECT_LEAD_WARM_S < netperfmeter.PRECONNECT_LEAD_S
    assert part.run.runtime_s == 10.0 + want + netperfmeter.PRECONNECT_TIMEOUT_S
