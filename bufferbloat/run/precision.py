"""Repeated until precise: ``--precision P`` on ``sweep`` and ``run-all``.

Each configuration of a sweep starts with ``min_reps`` repetitions. Once every
repetition planned for it has ended, the headline metrics of its *healthy* runs
(:func:`bufferbloat.results.headline.values`; a degraded or faulty run never counts)
decide: when each metric's interval is within +-P % of its mean
(:func:`bufferbloat.core.uncertainty.stop_repeating`: Stein's two-stage interval over
the first ``min_reps`` healthy runs, at ``confidence``) the configuration is done;
otherwise as many repetitions as the spread so far says are missing are added at once
(:func:`~bufferbloat.core.uncertainty.reps_needed`: on Dask workers they run side by
side), never past ``max_reps`` in all, which is then said ("max-reps") in the output and
the index. A resumed sweep counts what its runs recorded: the same command run again
adds nothing to a configuration that is done.
"""

from dataclasses import dataclass

from bufferbloat.core import uncertainty
from bufferbloat.core.errors import UsageError
from bufferbloat.core.params import check_range
from bufferbloat.results.headline import values as headline_values
from bufferbloat.results.health import verdict_of
from bufferbloat.results.records import load_run

PRECISION_LIMITS = (0.1, 100.0)
REPS_LIMITS = (2, 1000)


@dataclass(frozen=True)
class PrecisionRule:
    """``--precision`` (percent), ``--confidence``, ``--min-reps``, ``--max-reps``."""

    precision_pct: float
    confidence: float = uncertainty.CONFIDENCE
    min_reps: int = 5
    max_reps: int = 20

    def check(self):
        """UsageError (exit 2) for a value outside its range, before anything runs."""
        check_range("--precision", self.precision_pct, *PRECISION_LIMITS, " %")
        check_range("--confidence", self.confidence, 0.5, 0.999)
        check_range("--min-reps", self.min_reps, *REPS_LIMITS)
        check_range("--max-reps", self.max_reps, *REPS_LIMITS)
        if self.max_reps < self.min_reps:
            raise UsageError(f"--max-reps {self.max_reps} is below --min-reps "
                             f"{self.min_reps}")
        return self

    def describe(self):
        return (f"+-{self.precision_pct:g} % at {self.confidence:.0%} (Stein two-stage t "
                f"over the first {self.min_reps} healthy runs), {self.min_reps}-"
                f"{self.max_reps} runs")


def healthy_headlines(run_dirs):
    """{metric: [value per healthy run, in the order given]} of the runs in
    ``run_dirs`` (unreadable, degraded or faulty runs left out)."""
    out = {}
    for run_dir in run_dirs:
        try:
            run = load_run(run_dir)
        except Exception:  # noqa: BLE001 - an unreadable run does not count
            continue
        if run.record.get("status") != "ok" or verdict_of(run.record) != "healthy":
            continue
        for item in headline_values(run):
            if item["value"] is not None:
                out.setdefault(item["metric"], []).append(item["value"])
    return out


def judge(rule, run_dirs, planned):
    """{stop, why, runs, more, metrics: {metric: interval}} of one configuration whose
    runs are ``run_dirs`` (``planned``: how many repetitions it has been given):
    ``why`` is ``precise``, ``max-reps`` or ``more``; ``more``, how many repetitions
    to add now (0 when it stops)."""
    per_metric = healthy_headlines(run_dirs)
    healthy = max((len(v) for v in per_metric.values()), default=0)
    intervals = {m: (uncertainty.stein_interval(v, rule.min_reps, rule.confidence)
                     if len(v) >= rule.min_reps else
                     uncertainty.mean_interval(v, rule.confidence))
                 for m, v in per_metric.items()}
    open_metrics = {m: v for m, v in per_metric.items() if not uncertainty.stop_repeating(
        v, rule.precision_pct, rule.min_reps, rule.max_reps, rule.confidence)[0]}
    precise = bool(per_metric) and all(
        len(v) >= rule.min_reps and uncertainty.precise_enough(
            v, rule.precision_pct, rule.min_reps, rule.confidence)
        for v in per_metric.values())
    if precise or planned >= rule.max_reps or (per_metric and not open_metrics):
        return {"stop": True, "why": "precise" if precise else "max-reps",
                "runs": healthy, "more": 0, "metrics": intervals}
    needs = [uncertainty.reps_needed(v, rule.precision_pct, rule.min_reps,
                                     rule.confidence) for v in open_metrics.values()]
    missing = max([n - len(v) for n, v in zip(needs, open_metrics.values())
                   if n is not None and n != float("inf")] or [1])
    if not per_metric:             # no healthy run yet: one more at a time
        missing = 1
    more = max(1, min(int(missing), rule.max_reps - planned))
    return {"stop": False, "why": "more", "runs": healthy, "more": more,
            "metrics": intervals}
