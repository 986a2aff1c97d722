"""How precise a repeated measurement is, and whether two of them differ.

Standard library only (a sweep in the project VM stops on these numbers; the guest has
no SciPy). The methods, each the textbook one:

- :func:`t_quantile`: Student's t quantile, from its CDF (the regularized incomplete
  beta function, evaluated by its continued fraction, Numerical Recipes 6.4) inverted by
  bisection; exact to ~1e-10;
- :func:`mean_interval`: the Student-t confidence interval of a mean of ``n``
  independent repetitions: mean +- t(1 - a/2, n - 1) s / sqrt(n);
- :func:`order_interval`: a distribution-free interval for a median (or any quantile)
  of the repetitions from their order statistics (binomial ranks); for percentiles and
  ratios, whose sampling distribution is not Student's;
- :func:`stein_interval` / :func:`stop_repeating`: the stopping rule of ``--precision
  P``: runs are added until Stein's two-stage interval (the first ``min_reps`` runs'
  spread) is within P % of |mean|, at most ``max_reps``; the interval keeps its
  confidence however many runs the rule chose;
- :func:`welch`: Welch's unequal-variance t test (statistic, degrees of freedom,
  two-sided p);
- :func:`decide`: "differs" (Welch, at ``alpha`` divided by the number of comparisons:
  Bonferroni), "does not differ" (both one-sided tests of equivalence within
  +-``margin`` of the first mean reject, TOST, at the same level), else "unresolved",
  with about how many more runs per side would settle it.
"""

import functools
import math

#: Default confidence of an interval
CONFIDENCE = 0.95
#: Default equivalence margin of :func:`decide`, a share of the first mean
MARGIN = 0.05


def _betacf(a, b, x):
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t, df):
    """P(T <= t) for Student's t with ``df`` degrees of freedom (df > 0, real)."""
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


@functools.lru_cache(maxsize=4096)
def t_quantile(p, df):
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (cached: a
    stopping rule asks for the same few again and again)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"a quantile's probability is in (0, 1), not {p}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def _finite(values):
    return [float(v) for v in values if v is not None and float(v) == float(v)
            and math.isfinite(float(v))]


def mean_sd(values):
    """(n, mean, sample standard deviation) of the finite values (sd None for n < 2)."""
    xs = _finite(values)
    n = len(xs)
    if not n:
        return 0, None, None
    mean = math.fsum(xs) / n
    if n < 2:
        return n, mean, None
    return n, mean, math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))


def mean_interval(values, confidence=CONFIDENCE):
    """{n, mean, ci_low, ci_high, half_width, method} of the repetitions' mean (Student's
    t). With fewer than 2 values the interval is unknown (None)."""
    n, mean, sd = mean_sd(values)
    out = {"n": n, "mean": mean, "ci_low": None, "ci_high": None, "half_width": None,
           "method": f"Student t, {confidence:.0%}"}
    if n >= 2:
        half = t_quantile(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n)
        out.update(ci_low=mean - half, ci_high=mean + half, half_width=half)
    return out


def _binom_cdf(k, n, p):
    return math.fsum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k + 1))


def order_interval(values, q=0.5, confidence=CONFIDENCE):
    """{n, estimate, ci_low, ci_high, coverage, method} of the ``q`` quantile of the
    repetitions' distribution, from order statistics: the narrowest symmetric pair of
    ranks (j, k) with P(X_(j) <= quantile <= X_(k)) >= ``confidence`` (binomial); None
    when n is too small for any pair to reach it (n < 6 for a 95 % median)."""
    xs = sorted(_finite(values))
    n = len(xs)
    est = None
    if n:
        pos = (n - 1) * q
        lo_i = math.floor(pos)
        est = xs[lo_i] + (xs[min(lo_i + 1, n - 1)] - xs[lo_i]) * (pos - lo_i)
    out = {"n": n, "estimate": est, "ci_low": None, "ci_high": None, "coverage": None,
           "method": f"order statistics, {confidence:.0%}"}
    for width in range(n // 2 + 1):
        j = max(1, math.floor(n * q) - width)
        k = min(n, math.ceil(n * q) + 1 + width)
        if j >= k:
            continue
        cover = _binom_cdf(k - 1, n, q) - _binom_cdf(j - 1, n, q)
        if cover >= confidence:
            out.update(ci_low=xs[j - 1], ci_high=xs[k - 1], coverage=cover)
            break
    return out


def stein_interval(values, first_n, confidence=CONFIDENCE):
    """{n, mean, ci_low, ci_high, half_width, method} of repetitions whose number was
    chosen from their first ``first_n`` (Stein's two-stage interval: the spread of the
    first ``first_n`` only, t with ``first_n`` - 1 degrees of freedom, the mean of all).
    The first stage's mean and spread are independent for normal data, so the interval
    keeps its confidence however the number of runs was chosen from that spread (a
    Student interval from every run's spread covers less: 93 % for a nominal 95 %
    measured with the rule below, since a run stops early when its spread happens to
    look small)."""
    xs = _finite(values)
    n, mean, _ = mean_sd(xs)
    _, _, s0 = mean_sd(xs[:first_n])
    out = {"n": n, "mean": mean, "ci_low": None, "ci_high": None, "half_width": None,
           "method": f"Stein two-stage t, first {first_n} runs, {confidence:.0%}"}
    if s0 is not None and first_n >= 2:
        half = t_quantile(0.5 + confidence / 2.0, first_n - 1) * s0 / math.sqrt(n)
        out.update(ci_low=mean - half, ci_high=mean + half, half_width=half)
    return out


def precise_enough(values, precision_pct, first_n, confidence=CONFIDENCE):
    """Whether the interval of :func:`stein_interval` is within +-``precision_pct`` %
    of |mean|."""
    ci = stein_interval(values, first_n, confidence)
    if ci["half_width"] is None:
        return False
    return ci["half_width"] <= abs(ci["mean"]) * precision_pct / 100.0


def reps_needed(values, precision_pct, first_n, confidence=CONFIDENCE):
    """About how many repetitions in all bring the interval within the precision, from
    the first stage's spread and the mean so far (None before the first stage is in)."""
    xs = _finite(values)
    if len(xs) < max(2, first_n):
        return None
    _, mean, _ = mean_sd(xs)
    _, _, s0 = mean_sd(xs[:first_n])
    if s0 == 0:
        return len(xs)
    if not mean:
        return math.inf
    half_at_1 = t_quantile(0.5 + confidence / 2.0, first_n - 1) * s0
    return max(len(xs), math.ceil((half_at_1 / (abs(mean) * precision_pct / 100.0)) ** 2))


def stop_repeating(values, precision_pct, min_reps=5, max_reps=10,
                   confidence=CONFIDENCE):
    """(stop, why) of a point's repetitions so far: ``precise`` once the first
    ``min_reps`` are in and :func:`stein_interval` (its first stage: those ``min_reps``)
    is within the precision, ``max-reps`` at ``max_reps`` (never more), else (False,
    ``more``)."""
    n = len(_finite(values))
    if n >= max_reps:
        return True, "max-reps"
    if n >= min_reps and precise_enough(values, precision_pct, min_reps, confidence):
        return True, "precise"
    return False, "more"


def welch(a, b):
    """(t, degrees of freedom, two-sided p) of Welch's t test of mean(a) = mean(b);
    None when either side has fewer than 2 values."""
    na, ma, sa = mean_sd(a)
    nb, mb, sb = mean_sd(b)
    if na < 2 or nb < 2:
        return None
    va, vb = sa * sa / na, sb * sb / nb
    if va + vb == 0:
        return (0.0 if ma == mb else math.copysign(math.inf, ma - mb)), na + nb - 2, \
            (1.0 if ma == mb else 0.0)
    t = (ma - mb) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / ((va * va / (na - 1) if va else 0.0)
                           + (vb * vb / (nb - 1) if vb else 0.0))
    return t, df, 2.0 * t_cdf(-abs(t), df)


def decide(a, b, margin=MARGIN, alpha=1 - CONFIDENCE, comparisons=1):
    """{verdict, p, diff, ci_low, ci_high, more_runs, method}: whether the repetitions
    ``b`` differ from ``a``. The level is ``alpha / comparisons`` (Bonferroni); the
    difference's (1 - 2 level) interval decides by TOST: inside +-``margin`` x |mean(a)|
    -> "does not differ"; Welch's p below the level -> "differs"; else "unresolved",
    with ``more_runs``: about how many more runs per side would settle it, from the
    spread so far."""
    level = alpha / max(1, comparisons)
    method = (f"Welch t test at {level:.3g} (alpha {alpha:g} over {comparisons} "
              f"comparison(s)); equivalence (TOST) within +-{margin:.0%} of the first mean")
    out = {"verdict": "unresolved", "p": None, "diff": None, "ci_low": None,
           "ci_high": None, "more_runs": None, "method": method}
    test = welch(a, b)
    if test is None:
        out["more_runs"] = max(0, 2 - min(len(_finite(a)), len(_finite(b))))
        return out
    t, df, p = test
    na, ma, sa = mean_sd(a)
    nb, mb, sb = mean_sd(b)
    diff, se = mb - ma, math.sqrt(sa * sa / na + sb * sb / nb)
    half = t_quantile(1.0 - level, df) * se if se else 0.0
    bound = margin * abs(ma)
    out.update(p=p, diff=diff, ci_low=diff - half, ci_high=diff + half)
    if p < level:
        out["verdict"] = "differs"
    elif -bound < diff - half and diff + half < bound:
        out["verdict"] = "does not differ"
    else:
        out["more_runs"] = _more_runs(diff, bound, sa, sb, na, nb, level)
    return out


def _more_runs(diff, bound, sa, sb, na, nb, level):
    """About how many more runs per side make either test decide, the spread and the
    difference staying as they are (None: no number of runs would)."""
    for extra in range(1, 1000):
        n_a, n_b = na + extra, nb + extra
        se = math.sqrt(sa * sa / n_a + sb * sb / n_b)
        if se == 0:
            return extra
        df = n_a + n_b - 2
        half = t_quantile(1.0 - level, df) * se
        if abs(diff) / se > t_quantile(1.0 - level / 2.0, df) or \
                (-bound < diff - half and diff + half < bound):
            return extra
    return None
