"""Intervals, the stopping rule, the comparison and the steady-state rule, each against
its theory with a stated tolerance (bufferbloat/core/uncertainty.py, steady.py).

Student's t quantiles are checked against printed tables (Fisher and Yates; any
statistics text), Welch's test against a worked example computed by hand below, and the
intervals' coverage by simulation with a fixed seed: over 1,000 simulated sweeps a 95 %
interval covers the true mean 93-97 % of the time (the binomial spread of 1,000 draws
at 0.95 is +-0.7 %: the band is three of them).
"""

import math
import random

import pytest

from bufferbloat.core import steady
from bufferbloat.core import uncertainty as u

#: t(0.975, df) from the printed tables, 3 decimals
T_TABLE = {1: 12.706, 2: 4.303, 4: 2.776, 5: 2.571, 10: 2.228, 30: 2.042, 120: 1.980}


@pytest.mark.parametrize("df,value", sorted(T_TABLE.items()))
def test_t_quantiles_match_the_tables(df, value):
    assert u.t_quantile(0.975, df) == pytest.approx(value, abs=6e-4)
    assert u.t_quantile(0.025, df) == pytest.approx(-value, abs=6e-4)
    assert u.t_cdf(u.t_quantile(0.9, df), df) == pytest.approx(0.9, abs=1e-9)


def test_welch_by_hand():
    a, b = [1.0, 2.1, 2.9, 4.2, 5.0], [2.5, 3.1, 4.8, 5.2, 6.9, 7.1]
    ma, mb = sum(a) / 5, sum(b) / 6
    va = sum((x - ma) ** 2 for x in a) / 4 / 5
    vb = sum((x - mb) ** 2 for x in b) / 5 / 6
    t = (ma - mb) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / 4 + vb ** 2 / 5)
    got_t, got_df, p = u.welch(a, b)
    assert got_t == pytest.approx(t, rel=1e-12) and got_df == pytest.approx(df, rel=1e-12)
    assert p == pytest.approx(2 * u.t_cdf(-abs(t), df), rel=1e-12)
    assert 0.10 < p < 0.11                    # t = -1.80 on 9.0 df


def _sweep(rng, mean, sd, precision, min_reps, max_reps):
    xs = []
    while True:
        xs.append(rng.gauss(mean, sd))
        stop, why = u.stop_repeating(xs, precision, min_reps, max_reps)
        if stop:
            return xs, why


@pytest.mark.parametrize("precision,max_reps", [(10, 40), (5, 100)])
def test_the_stopping_rule_covers_the_true_mean_and_never_passes_max_reps(precision,
                                                                         max_reps):
    rng, covered, whys = random.Random(20261128), 0, []
    for _ in range(1000):
        xs, why = _sweep(rng, 10.0, 1.0, precision, min_reps=5, max_reps=max_reps)
        assert 5 <= len(xs) <= max_reps
        ci = u.stein_interval(xs, 5)
        covered += ci["ci_low"] <= 10.0 <= ci["ci_high"]
        whys.append(why)
        if why == "precise":
            assert ci["half_width"] <= abs(ci["mean"]) * precision / 100
    assert 0.93 <= covered / 1000 <= 0.97
    assert whys.count("precise") > 900          # max_reps is enough here


def test_a_fixed_number_of_runs_covers_as_students_t_says():
    rng, covered = random.Random(7), 0
    for _ in range(1000):
        ci = u.mean_interval([rng.gauss(3.0, 2.0) for _ in range(5)])
        covered += ci["ci_low"] <= 3.0 <= ci["ci_high"]
    assert 0.93 <= covered / 1000 <= 0.97
    assert u.mean_interval([4.0])["ci_low"] is None       # one run: no interval


def test_the_median_interval_holds_for_a_skewed_distribution():
    rng, covered = random.Random(3), 0
    for _ in range(1000):
        ci = u.order_interval([rng.expovariate(1.0) for _ in range(12)])
        assert ci["coverage"] >= 0.95
        covered += ci["ci_low"] <= math.log(2) <= ci["ci_high"]
    assert covered / 1000 >= 0.93          # order statistics: at least their coverage
    assert u.order_interval([1, 2, 3])["ci_low"] is None   # too few for 95 %


def test_max_reps_stops_a_point_that_cannot_get_precise():
    rng = random.Random(1)
    xs, why = _sweep(rng, 1.0, 5.0, 1, min_reps=3, max_reps=7)
    assert len(xs) == 7 and why == "max-reps"


def test_decide_says_differs_does_not_differ_or_unresolved():
    rng = random.Random(5)
    a = [rng.gauss(20.0, 1.0) for _ in range(10)]
    far = [rng.gauss(25.0, 1.0) for _ in range(10)]
    assert u.decide(a, far)["verdict"] == "differs"
    same = [rng.gauss(20.0, 0.1) for _ in range(30)]
    tight = [rng.gauss(20.0, 0.1) for _ in range(30)]
    assert u.decide(same, tight, margin=0.05)["verdict"] == "does not differ"
    few = u.decide(a[:3], [x + 0.5 for x in a[:3]][::-1])
    assert few["verdict"] == "unresolved" and few["more_runs"] >= 1


def test_decide_keeps_its_error_rate_over_many_comparisons():
    """Two identical configurations: 'differs' at most alpha of the time (Welch at 0.05,
    1,000 pairs of 5 runs: at most 0.05 + 3 binomial sd = 0.071); Bonferroni over 4
    comparisons divides it by about 4."""
    rng = random.Random(11)
    one = four = 0
    for _ in range(1000):
        a = [rng.gauss(10, 1) for _ in range(5)]
        b = [rng.gauss(10, 1) for _ in range(5)]
        one += u.decide(a, b)["verdict"] == "differs"
        four += u.decide(a, b, comparisons=4)["verdict"] == "differs"
    assert one / 1000 <= 0.071
    assert four / 1000 <= 0.025


def test_mser_finds_where_a_step_settles_and_says_when_nothing_settles():
    rng = random.Random(2)
    # 10 s at 100 ms: 3 s of a transient at 50 then 7 s of noise around 10
    series = [50.0 + rng.gauss(0, 1) for _ in range(30)] + \
        [10.0 + rng.gauss(0, 1) for _ in range(70)]
    res = steady.mser(series)
    assert res["settled"] and 25 <= res["cut"] <= 35
    assert res["mean"] == pytest.approx(10.0, abs=0.5)
    # a PIE probability still rising at the run's end: it never settles
    rising = [0.15 * (1 - math.exp(-t / 20.0)) + rng.gauss(0, 0.002) for t in range(200)]
    assert not steady.mser(rising)["settled"]
    # stationary noise: nothing (or next to nothing) is cut
    flat = [rng.gauss(5.0, 1.0) for _ in range(200)]
    res = steady.mser(flat)
    assert res["settled"] and res["cut"] <= 50
    # too short to judge: judged False, nothing cut
    assert steady.mser([1, 2, 3])["judged"] is False


def test_steady_start_is_the_time_of_the_first_kept_sample():
    times = [0.1 * i for i in range(100)]
    values = [40.0] * 20 + [10.0] * 80
    start, settled = steady.steady_start(times, values)
    assert settled and start == pytest.approx(2.0, abs=0.25)


def test_a_run_is_judged_where_its_series_settle():
    """results/steady_state.py on recorded runs: a FIFO still filling over an 8 s run
    (a1_fifo: its queue delay climbs to the end) has not settled; RED's two flows hold
    their queue after ~1.4 s; the warm-up used is never below the study's and never past
    half the traffic."""
    from bufferbloat.results import metrics as mx
    from bufferbloat.results.health import headline
    from bufferbloat.results.records import load_run
    from bufferbloat.results.steady_state import steady_state, unsettled
    here = __import__("os").path.dirname(__file__)
    results = {}
    for name in ("a1_fifo", "c1_red_2flows", "a2_fifo"):
        run = load_run(f"{here}/../fixtures/runs/{name}")
        start, end = mx.traffic_start_s(run), mx.traffic_end_s(run)
        res = steady_state(run, run.warmup_s, start, end)
        assert run.warmup_s <= res["warmup_s"] <= max(run.warmup_s, (end - start) / 2 + 0.1)
        results[name] = res
    assert not results["a1_fifo"]["series"]["queue_delay"]["settled"]
    red = results["c1_red_2flows"]
    assert red["settled"] and 0.5 < red["series"]["queue_delay"]["from_s"] < 3
    assert results["a2_fifo"]["warmup_s"] > 2                  # past the study's 0.83 s
    record = {"steady_state": results["a1_fifo"]}
    assert unsettled(record) == ["queue_delay"] and unsettled({}) == []
    line = headline({"verdict": "healthy", "checks": {}, "not_steady":
                     "not at steady state: queue_delay still moving"})
    assert line.startswith("health: healthy") and "not at steady state" in line
