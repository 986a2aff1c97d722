"""The statistics of bufferbloat.core.stats, against hand-computed answers and numpy."""
import math
import random

import numpy as np
import pytest

from bufferbloat.core.stats import cov, jain_index, percentile, percentiles


def test_jain_index():
    assert jain_index([3.0, 3.0, 3.0, 3.0]) == pytest.approx(1.0)
    for n in (2, 5, 10):
        assert jain_index([7.0] + [0.0] * (n - 1)) == pytest.approx(1 / n)
    assert jain_index([1, 3]) == pytest.approx(16 / (2 * 10))
    assert jain_index(np.array([1.0, 3.0])) == pytest.approx(0.8)
    with pytest.raises(ValueError):
        jain_index([])
    with pytest.raises(ValueError):
        jain_index([1, -1])
    with pytest.raises(ValueError):
        jain_index([1, float("nan")])
    assert math.isnan(jain_index([0, 0]))


def test_cov():
    assert cov([4.2] * 10) == 0.0
    assert cov([1.0, 3.0]) == pytest.approx(0.5)  # population std 1, mean 2
    assert cov([1.0, float("nan"), 3.0]) == pytest.approx(0.5)
    xs = np.random.default_rng(1).exponential(3.0, 1000)
    assert cov(xs) == pytest.approx(np.std(xs) / np.mean(xs), rel=1e-12)
    with pytest.raises(ValueError):
        cov([])
    assert math.isnan(cov([0, 0]))


def test_percentile_is_numpy_linear_to_the_last_bit():
    xs = list(range(1, 101))  # 1..100: rank (n-1) q/100
    assert percentile(xs, 50) == pytest.approx(50.5)
    assert percentile(xs, 95) == pytest.approx(95.05)
    assert percentile(xs, 99) == pytest.approx(99.01)
    assert percentile([5.0, float("nan")], 99) == 5.0
    assert percentile([4, 1, 3, 2], 50) == 2.5          # unsorted input
    assert percentile([], 50) is None and percentile([float("nan")], 50) is None
    rng = random.Random(7)
    for n in (1, 2, 3, 10, 101, 1000):
        vals = [rng.lognormvariate(0, 2) for _ in range(n)]
        qs = (0, 1, 25, 50, 90, 95, 99, 99.9, 100)
        assert percentiles(np.array(vals), qs) == \
            [float(np.percentile(vals, q, method="linear")) for q in qs]
    with pytest.raises(ValueError):
        percentile([1], 101)
    with pytest.raises(ValueError):
        percentile([1], 50, method="midpoint")


def test_nearest_rank_percentile():
    """The sampler's period percentiles (as its C helper computes them): the smallest
    value with at least q % of the values at or below it."""
    xs = [0.010, 0.011, 0.009, 0.030, 0.010]      # sorted: 9, 10, 10, 11, 30 ms
    assert percentile(xs, 50, "nearest") == 0.010
    assert percentile(xs, 80, "nearest") == 0.011
    assert percentile(xs, 81, "nearest") == 0.030
    assert percentile(xs, 99, "nearest") == 0.030
    assert percentile(xs, 0, "nearest") == 0.009
    vals = np.random.default_rng(3).normal(10, 2, 777)
    for q in (1, 50, 99):
        assert percentile(vals, q, "nearest") == \
            float(np.percentile(vals, q, method="inverted_cdf"))


def test_a_numpy_array_gives_the_pure_paths_percentiles_and_stays_unsorted():
    rng = np.random.default_rng(7)
    for arr in (rng.exponential(3.0, 5001), rng.integers(-50, 50, 999),
                np.array([np.nan, 2.0, np.nan, -1.0, 0.5]), np.array([np.nan]),
                np.array([], dtype=float)):
        before = arr.copy()
        qs = (0, 1, 25, 50, 90, 99, 99.9, 100)
        for method in ("linear", "nearest"):
            assert percentiles(arr, qs, method) == percentiles(arr.tolist(), qs, method)
        np.testing.assert_array_equal(arr, before)
