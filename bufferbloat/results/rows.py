"""Metric rows and the counter helpers that both metric modules use
(:mod:`bufferbloat.results.metrics`, :mod:`bufferbloat.results.flowmetrics`): one home,
so that neither reaches into the other."""

import math

import numpy as np

from bufferbloat.core.stats import percentiles

PERCENTILES = (50, 95, 99)


def finite_values(xs):
    """``xs`` as a 1-d float array without NaNs."""
    arr = np.asarray(xs, dtype=float).ravel()
    return arr[~np.isnan(arr)]


def counter_window(t, values, cutoff_s):
    """(t, v) of a cumulative counter's samples sorted by time, NaNs dropped, from the
    last sample at or before ``cutoff_s`` (the baseline) on."""
    t = np.asarray(t, dtype=float)
    v = np.asarray(values, dtype=float)
    ok = ~(np.isnan(t) | np.isnan(v))
    t, v = t[ok], v[ok]
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    before = np.nonzero(t <= cutoff_s)[0]
    start = before[-1] if before.size else 0
    return t[start:], v[start:]


def counter_delta(t, values, cutoff_s=-math.inf):
    """(dt_s, delta) of a cumulative counter over the samples at or after ``cutoff_s``,
    starting from the last sample at or before the cut when there is one. NaN samples
    are skipped; (0, 0) when fewer than two samples remain. A counter that went backwards
    (reset) counts from its new value."""
    t, v = counter_window(t, values, cutoff_s)
    if t.size < 2:
        return 0.0, 0.0
    steps = np.diff(v)
    delta = float(np.sum(np.where(steps >= 0, steps, v[1:])))
    return float(t[-1] - t[0]), delta


class Rows(list):
    """Metric rows; ``add`` skips values that are missing or not finite."""

    def add(self, scope, name, metric, value, unit):
        if value is None:
            return
        value = float(value)
        if math.isfinite(value):
            self.append({"scope": scope, "name": str(name), "metric": metric,
                         "value": value, "unit": unit})

    def stats(self, scope, name, stem, unit, values, mean=True, pcts=PERCENTILES,
              maximum=False, std=False):
        arr = finite_values(values)
        if arr.size == 0:
            return
        if mean:
            self.add(scope, name, f"{stem}_mean_{unit}", float(np.mean(arr)), unit)
        if std:
            self.add(scope, name, f"{stem}_std_{unit}", float(np.std(arr)), unit)
        for q, value in zip(pcts, percentiles(arr, pcts)):
            self.add(scope, name, f"{stem}_p{q}_{unit}", value, unit)
        if maximum:
            self.add(scope, name, f"{stem}_max_{unit}", float(np.max(arr)), unit)
