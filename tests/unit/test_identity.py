"""A run's identity: the resolved configuration and its key (bufferbloat.run.identity)."""
import dataclasses

import pytest

from bufferbloat.core.errors import UsageError
from bufferbloat.run import identity
from bufferbloat.run.resolved import resolve_run
from bufferbloat.scenarios import catalogue

CAT = catalogue()
A4 = CAT["a4_wifi_loss"]
C1 = CAT["c1_red_vs_pie"]


def key(scn=A4, overrides=None, **kw):
    kw.setdefault("max_rate_mbit", None)
    return identity.run_key(identity.run_config(scn, overrides, **kw))


def test_the_key_is_stable_and_canonical():
    cfg = identity.run_config(A4, {"loss_pct": "1"}, max_rate_mbit=None)
    assert identity.run_key(cfg) == key(overrides={"loss_pct": "1"})
    assert len(identity.run_key(cfg)) == 64
    assert identity.short(identity.run_key(cfg)) == identity.run_key(cfg)[:12]
    # dict order, int vs integral float, float noise: one text, one key
    a = {"b": 1, "a": [0.1 + 0.2, 2.0, (3, 4)]}
    b = {"a": [0.3, 2, [3, 4]], "b": 1.0}
    assert identity.canonical_json(a) == identity.canonical_json(b)
    assert identity.run_key(a) == identity.run_key(b)
    assert identity.run_key(a) != identity.run_key(dict(b, b=2))


def test_every_input_of_the_configuration_changes_the_key():
    base = key()
    changed = {
        "profile": key(quick=True),
        "duration": key(duration_s=33),
        "topology param": key(overrides={"delay_ms": "6"}),
        "qdisc param": key(overrides={"variant": "pie", "qdisc.target_ms": "10"}),
        "variant": key(overrides={"variant": "pie"}),
        "knob": key(overrides={"web_every_s": "3"}),
        "rate cap": key(max_rate_mbit=1.0),
        "repetition": key(rep=2),
        "sample period": key(sample_period_s=0.02),
        "scenario edit": key(dataclasses.replace(A4, params=dict(A4.params,
                                                                 buffer_pkts=50))),
        "warm-up edit": key(dataclasses.replace(A4, warmup_s=A4.warmup_s + 7)),
        "traffic edit": key(dataclasses.replace(
            A4, traffic=tuple(dict(t, interval_s=0.2) if t["kind"] == "ping" else t
                              for t in A4.traffic))),
    }
    assert all(v != base for v in changed.values()), \
        [k for k, v in changed.items() if v == base]
    assert len(set(changed.values())) == len(changed)


def test_how_a_value_is_asked_for_is_not_part_of_it():
    # --time equal to the profile's own duration, a value spelled out, a variant
    # spelled out, a cap above the rate (no scaling), the description
    assert key(duration_s=A4.duration_s) == key()
    assert key(duration_s=float(A4.duration_s)) == key()
    assert key(overrides={"delay_ms": str(A4.params["delay_ms"])}) == key()
    red = C1.variants["red"]
    assert key(C1, {"variant": "red"}) == key(C1, dict(red))
    assert key(max_rate_mbit=100.0) == key()
    assert key(dataclasses.replace(A4, description="other words")) == key()


def test_config_key_is_shared_by_repetitions():
    c1 = identity.run_config(A4, rep=1, max_rate_mbit=None)
    c2 = identity.run_config(A4, rep=2, max_rate_mbit=None)
    assert identity.run_key(c1) != identity.run_key(c2)
    assert identity.config_key(c1) == identity.config_key(c2)
    assert identity.config_key(c1) != identity.config_key(
        identity.run_config(A4, quick=True, max_rate_mbit=None))


def test_the_engine_and_the_sweep_compute_the_same_configuration():
    """run_point builds with the kernel's tick rate; the key must not depend on it."""
    topo, knobs, traffic = A4.build({"variant": "pie"}, quick=True, hz=250,
                                    max_rate_mbit=1.0)
    duration, warmup = identity.durations(A4, True, None)
    engine_cfg = identity.config_of(A4, topo, knobs, traffic, True, duration, warmup,
                                    0.01, 3)
    sweep_cfg = identity.run_config(A4, {"variant": "pie"}, quick=True, rep=3,
                                    max_rate_mbit=1.0)
    assert engine_cfg == sweep_cfg
    resolved = resolve_run(A4, {"variant": "pie"}, quick=True, rep=3, max_rate_mbit=1.0)
    assert resolved.config == sweep_cfg and resolved.key == identity.run_key(sweep_cfg)
    assert resolved.config_key == identity.config_key(sweep_cfg)
    assert engine_cfg["scaling"]["max_rate_mbit"] == 1.0
    assert engine_cfg["profile"] == "quick" and engine_cfg["rep"] == 3


def test_rate_cap_comes_from_the_environment_by_default(monkeypatch):
    monkeypatch.delenv("BUFFERBLOAT_GUEST_ACCEL", raising=False)
    monkeypatch.setenv("BUFFERBLOAT_MAX_MBIT", "1")
    capped = identity.run_config(A4)
    assert capped["scaling"] == {"factor": pytest.approx(1 / 1.5), "max_rate_mbit": 1}
    monkeypatch.setenv("BUFFERBLOAT_MAX_MBIT", "0")
    assert identity.run_config(A4)["scaling"] is None


def test_durations_and_bad_input():
    assert identity.durations(C1, False, None) == (120, 60)
    assert identity.durations(C1, True, None) == (30, 15)    # the study's share
    with pytest.raises(UsageError):
        identity.durations(C1, False, 0.5)
    with pytest.raises(UsageError):
        identity.run_config(A4, {"loss_pct": "150"}, max_rate_mbit=None)


def test_setting_of_a_record():
    cfg = identity.run_config(A4, quick=True, max_rate_mbit=1.0)
    rec = dict(identity.record_fields(cfg))
    s = identity.setting(rec)
    assert s == ("quick", A4.quick_duration_s, pytest.approx(1 / 1.5))
    assert identity.setting_label(s) == \
        f"quick profile, {A4.quick_duration_s:g} s, rates scaled x0.667"
    # an older record: its top-level fields
    assert identity.setting({"profile": "full", "duration_s": 60.0}) == ("full", 60, None)
    assert identity.setting_label(("full", 60, None)) == "full profile, 60 s"


def test_a_new_optional_parameter_keeps_every_recorded_key(monkeypatch):
    """Adding a topology parameter whose default is None (unset) must not change the key
    of any run recorded before it (identity version 2 leaves unset parameters out;
    version 1 wrote them, and adding reverse_qdisc re-ran every recorded point)."""
    from bufferbloat.core.params import Param
    from bufferbloat.net import topology
    from bufferbloat.run import identity as ident
    from bufferbloat.scenarios import catalogue
    scn = catalogue()["a1_fifo"]
    before = ident.run_key(ident.run_config(scn, {}, quick=True, max_rate_mbit=None))
    extra = Param("some_future_knob", float, None, "a parameter added later", lo=0, hi=1)
    monkeypatch.setattr(topology.DumbbellTopo, "PARAMS",
                        topology.DumbbellTopo.PARAMS + (extra,))
    after = ident.run_key(ident.run_config(scn, {}, quick=True, max_rate_mbit=None))
    assert after == before
    set_it = ident.run_key(ident.run_config(scn, {"some_future_knob": 0.5}, quick=True,
                                            max_rate_mbit=None))
    assert set_it != before


def test_a_resolved_runs_tick_warnings_never_check_its_values_again():
    """The engine asks a resolved run what its qdisc's values become at the kernel's
    tick rate; that must not re-run the checks of what was given (a FIFO given a byte
    limit by the scenario once failed 'give limit_pkts or limit_bytes, not both' there,
    in the VM gate), nor change the run."""
    c1 = catalogue()["c1_red_vs_pie"]
    run = resolve_run(c1, {"qdisc": "fifo", "flows": "60"}, quick=True, max_rate_mbit=None)
    before = dict(run.topo.qdisc.params)
    assert run.warnings(250) == list(run.topo.qdisc.warnings)
    assert run.topo.qdisc.params == before
    b1 = catalogue()["b1_pie_tupdate"]
    pie = resolve_run(b1, {"qdisc.tupdate_ms": "30"}, quick=True, max_rate_mbit=None)
    assert any("30 ms becomes 32 ms" in w for w in pie.warnings(250))
    assert not any("becomes" in w for w in pie.warnings(None))
