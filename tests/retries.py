"""The one retry and accounting module of the test tiers (import it as ``tests.retries``).

Two tiers (docs/design/testing.md), named by env ``BUFFERBLOAT_TEST_TIER`` (run_tests.sh sets it):

* **gate** (the default; ``sudo ./run_tests.sh``): contracts that correct code meets on
  any machine, however loaded. A measurement with a physics or timing *band*
  (:func:`measure_until_met`) is made once: what only a bug can break (a lost event, an
  error, a start before its time) is asserted inside ``misses_of`` and fails the test;
  the band's misses are printed and written to the run's test record
  (tests/record.py), not judged: the acceptance tier judges them.
* **acceptance** (``sudo ./run_tests.sh --acceptance``): every band, judged by a
  sequential rule: a band met at the first attempt passes; after a miss, the next
  :data:`CONFIRM` attempts must all meet it. With a false-miss rate ``p`` per attempt,
  correct code fails with probability ``p * (1 - (1 - p) ** 2)`` (about ``2 p**2``:
  under 1 in 1,000 for ``p <= 0.022``); a bug that breaks the band in a share ``q`` of
  attempts passes with probability ``(1 - q) + q * (1 - q) ** 2`` (0.50 at q = 0.6,
  0.11 at q = 0.9).

Degraded runs (the emulator fell behind: docs/design/health.md) are never judged: a test reruns
them (at most :data:`DEGRADED_RERUNS` times, :func:`run_until_healthy_counted`) and
:data:`SESSION` counts every run and every degraded one, by family. In the acceptance
tier, the session fails when a family's degraded count is improbable under its
calibrated rate (:data:`DEGRADED_RATE`): a one-sided binomial test at
:data:`DEGRADED_ALPHA`. In the gate the counts are reported, never judged (a gate's
contract is a complete record with its verdict, whatever the verdict).

There is exactly one :data:`SESSION`: loaded under any other name than
``tests.retries`` this module refuses to import (a second copy would count apart).
"""
import math
import os

if __name__ != "tests.retries":
    raise ImportError(f"tests/retries.py imported as {__name__!r}: import it as "
                      "tests.retries (one module, one session counter)")

TIER_ENV = "BUFFERBLOAT_TEST_TIER"
TIERS = ("gate", "acceptance")
#: attempts that must meet the band after a first miss (acceptance tier)
CONFIRM = 2
#: degraded reruns of one run at most (then the run's last attempt is judged as it is)
DEGRADED_RERUNS = 2
#: one-sided binomial test's level: a family's degraded count at least this improbable
#: under its rate fails the acceptance session
DEGRADED_ALPHA = 0.001
#: each family's rate of degraded runs, per run (docs/design/testing.md): the larger of
#: the first estimate (CI logs, docs/design/health.md) and the share recorded in this
#: machine's archive of test records (bench/band_spreads.py prints it; 2026-11-29, 23
#: records: a 11 of 118, b 10 of 42, c 0 of 35, d 0 of 51, e 9 of 50, other 8 of 31).
#: Every test record writes the counts it saw, to recalibrate.
DEGRADED_RATE = {"a": 0.10, "b": 0.24, "c": 0.15, "d": 0.08, "e": 0.25, "other": 0.26}


def tier():
    """The running tier ('gate' unless env says 'acceptance'); an unknown name fails."""
    name = os.environ.get(TIER_ENV, "gate")
    if name not in TIERS:
        raise ValueError(f"{TIER_ENV}={name!r}: expected one of {', '.join(TIERS)}")
    return name


def sequential_verdict(outcomes):
    """The sequential rule over attempts' ``outcomes`` (True: met), as far as they go:
    'pass', 'fail' or 'more' (another attempt is needed)."""
    if not outcomes:
        return "more"
    if outcomes[0]:
        return "pass"
    after = outcomes[1:]
    if not all(after):
        return "fail"
    return "pass" if len(after) >= CONFIRM else "more"


def false_fail_rate(p):
    """The chance that the sequential rule fails correct code whose attempts miss the
    band with probability ``p`` each."""
    return p * (1 - (1 - p) ** CONFIRM)


class BandFailed(AssertionError):
    """A band judged already by the sequential rule (:func:`measure_until_met`) and
    failed: :func:`judge_test` passes it on instead of judging the test again."""


def measure_until_met(measure, misses_of, label, log=print):
    """Measure a band: ``measure()`` gives a result, ``misses_of(result)`` the bounds it
    missed (a list; empty: met). Returns (the last result, [each miss]).

    Gate: one attempt; its misses are printed and recorded, not judged. Acceptance: the
    sequential rule; the attempt that decides a failure raises :class:`BandFailed`."""
    from tests import record  # noqa: PLC0415 - the record is the session's
    misses, outcomes = [], []
    while True:
        result = measure()
        miss = misses_of(result)
        outcomes.append(not miss)
        if miss:
            misses.append(miss)
            log(f"{label}: attempt {len(outcomes)} MISSED: " + "; ".join(miss))
        if tier() == "gate":
            record.note_band(label, outcomes, misses, judged=False)
            if miss:
                log(f"{label}: band not judged in the gate (the acceptance tier judges it)")
            return result, misses
        verdict = sequential_verdict(outcomes)
        if verdict == "more":
            continue
        record.note_band(label, outcomes, misses, judged=True)
        if verdict != "pass":
            raise BandFailed(
                f"{label}: band missed at attempt 1 and again within {CONFIRM} more "
                f"(sequential rule, tests/retries.py): {misses}")
        log(f"{label}: bounds met ({len(outcomes)} attempts, {len(misses)} missed)")
        return result, misses


def observe(name, value, lo=None, hi=None, unit=""):
    """Record a band's measured ``value`` and its bounds (``lo``/``hi``; None: open) in
    the session's record, and return whether it is within them. Every tier records
    them; the archive of records (run_tests.sh) is what bench/band_spreads.py computes
    each band's spread and false-fail rate from."""
    from tests import record  # noqa: PLC0415 - the record is the session's
    value = None if value is None else float(value)
    record.note_value(name, value, lo, hi, unit)
    return within(value, lo, hi)


def band(name, value, lo=None, hi=None, unit=""):
    """Assert ``lo <= value <= hi`` and record the value with its bounds: a physics
    band of an acceptance test, each run of which is a calibration sample
    (:func:`observe`; bench/band_spreads.py). ``name`` names the band within its test."""
    assert observe(name, value, lo, hi, unit), f"{name}: {value} outside {lo} .. {hi} {unit}"


#: how far past a bound a value may be and still be on it: a bound computed in floating
#: point (0.4 x 15.14 ms = 6.056000000000001) must not fail a value measured on it (a
#: queue's p50 of exactly 10 packets of 0.6056 ms: 6.056), 2026-11-29's E FIFO attempt
BOUND_REL_TOL = 1e-9


#: where a missed band's runs are kept for a look (a tmp_path is pruned): the checkout's
#: .scratch, which the VM shares (/bb), so a VM test's runs land there too
MISSED_RUNS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           ".scratch", "band-misses")


def keep_missed_runs(src, what):
    """Copy the directory ``src`` (a missed band's runs) to
    ``.scratch/band-misses/<what>-<stamp>`` and return that path, for the miss's message:
    a miss that cannot be explained from its values is explained from its runs."""
    import shutil  # noqa: PLC0415 - only on a miss
    import time  # noqa: PLC0415
    dest = os.path.join(MISSED_RUNS, f"{what}-{time.strftime('%Y%m%d-%H%M%S')}")
    shutil.copytree(src, dest)
    return dest


def within(value, lo=None, hi=None):
    """Whether ``value`` is a number inside ``lo``..``hi`` (None: that side open), a
    bound's last bits of floating-point error forgiven (:data:`BOUND_REL_TOL`)."""
    def slack(bound):
        return BOUND_REL_TOL * max(1.0, abs(bound))
    return value is not None and (lo is None or value >= lo - slack(lo)) \
        and (hi is None or value <= hi + slack(hi))


def judge_test(attempt, reset, label, log=print):
    """An acceptance test whose bands are its plain asserts (a family's outcome on one
    run), judged by the sequential rule as a whole: ``attempt()`` runs the test's body;
    an AssertionError is a miss, after which ``reset()`` drops what the test had cached
    (its runs) and the body runs again, until :func:`sequential_verdict` decides. The
    attempts are recorded as a band labelled ``label``. A band the test judged itself
    (:func:`measure_until_met`) and failed (:class:`BandFailed`) is not judged again; a
    plain assert that misses after one the test met is a miss like any other (the
    attempt again runs the whole test, its own band judged anew). Any other exception
    is an error, never retried."""
    from tests import record  # noqa: PLC0415 - the record is the session's
    outcomes, misses, last = [], [], None
    while True:
        try:
            attempt()
            miss = None
        except BandFailed as e:
            if outcomes:       # this attempt missed too: what the rule saw, recorded
                outcomes.append(False)
                misses.append([_miss_line(e)])
                record.note_band(label, outcomes, misses, judged=True)
            raise
        except AssertionError as e:
            miss, last = _miss_line(e), e
        except NotJudged:
            # a later attempt's run stayed degraded: the attempts judged before it (a
            # miss among them) are kept, the test not judged
            if outcomes:
                record.note_band(label, outcomes, misses, judged=False)
            raise
        outcomes.append(miss is None)
        if miss:
            misses.append([miss])
            log(f"{label}: attempt {len(outcomes)} MISSED: {miss}")
        verdict = sequential_verdict(outcomes)
        if verdict == "more":
            reset()
            continue
        if len(outcomes) > 1:
            record.note_band(label, outcomes, misses, judged=True)
        if verdict == "fail":
            raise AssertionError(
                f"{label}: missed at attempt 1 and again within {CONFIRM} more "
                f"(sequential rule, tests/retries.py): {misses}") from last
        if len(outcomes) > 1:
            log(f"{label}: bounds met ({len(outcomes)} attempts, {len(misses)} missed)")
        return


def _miss_line(exc):
    """An assert's miss as the record keeps it: its message's first line."""
    return (str(exc).strip().splitlines() or [""])[0][:300] or "assert"


class NotJudged(Exception):
    """A run stayed degraded through its reruns (:data:`DEGRADED_RERUNS`): what the test
    would judge on it is not judged (the emulator fell behind, docs/design/health.md).
    tests/conftest.py reports the test as skipped with this reason and records it
    (``not_judged``); each degraded attempt is in the session's ledger, whose
    per-family binomial test (:meth:`DegradedLedger.failing`) judges how often it
    happened: a bug that makes runs degraded fails the acceptance session there."""


def require_healthy(health, what):
    """``health`` (a run's record) healthy, or :class:`NotJudged` when it is degraded;
    any other verdict fails the test."""
    verdict = (health or {}).get("verdict")
    if verdict == "degraded":
        raise NotJudged(f"{what}: degraded after {DEGRADED_RERUNS} reruns: "
                        + "; ".join(str(p) for p in health.get("problems") or [])[:500])
    assert verdict == "healthy", (what, health)


def family_of(name):
    """The experiment family of a scenario name, a run directory or a test id ('a'..'e'
    from 'a1_fifo', '.../e1_aqm_kflows/...', 'test_c_...'), else 'other'."""
    for part in str(name).replace("::", "/").split("/"):
        for word in (part, part.removeprefix("test_")):
            if len(word) > 2 and word[0] in "abcde" and (word[1].isdigit() or word[1] == "_"):
                return word[0]
    return "other"


def binomial_tail(k, n, p):
    """P(X >= k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k, n + 1))


class DegradedLedger:
    """Every run the tests made that can come out degraded, and the degraded ones."""

    def __init__(self):
        self.runs = {}            # family -> runs made (every attempt)
        self.reruns = []          # (test, family, the degraded run's directory, reasons)

    def note(self, test, degraded, runs=None, family=None):
        """A test's ``runs`` attempts (default: one plus the degraded ones), of which
        ``degraded`` [(directory, reasons)] were degraded and run again."""
        for d, reasons in degraded:
            fam = family or family_of(d)
            self.reruns.append((test, fam, str(d), reasons))
        fam = family or (family_of(degraded[0][0]) if degraded else family_of(test))
        self.runs[fam] = self.runs.get(fam, 0) + (runs if runs is not None
                                                  else 1 + len(degraded))
        return len(self.reruns)

    def by_family(self):
        """{family: (degraded, runs, the binomial tail of that count under its rate)}."""
        out = {}
        for fam, n in sorted(self.runs.items()):
            k = sum(1 for r in self.reruns if r[1] == fam)
            rate = DEGRADED_RATE.get(fam, DEGRADED_RATE["other"])
            out[fam] = (k, max(n, k), binomial_tail(k, max(n, k), rate))
        return out

    def failing(self):
        """The families whose degraded counts fail the test (acceptance tier only)."""
        if tier() != "acceptance":
            return []
        return [f for f, (k, _n, tail) in self.by_family().items()
                if k and tail < DEGRADED_ALPHA]

    def report(self):
        """Lines for the end of the session."""
        judged = tier() == "acceptance"
        lines = [f"degraded reruns this session: {len(self.reruns)} "
                 f"({'judged per family, binomial test at ' + str(DEGRADED_ALPHA) if judged else 'the gate reports them, the acceptance tier judges them'})"]
        bad = self.failing()
        for fam, (k, n, tail) in self.by_family().items():
            lines.append(f"  family {fam}: {k} degraded of {n} runs (rate "
                         f"{DEGRADED_RATE.get(fam, DEGRADED_RATE['other'])}: "
                         f"P(>= {k}) = {tail:.2g}){', FAILS' if fam in bad else ''}")
        lines += [f"  {test}: {d} ({'; '.join(reasons) or 'no reason recorded'})"
                  for test, _f, d, reasons in self.reruns]
        return lines

    def finish(self, session):
        """At the session's end: a passing acceptance session fails on a family whose
        degraded runs are improbably many."""
        if self.failing() and session.exitstatus == 0:
            session.exitstatus = 1


#: the session's one ledger (tests/conftest.py reports it and writes it to the record)
SESSION = DegradedLedger()


def current_test():
    """The running test's id (pytest sets PYTEST_CURRENT_TEST), for the report."""
    return os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0]


def _health(run_dir):
    """The health entry of a run's result.json, or {}."""
    import json  # noqa: PLC0415
    try:
        with open(os.path.join(run_dir, "result.json")) as f:
            return json.load(f).get("health") or {}
    except (OSError, ValueError):
        return {}


def _problems(health):
    return [str(p) for p in health.get("problems") or []]


def _reasons(run_dir):
    """The health problems a degraded run recorded (its result.json), or []."""
    return _problems(_health(run_dir))


def run_until_healthy_counted(run_once, retries=DEGRADED_RERUNS, log=print, ledger=None):
    """``bufferbloat.run.watch.run_until_healthy`` (at most ``retries`` reruns of a
    degraded run, never more than :data:`DEGRADED_RERUNS`); every attempt counts in
    the session's ledger, each degraded one with its reasons, printed."""
    from bufferbloat.run.watch import run_until_healthy  # noqa: PLC0415
    ledger = ledger or SESSION
    run_dir, aside = run_until_healthy(run_once, min(retries, DEGRADED_RERUNS), log=log)
    degraded = [(d, _reasons(d)) for d in aside]
    for d, reasons in degraded:
        log(f"degraded attempt kept and rerun: {d} ({'; '.join(reasons)})")
    last = _health(run_dir)
    if last.get("verdict") == "degraded":   # the last attempt too: counted, not rerun
        degraded.append((run_dir, _problems(last)))
        log(f"degraded after {len(aside)} rerun(s), not judged: {run_dir} "
            f"({'; '.join(degraded[-1][1])})")
    ledger.note(current_test(), degraded, runs=1 + len(aside),
                family=family_of(run_dir))
    return run_dir, aside


def note_sweep_reruns(index_entries, log=print, ledger=None):
    """Count a sweep's runs and degraded reruns (each point's ``degraded_attempts``)."""
    ledger = ledger or SESSION
    n = 0
    for e in index_entries:
        aside = e.get("degraded_attempts") or []
        n = ledger.note(current_test(), [(d, _reasons(d)) for d in aside],
                        family=family_of(e.get("scenario") or e.get("dir") or current_test()))
    return n
