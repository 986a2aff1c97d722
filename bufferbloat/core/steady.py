"""Where a series settles: the MSER-5 truncation rule of simulation output analysis.

MSER-5 (White 1997; Franklin and White 2008) takes batch means of 5 consecutive
observations, b_1..b_k, and chooses the truncation d (in batches) that minimises

    MSER(d) = sum_{i>d} (b_i - mean(b_{d+1..k}))^2 / (k - d)^2,

the squared standard error of the mean of what is kept, over d in 0..k/2. The
observations before batch d* are the warm-up; the mean from there is the steady-state
estimate. When d* falls in the last tenth of the range it may take (its minimum sits
against the k/2 limit), the series has not settled within the run: the rule has found
no level the second half holds ("not at steady state").

Standard library only; NaN values (no sample) are left out before batching.
"""

import math

#: Observations per batch (the "5" of MSER-5)
BATCH = 5
#: d* beyond this share of its range (k/2): the series never settled
UNSETTLED_SHARE = 0.9
#: Fewer batches than this: too short to judge (settled, nothing cut)
MIN_BATCHES = 8


def mser(values, batch=BATCH):
    """{cut, batches, settled, mean} of a series of equally spaced ``values``: ``cut``
    the number of observations to drop (a multiple of ``batch``), ``settled`` False when
    the truncation point presses against its limit, ``mean`` the mean of what is kept."""
    xs = [float(v) for v in values if v is not None and v == v]
    k = len(xs) // batch
    if k < MIN_BATCHES:
        mean = math.fsum(xs) / len(xs) if xs else None
        return {"cut": 0, "batches": k, "settled": True, "mean": mean, "judged": False}
    b = [math.fsum(xs[i * batch:(i + 1) * batch]) / batch for i in range(k)]
    best_d, best = 0, math.inf
    # suffix sums make each MSER(d) O(1)
    s1 = [0.0] * (k + 1)
    s2 = [0.0] * (k + 1)
    for i in range(k - 1, -1, -1):
        s1[i] = s1[i + 1] + b[i]
        s2[i] = s2[i + 1] + b[i] * b[i]
    limit = k // 2
    for d in range(limit + 1):
        m = k - d
        sse = s2[d] - s1[d] * s1[d] / m
        stat = max(sse, 0.0) / (m * m)
        if best == math.inf or stat < best * (1 - 1e-12):
            best_d, best = d, stat
    settled = best_d <= UNSETTLED_SHARE * limit
    kept = xs[best_d * batch:]
    return {"cut": best_d * batch, "batches": k, "settled": settled,
            "mean": math.fsum(kept) / len(kept), "judged": True}


def steady_start(times, values, batch=BATCH):
    """(time the series settles, settled) of a series sampled at ``times`` (s): the
    time of the first observation MSER-5 keeps; (None, True) for a series too short to
    judge."""
    pairs = [(t, v) for t, v in zip(times, values) if v is not None and v == v]
    res = mser([v for _, v in pairs], batch)
    if not res["judged"]:
        return None, True
    return pairs[res["cut"]][0], res["settled"]
