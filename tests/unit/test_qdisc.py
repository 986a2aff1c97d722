"""The qdisc registry: defaults, validation of every parameter, tc arguments."""
import pytest

from bufferbloat.core.errors import ParameterError, UsageError
from bufferbloat.net.qdiscs import KINDS, make_qdisc, with_buffer


def test_every_kind_builds_with_defaults_and_emits_its_tc_kind():
    for kind in KINDS:
        spec = make_qdisc(kind)
        args = spec.tc_args(rate_mbit=10)
        assert args[0] == spec.tc_kind
        assert spec.module.startswith("sch_")


def test_pie_arguments_carry_every_parameter():
    spec = make_qdisc("pie", limit_pkts=1000, target_ms=20, tupdate_ms=30, alpha=2,
                      beta=20, ecn=True, bytemode=False, dq_rate_estimator=True)
    assert spec.tc_args(1.5) == ["pie", "limit", "1000", "target", "20ms", "tupdate", "30ms",
                                 "alpha", "2", "beta", "20", "ecn", "nobytemode",
                                 "dq_rate_estimator"]


def test_pie_tupdate_rounding_is_reported_for_hz_250():
    spec = make_qdisc("pie", tupdate_ms=30, hz=250)
    assert any("32 ms" in w for w in spec.warnings)
    assert make_qdisc("pie", tupdate_ms=32, hz=250).warnings == []
    assert any("4 ms" in w for w in make_qdisc("pie", tupdate_ms=1, hz=250).warnings)


def test_fifo_packets_or_bytes():
    assert make_qdisc("fifo", limit_pkts=20).tc_args(1) == ["pfifo", "limit", "20"]
    spec = make_qdisc("fifo", limit_bytes=50000)
    assert spec.tc_args(1) == ["bfifo", "limit", "50000"]
    assert spec.tc_kind == "bfifo"
    with pytest.raises(UsageError):
        make_qdisc("fifo", limit_pkts=20, limit_bytes=50000)


def test_red_arguments_and_derived_burst():
    spec = make_qdisc("red", limit_bytes=50000, min_bytes=4000, max_bytes=12000,
                      probability=0.02, avpkt_bytes=536, ecn=True)
    args = spec.tc_args(10)
    assert args[:9] == ["red", "limit", "50000", "min", "4000", "max", "12000", "avpkt", "536"]
    assert args[args.index("burst") + 1] == str(-(-(2 * 4000 + 12000) // (3 * 536)))
    assert args[args.index("bandwidth") + 1] == "10000000bit"
    assert "ecn" in args


@pytest.mark.parametrize("kind,values,param", [
    ("pie", {"target_ms": 0}, "target_ms"),
    ("pie", {"target_ms": -5}, "target_ms"),
    ("pie", {"tupdate_ms": "fast"}, "tupdate_ms"),
    ("pie", {"alpha": 33}, "alpha"),
    ("pie", {"beta": 1.5}, "beta"),
    ("pie", {"ecn": "maybe"}, "ecn"),
    ("pie", {"limit_pkts": 0}, "limit_pkts"),
    ("fifo", {"limit_pkts": -1}, "limit_pkts"),
    ("fifo", {"limit_bytes": 100}, "limit_bytes"),
    ("red", {"probability": 1.5}, "probability"),
    ("red", {"probability": 0}, "probability"),
    ("red", {"min_bytes": 20000, "max_bytes": 10000}, "max_bytes"),
    ("red", {"avpkt_bytes": 20000}, "avpkt_bytes"),
    ("codel", {"interval_ms": float("nan")}, "interval_ms"),
    ("codel", {"target_ms": True}, "target_ms"),
    ("fq_codel", {"flows": 0}, "flows"),
    ("fq_codel", {"quantum_bytes": 10}, "quantum_bytes"),
])
def test_bad_values_name_the_parameter(kind, values, param):
    with pytest.raises(ParameterError) as err:
        make_qdisc(kind, **values)
    assert param in str(err.value)
    assert "allowed" in str(err.value)


def test_unknown_kind_and_parameter_list_what_is_valid():
    with pytest.raises(UsageError) as err:
        make_qdisc("sfq")
    for kind in KINDS:
        assert kind in str(err.value)
    with pytest.raises(UsageError) as err:
        make_qdisc("pie", targt_ms=20)
    assert "targt_ms" in str(err.value) and "target_ms" in str(err.value)


def test_strings_from_the_command_line_are_coerced():
    spec = make_qdisc("pie", target_ms="20", ecn="true", limit_pkts="1000")
    assert spec.params["target_ms"] == 20.0 and spec.params["ecn"] is True
    assert spec.params["limit_pkts"] == 1000


def test_buffer_units_are_never_converted_silently():
    assert with_buffer("pie", buffer_pkts=100) == {"limit_pkts": 100}
    assert with_buffer("red", buffer_bytes=50000) == {"limit_bytes": 50000}
    assert with_buffer("fifo", buffer_bytes=50000) == {"limit_bytes": 50000}
    with pytest.raises(UsageError, match="bytes"):
        with_buffer("red", buffer_pkts=100)
    with pytest.raises(UsageError, match="packets"):
        with_buffer("pie", buffer_bytes=50000)
    # an explicit qdisc limit wins over the topology-level buffer
    assert with_buffer("pie", buffer_pkts=100, limit_pkts=1000) == {"limit_pkts": 1000}


def test_run_prints_the_tick_rounding_before_anything_is_built(monkeypatch):
    """`run` says it when PIE's tupdate is below or not a multiple of the kernel's tick
    (HZ=250: 4 ms): 1 ms becomes 4 ms, 30 ms 32 ms; 60 ms is 15 ticks, nothing said."""
    from bufferbloat.net.capabilities import Capabilities
    from bufferbloat.run import engine
    from bufferbloat.run.resolved import resolve_run
    from bufferbloat.scenarios import catalogue

    class Built(Exception):
        pass

    class NoNetwork:
        def __init__(self, *a, **k):
            raise Built()

    monkeypatch.setattr(engine, "probe", lambda: Capabilities([], "test", 250))
    monkeypatch.setattr(engine, "Network", NoNetwork)
    scn = catalogue()["b1_pie_tupdate"]
    for tupdate, said in ((1, "pie tupdate 1 ms becomes 4 ms"),
                          (30, "pie tupdate 30 ms becomes 32 ms"), (60, None)):
        lines = []
        with pytest.raises(Built):
            engine.prepare(resolve_run(scn, {"qdisc.tupdate_ms": tupdate}, quick=True,
                                       duration_s=10), "/tmp", lines.append)
        warnings = [x for x in lines if "warning" in x]
        if said:
            assert len(warnings) == 1 and said in warnings[0] and "HZ=250" in warnings[0]
        else:
            assert warnings == []


def test_the_record_says_what_the_tick_made_of_tupdate(monkeypatch, tmp_path):
    """result.json's ``qdisc.warnings`` holds what `run` printed (the acceptance test of
    B.1 reads it there): 1 ms at HZ=250 becomes 4 ms; 60 ms, nothing."""
    from bufferbloat.net.capabilities import Capabilities
    from bufferbloat.run import engine
    from bufferbloat.run.resolved import resolve_run
    from bufferbloat.scenarios import catalogue

    class NoNetwork:
        def __init__(self, *a, **k):
            pass

        def check(self):
            pass

    caps = Capabilities([], "test", 250)
    monkeypatch.setattr(caps, "require", lambda needs: None)
    monkeypatch.setattr(engine, "probe", lambda: caps)
    monkeypatch.setattr(engine, "Network", NoNetwork)
    monkeypatch.setattr(engine, "machine_record", lambda caps: {})
    monkeypatch.setattr(engine, "tool_versions", lambda: {})
    scn = catalogue()["b1_pie_tupdate"]
    for tupdate, said in ((1, "pie tupdate 1 ms becomes 4 ms"), (60, None)):
        ctx = engine.prepare(resolve_run(scn, {"qdisc.tupdate_ms": tupdate}, quick=True,
                                         duration_s=10), str(tmp_path), lambda _: None)
        engine._record_setting(ctx)
        got = ctx.record["qdisc"]["warnings"]
        assert got[0].startswith(said) if said else got == [], got
        assert ctx.record["qdisc"]["params"]["tupdate_ms"] == tupdate
