"""The one retry and accounting module (tests/retries.py): the gate measures a band once
and records its misses; the acceptance tier judges it by the sequential rule; degraded
runs are counted by family in one ledger and judged by a binomial test in acceptance."""
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from bufferbloat.results.records_writer import RunWriter
from tests import record, retries


@pytest.fixture(autouse=True)
def _made_up_entries_dropped(request):
    with record.kept_apart(request.node.nodeid):
        yield

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(TESTS)


def _measure(outcomes):
    """A measurement whose attempts miss (False) or meet (True) in the given order."""
    it = iter(outcomes)
    calls = []

    def measure():
        calls.append(1)
        return next(it)
    return measure, (lambda ok: [] if ok else ["missed"]), calls


@pytest.fixture
def acceptance(monkeypatch):
    monkeypatch.setenv(retries.TIER_ENV, "acceptance")


@pytest.fixture
def gate(monkeypatch):
    monkeypatch.delenv(retries.TIER_ENV, raising=False)


@pytest.mark.parametrize("outcomes, verdict", [
    ([True], "pass"), ([False], "more"), ([False, True], "more"),
    ([False, True, True], "pass"), ([False, False], "fail"), ([False, True, False], "fail")])
def test_the_sequential_rule(outcomes, verdict):
    assert retries.sequential_verdict(outcomes) == verdict


def test_false_fail_rate_is_about_twice_p_squared():
    assert retries.false_fail_rate(0.02) == pytest.approx(0.02 * (1 - 0.98 ** 2))
    assert retries.false_fail_rate(0.022) < 1e-3 < retries.false_fail_rate(0.03)


def test_acceptance_passes_at_once_or_after_two_confirmations(acceptance):
    m, miss, calls = _measure([True])
    assert retries.measure_until_met(m, miss, "x", log=lambda _: None) == (True, [])
    assert len(calls) == 1
    m, miss, calls = _measure([False, True, True])
    said = []
    got, misses = retries.measure_until_met(m, miss, "x", log=said.append)
    assert got is True and misses == [["missed"]] and len(calls) == 3
    assert said == ["x: attempt 1 MISSED: missed", "x: bounds met (3 attempts, 1 missed)"]


@pytest.mark.parametrize("outcomes", [[False, False, True], [False, True, False]])
def test_acceptance_fails_a_second_miss_within_the_confirmations(acceptance, outcomes):
    m, miss, calls = _measure(outcomes)
    with pytest.raises(AssertionError, match="sequential rule"):
        retries.measure_until_met(m, miss, "x", log=lambda _: None)
    assert len(calls) == 2 if outcomes[1] is False else len(calls) == 3


def test_the_gate_measures_once_and_records_the_miss_unjudged(gate):
    here = retries.current_test()
    record.begin(here)
    m, miss, calls = _measure([False, True])
    said = []
    got, misses = retries.measure_until_met(m, miss, "x", log=said.append)
    assert got is False and misses == [["missed"]] and len(calls) == 1
    assert "not judged in the gate" in said[-1]
    band = record.entry(here)["bands"][-1]
    assert band == {"label": "x", "attempts": 1, "met": [False], "misses": [["missed"]],
                    "judged": False}


def test_a_bug_asserted_inside_misses_of_fails_the_gate_too(gate):
    def misses_of(_):
        raise AssertionError("a lost event")
    with pytest.raises(AssertionError, match="lost event"):
        retries.measure_until_met(lambda: 1, misses_of, "x", log=lambda _: None)


def test_an_unknown_tier_is_refused(monkeypatch):
    monkeypatch.setenv(retries.TIER_ENV, "gates")
    with pytest.raises(ValueError, match="gate, acceptance"):
        retries.tier()


def test_there_is_one_module_and_one_counter():
    """Loaded as plain ``retries`` (tests/ on sys.path) the module refuses: a second copy
    would count degraded runs in a SESSION nothing reports. Every test imports it as
    tests.retries."""
    sys.path.insert(0, TESTS)
    try:
        with pytest.raises(ImportError, match="import it as tests.retries"):
            importlib.import_module("retries")
    finally:
        sys.path.remove(TESTS)
        sys.modules.pop("retries", None)
    assert sys.modules["tests.retries"].SESSION is retries.SESSION
    plain = []
    for dirpath, _dirs, files in os.walk(TESTS):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(dirpath, name)) as f:
                    if re.search(r"^\s*(from retries import|import retries\b)", f.read(),
                                 re.M):
                        plain.append(name)
    assert plain == []


@pytest.mark.parametrize("name, family", [
    ("a1_fifo", "a"), ("/tmp/x/e1_aqm_kflows/20261128-1", "e"),
    ("tests/vm/test_families_vm.py::test_c_quick_points", "c"), ("rrul", "other")])
def test_family_of(name, family):
    assert retries.family_of(name) == family


def test_binomial_tail():
    assert retries.binomial_tail(0, 10, 0.1) == pytest.approx(1.0)
    assert retries.binomial_tail(1, 1, 0.25) == pytest.approx(0.25)
    assert retries.binomial_tail(2, 3, 0.5) == pytest.approx(0.5)


def test_the_ledger_judges_degraded_counts_by_family_in_acceptance(acceptance):
    led = retries.DegradedLedger()
    led.note("t_e", [("r/e1_aqm/x", ["work conservation 0.90"])], runs=2, family="e")
    led.note("t_a", [], runs=10, family="a")
    assert led.by_family()["e"][:2] == (1, 2) and led.failing() == []
    assert retries.DEGRADED_RATE["a"] <= 0.1
    for i in range(10):    # 10 of 20 A runs degraded at a rate of 0.1: P ~ 7e-6
        led.note("t_a", [(f"r/a1_fifo/{i}", [])], runs=1, family="a")
    assert led.failing() == ["a"]
    assert any("family a: 10 degraded of 20 runs" in line and "FAILS" in line
               for line in led.report())

    class Session:
        exitstatus = 0
    s = Session()
    led.finish(s)
    assert s.exitstatus == 1


def test_the_gate_reports_degraded_counts_and_never_fails_on_them(gate):
    led = retries.DegradedLedger()
    for i in range(5):
        led.note("t_a", [(f"r/a1_fifo/{i}", ["sampler missed"])], runs=2, family="a")
    assert led.failing() == []

    class Session:
        exitstatus = 0
    s = Session()
    led.finish(s)
    assert s.exitstatus == 0
    assert "sampler missed" in led.report()[-1]


def _run_dir(path, verdict, problems=()):
    w = RunWriter(path)
    w.record["health"] = {"verdict": verdict, "problems": list(problems), "checks": {}}
    w.close("ok")
    return str(path)


def test_run_until_healthy_counted_notes_each_run_and_its_reasons(tmp_path):
    verdicts = iter(["degraded", "healthy", "degraded", "degraded", "degraded"])
    n = iter(range(10))

    def once():
        return _run_dir(tmp_path / f"a1_fifo-{next(n)}", next(verdicts), ["late start"])
    led = retries.DegradedLedger()
    said = []
    run_dir, aside = retries.run_until_healthy_counted(once, 1, log=said.append, ledger=led)
    assert run_dir.endswith("a1_fifo-1") and aside == [str(tmp_path / "a1_fifo-0")]
    assert led.reruns[0][1:] == ("a", str(tmp_path / "a1_fifo-0"), ["late start"])
    assert led.runs == {"a": 2}
    # asked for 5 reruns: at most DEGRADED_RERUNS (2) are made
    run_dir, aside = retries.run_until_healthy_counted(once, 5, log=said.append, ledger=led)
    assert len(aside) == 2 and led.runs == {"a": 5}


@pytest.mark.parametrize("tier_name, rc", [("gate", 0), ("acceptance", 1)])
def test_a_session_over_its_degraded_rate_fails_only_in_acceptance(tmp_path, tier_name, rc):
    """A pytest session with tests/conftest.py's hooks whose one test passes but noted
    five degraded reruns of six A runs: the gate reports them, acceptance fails; the
    record names the test's degraded runs."""
    (tmp_path / "conftest.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {ROOT!r})
        from tests.conftest import (pytest_configure, pytest_runtest_logstart,
            pytest_runtest_logreport, pytest_terminal_summary, pytest_sessionfinish,
            pytest_collection_modifyitems)
        """))
    marks = ["@pytest.mark.acceptance", ""]
    mark, other = marks if tier_name == "acceptance" else marks[::-1]
    (tmp_path / "test_x.py").write_text(textwrap.dedent(f"""
        import pytest
        from tests.retries import SESSION, current_test
        {mark}
        def test_passes():
            SESSION.note(current_test(), [(f"a1_fifo/{{i}}", ["slow"]) for i in range(5)],
                         runs=6, family="a")
        {other}
        def test_other_tier():
            pass
        """))
    rec = tmp_path / "record.json"
    env = dict(os.environ, BUFFERBLOAT_TEST_TIER=tier_name, BUFFERBLOAT_TEST_RECORD=str(rec),
               PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(tmp_path)], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == rc, proc.stdout + proc.stderr
    assert "1 passed, 1 deselected" in proc.stdout      # the other tier's test
    assert "family a: 5 degraded of 6 runs" in proc.stdout
    assert ("FAILS" in proc.stdout) == bool(rc)
    import json  # noqa: PLC0415
    data = json.loads(rec.read_text())
    assert data["tier"] == tier_name and data["seed"] > 0
    t = next(v for k, v in data["tests"].items() if k.endswith("test_passes"))
    assert t["outcome"] == "passed" and len(t["degraded"]) == 5


def _body(outcomes):
    """A test body whose attempts fail an assert (False) or pass (True) in order."""
    it = iter(outcomes)
    calls = []

    def body():
        calls.append(1)
        assert next(it), f"band missed at call {len(calls)}"
    return body, calls


@pytest.mark.parametrize("outcomes, calls, passes", [
    ([True], 1, True), ([False, True, True], 3, True), ([False, False], 2, False),
    ([False, True, False], 3, False)])
def test_a_whole_test_is_judged_by_the_sequential_rule(outcomes, calls, passes):
    record.begin("whole")
    body, made = _body(outcomes)
    resets = []
    if passes:
        retries.judge_test(body, lambda: resets.append(1), "whole", log=lambda _: None)
    else:
        with pytest.raises(AssertionError, match="sequential rule") as e:
            retries.judge_test(body, lambda: resets.append(1), "whole", log=lambda _: None)
        assert "band missed at call" in str(e.value.__cause__)
    assert len(made) == calls and len(resets) == calls - 1   # fresh runs for each retry
    if calls > 1:
        band = record.entry("whole")["bands"][-1]
        assert band["met"] == outcomes[:calls] and band["judged"] is True


def test_a_miss_before_a_run_that_stayed_degraded_is_kept(acceptance):
    """An attempt missed, the next one's run stayed degraded through its reruns: the
    test is not judged, and the miss is recorded (not judged) for the calibration."""
    record.begin("miss-then-degraded")
    calls = []

    def body():
        calls.append(1)
        if len(calls) == 1:
            raise AssertionError("band missed at call 1")
        raise retries.NotJudged("run: degraded after 2 reruns")
    with pytest.raises(retries.NotJudged):
        retries.judge_test(body, lambda: None, "whole", log=lambda _: None)
    band = record.entry("miss-then-degraded")["bands"][-1]
    assert band == {"label": "whole", "attempts": 1, "met": [False],
                    "misses": [["band missed at call 1"]], "judged": False}
    record.begin("degraded-at-once")
    with pytest.raises(retries.NotJudged):
        retries.judge_test(lambda: (_ for _ in ()).throw(retries.NotJudged("x")),
                           lambda: None, "whole", log=lambda _: None)
    assert record.entry("degraded-at-once")["bands"] == []


def test_a_whole_test_that_judged_its_own_bands_or_erred_is_not_retried(acceptance):
    record.begin("own")
    calls = []

    def body():
        calls.append(1)
        retries.measure_until_met(lambda: 0, lambda _: ["missed"] if len(calls) else [],
                                  "inner", log=lambda _: None)
    with pytest.raises(retries.BandFailed, match="inner"):
        retries.judge_test(body, lambda: None, "own", log=lambda _: None)
    assert len(calls) == 1          # the inner rule already took its three attempts

    def broken():
        calls.append(1)
        raise KeyError("not a band")
    with pytest.raises(KeyError):
        retries.judge_test(broken, lambda: None, "own", log=lambda _: None)
    assert len(calls) == 2


def test_a_plain_band_missed_after_the_tests_own_band_was_met_is_judged_by_the_rule(
        acceptance):
    """A test measures one band itself (measure_until_met, met at once) and then misses
    a plain band: that miss goes through the sequential rule like any other, each
    attempt running the whole test (its own band judged anew). A test whose own band
    failed (BandFailed) is not attempted again."""
    record.begin("own-then-plain")
    plain = iter([False, True, True])
    inner = []

    def body():
        retries.measure_until_met(lambda: inner.append(1), lambda _: [], "inner",
                                  log=lambda _: None)
        assert next(plain), "plain band missed"
    retries.judge_test(body, lambda: None, "whole", log=lambda _: None)
    assert len(inner) == 3
    band = record.entry("own-then-plain")["bands"][-1]
    assert band["label"] == "whole" and band["met"] == [False, True, True]
    plain = iter([False, False])
    with pytest.raises(AssertionError, match="sequential rule") as e:
        retries.judge_test(body, lambda: None, "whole", log=lambda _: None)
    assert not isinstance(e.value, retries.BandFailed) and len(inner) == 5
    # a plain miss, then the test's own band fails: both attempts are in the record
    record.begin("plain-then-own")
    calls = []

    def body2():
        calls.append(1)
        retries.measure_until_met(lambda: 0, lambda _: ["inner missed"] if len(calls) > 1
                                  else [], "inner", log=lambda _: None)
        assert False, "plain band missed"
    with pytest.raises(retries.BandFailed):
        retries.judge_test(body2, lambda: None, "whole", log=lambda _: None)
    band = [b for b in record.entry("plain-then-own")["bands"] if b["label"] == "whole"][-1]
    assert band["met"] == [False, False] and band["judged"] is True
    assert "plain band missed" in band["misses"][0][0] and "inner" in band["misses"][1][0]


def test_the_acceptance_tier_retries_a_plain_assert_and_the_gate_does_not(tmp_path):
    """Through tests/conftest.py's hook, in a pytest session: an acceptance test whose
    assert fails at its first call and passes at the next two passes (its module's
    reset_for_retry called between); one that fails twice fails."""
    (tmp_path / "conftest.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {ROOT!r})
        from tests.conftest import (pytest_configure, pytest_runtest_logstart,
            pytest_runtest_logreport, pytest_terminal_summary, pytest_sessionfinish,
            pytest_collection_modifyitems, pytest_pyfunc_call)
        """))
    (tmp_path / "test_y.py").write_text(textwrap.dedent("""
        import pytest
        pytestmark = pytest.mark.acceptance
        CALLS = {"flaky": 0, "broken": 0}
        RESETS = []

        def reset_for_retry():
            RESETS.append(1)

        def test_flaky(tmp_path):
            CALLS["flaky"] += 1
            assert CALLS["flaky"] > 1, "first attempt misses"

        def test_broken():
            CALLS["broken"] += 1
            assert False, "always misses"

        def test_zz_counts():
            assert CALLS == {"flaky": 3, "broken": 2} and len(RESETS) == 3
        """))
    env = dict(os.environ, BUFFERBLOAT_TEST_TIER="acceptance", PYTHONPATH=ROOT,
               BUFFERBLOAT_TEST_RECORD=str(tmp_path / "rec.json"))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(tmp_path)], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=120)
    assert "1 failed, 2 passed" in proc.stdout, proc.stdout + proc.stderr
    assert "test_broken" in proc.stdout and "sequential rule" in proc.stdout


def test_runs_degraded_through_their_reruns_are_counted_and_not_judged(tmp_path):
    """The last attempt degraded too: the ledger counts all three degraded attempts (the
    family's binomial test sees every one), and require_healthy says "not judged"
    (NotJudged) instead of failing the test; a failed run's verdict still fails it."""
    n = iter(range(10))

    def once():
        return _run_dir(tmp_path / f"b1_pie_tupdate-{next(n)}", "degraded",
                        ["the sampler missed 115 of 2147 ticks"])
    led = retries.DegradedLedger()
    said = []
    run_dir, aside = retries.run_until_healthy_counted(once, 2, log=said.append, ledger=led)
    assert len(aside) == 2 and run_dir.endswith("b1_pie_tupdate-2")
    assert [r[2] for r in led.reruns] == aside + [run_dir]
    assert led.runs == {"b": 3} and led.by_family()["b"][:2] == (3, 3)
    assert any("not judged" in line for line in said)
    health = {"verdict": "degraded", "problems": ["the sampler missed 115 of 2147 ticks"]}
    with pytest.raises(retries.NotJudged, match="degraded after 2 reruns: the sampler"):
        retries.require_healthy(health, "b1_pie_tupdate")
    retries.require_healthy({"verdict": "healthy"}, "b1_pie_tupdate")
    with pytest.raises(AssertionError):
        retries.require_healthy({"verdict": "failed"}, "b1_pie_tupdate")


@pytest.mark.parametrize("tier_name", ["gate", "acceptance"])
def test_a_test_not_judged_is_skipped_with_its_reason_and_recorded(tmp_path, tier_name):
    """Through tests/conftest.py's hook: a test (acceptance-marked or not) that raises
    NotJudged is reported skipped, "not judged: ..." in its reason and in the record;
    it is attempted once, not retried by the sequential rule."""
    (tmp_path / "conftest.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {ROOT!r})
        from tests.conftest import (pytest_configure, pytest_runtest_logstart,
            pytest_runtest_logreport, pytest_terminal_summary, pytest_sessionfinish,
            pytest_collection_modifyitems, pytest_pyfunc_call)
        """))
    (tmp_path / "test_z.py").write_text(textwrap.dedent("""
        import pytest
        from tests.retries import NotJudged
        CALLS = []

        @pytest.mark.bands
        def test_degraded_plain():
            CALLS.append(1)
            raise NotJudged("b1 {}: degraded after 2 reruns: late starts")

        @pytest.mark.acceptance
        @pytest.mark.bands
        def test_degraded_judged():
            CALLS.append(2)
            raise NotJudged("b2 {}: degraded after 2 reruns: missed ticks")

        @pytest.mark.bands
        def test_zz_counts():
            assert CALLS == [1, 2]
        """))
    rec = tmp_path / "rec.json"
    env = dict(os.environ, BUFFERBLOAT_TEST_TIER=tier_name, PYTHONPATH=ROOT,
               BUFFERBLOAT_TEST_RECORD=str(rec))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p",
                           "no:cacheprovider", str(tmp_path)], capture_output=True,
                          text=True, cwd=tmp_path, env=env, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "1 passed, 2 skipped" in out, out
    assert "not judged: b1 {}: degraded after 2 reruns: late starts" in out
    assert "not judged (degraded through its reruns)" in out
    tests = json.loads(rec.read_text())["tests"]
    judged = {k.split("::")[-1]: v for k, v in tests.items()}
    assert judged["test_degraded_judged"]["outcome"] == "skipped"
    assert "missed ticks" in judged["test_degraded_judged"]["not_judged"]


def test_a_value_on_a_bound_computed_in_floating_point_is_within():
    """E FIFO's attempt of 2026-11-29: p50 6.056 ms (10 packets of 0.6056 ms) against
    0.4 x 15.14 = 6.056000000000001: on the bound, within; a packet less is not."""
    assert 0.4 * (100 * 1514 * 8 / 80e3) > 6.056
    assert retries.within(6.056, 0.4 * (100 * 1514 * 8 / 80e3), 15.7456)
    assert not retries.within(6.056 - 0.6056, 0.4 * (100 * 1514 * 8 / 80e3))
    assert retries.within(1.0, hi=1.0 - 1e-12) and not retries.within(1.0, hi=0.999999)
    assert not retries.within(None, 0, 1)


def test_a_missed_bands_runs_are_kept_whole_under_scratch(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    (runs / "a1_fifo" / "run-1" / "series").mkdir(parents=True)
    (runs / "a1_fifo" / "run-1" / "series" / "qdisc.csv").write_text("t,qlen_pkts\n0,3\n")
    monkeypatch.setattr(retries, "MISSED_RUNS", str(tmp_path / "band-misses"))
    dest = retries.keep_missed_runs(str(runs), "reuse")
    assert os.path.dirname(dest) == str(tmp_path / "band-misses")
    assert os.path.basename(dest).startswith("reuse-")
    with open(os.path.join(dest, "a1_fifo", "run-1", "series", "qdisc.csv")) as f:
        assert f.read() == "t,qlen_pkts\n0,3\n"
    # the copy is apart from its source, which a tmp_path prunes
    shutil.rmtree(runs)
    assert os.path.isfile(os.path.join(dest, "a1_fifo", "run-1", "series", "qdisc.csv"))
    # and the default is the checkout's .scratch, which the VM shares as /bb
    monkeypatch.undo()
    assert retries.MISSED_RUNS == os.path.join(ROOT, ".scratch", "band-misses")
