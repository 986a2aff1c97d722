"""The statistics every part of the suite uses, defined once: percentiles, the coefficient
of variation, Jain's fairness index.

Standard library only (the sampler process and the traffic tools use it without numpy);
numpy arrays are accepted wherever a sequence is. Values that are NaN are left out.

- :func:`percentile`: ``linear`` is numpy's default (type 7: the q-th percentile of n
  sorted values interpolates linearly at rank (n - 1) x q / 100), computed as numpy does,
  to the last bit; ``nearest`` is the nearest rank (the smallest value with at least q %
  of the values at or below it), the sampler's period percentiles, as its C helper
  computes them (``bufferbloat/measure/csampler``);
- :func:`cov`: population standard deviation / mean;
- :func:`jain_index`: (sum x)^2 / (n x sum x^2).
"""

import math

PERCENTILE_METHODS = ("linear", "nearest")


def _finite(values):
    """The values that are not NaN, as floats (a numpy array converted in one go)."""
    if hasattr(values, "tolist"):
        values = values.tolist()
    return [v for v in map(float, values) if v == v]


def _sorted_finite(values):
    """The values that are not NaN, as floats, sorted. A numeric numpy array is
    filtered and sorted by numpy's own methods (a 50,000-gap departure series: ~10
    times faster than in Python; numpy is not imported here, the array brings it)."""
    kind = getattr(getattr(values, "dtype", None), "kind", None)
    if kind in ("f", "i", "u") and getattr(values, "ndim", 0) == 1:
        arr = values.astype(float)           # a copy: the caller's array is not sorted
        arr = arr[arr == arr]
        arr.sort()
        return arr.tolist()
    return sorted(_finite(values))


def percentiles(values, qs, method="linear"):
    """[the q-th percentile for q in ``qs``] of ``values`` (NaNs left out; sorted or
    not; sorted once), each None when there is no value. ``method``: ``linear`` or
    ``nearest`` (the module docstring). Raises ValueError for a q outside 0..100 or
    another method."""
    if method not in PERCENTILE_METHODS:
        raise ValueError(f"percentile method {method!r} (allowed: "
                         f"{', '.join(PERCENTILE_METHODS)})")
    for q in qs:
        if not 0 <= q <= 100:
            raise ValueError(f"percentile q={q!r} outside 0..100")
    vals = _sorted_finite(values)
    n = len(vals)
    if not n:
        return [None for _ in qs]
    out = []
    for q in qs:
        if method == "nearest":
            out.append(vals[min(n - 1, max(0, math.ceil(q / 100 * n) - 1))])
            continue
        k = q / 100 * (n - 1)
        lo = math.floor(k)
        a, b, t = vals[lo], vals[min(lo + 1, n - 1)], k - lo
        # numpy's lerp: from the nearer end, so that the result is exact at both ends
        out.append(a + (b - a) * t if t < 0.5 else b - (b - a) * (1 - t))
    return out


def percentile(values, q, method="linear"):
    """The ``q``-th percentile (0..100) of ``values``, or None when there is no value
    (see :func:`percentiles`)."""
    return percentiles(values, (q,), method)[0]


def cov(values):
    """Coefficient of variation: population standard deviation / mean (NaNs left out).
    Raises ValueError for no values; NaN when the mean is 0."""
    vals = _finite(values)
    if not vals:
        raise ValueError("coefficient of variation of no values")
    m = math.fsum(vals) / len(vals)
    if m == 0:
        return math.nan
    if all(v == vals[0] for v in vals):
        return 0.0  # exactly, without the rounding of the deviations
    return math.sqrt(math.fsum((v - m) ** 2 for v in vals) / len(vals)) / m


def jain_index(shares):
    """Jain's fairness index (sum x)^2 / (n x sum x^2) of non-negative shares: 1 when all
    are equal, 1/n when one of n takes everything. Raises ValueError for no shares or a
    negative (or NaN) one; NaN when every share is 0."""
    vals = list(map(float, shares.tolist() if hasattr(shares, "tolist") else shares))
    if not vals:
        raise ValueError("Jain's index of no values")
    if any(v != v or v < 0 for v in vals):
        raise ValueError(f"Jain's index needs non-negative numbers, got {vals}")
    sq = math.fsum(v * v for v in vals)
    if sq == 0:
        return math.nan
    return math.fsum(vals) ** 2 / (len(vals) * sq)


def loss_figures(lost):
    """{sent, received, loss_pct, loss_up_pct, loss_down_pct} from the ``lost`` values
    of every probe sent ('' answered, 'up', 'down', 'unknown').

    loss_up_pct: requests lost / probes sent; loss_down_pct: replies lost / requests
    known to have reached the server (sent - lost up - lost with no direction known);
    loss_pct: every probe not answered / probes sent. None where the count is 0."""
    lost = list(lost)
    sent = len(lost)
    up = sum(1 for x in lost if x == "up")
    down = sum(1 for x in lost if x == "down")
    unknown = sum(1 for x in lost if x not in ("", "up", "down"))
    reached = sent - up - unknown
    pct = lambda n, d: 100.0 * n / d if d else None  # noqa: E731
    return {"sent": sent, "received": sent - up - down - unknown,
            "loss_pct": pct(up + down + unknown, sent), "loss_up_pct": pct(up, sent),
            "loss_down_pct": pct(down, reached)}
