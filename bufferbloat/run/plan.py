"""A sweep's points and where each one's run is kept.

A point is one run of a fully resolved configuration (:mod:`.resolved`). It runs in its
own directory ``OUT/SCENARIO/sweep/KEY=VALUE,.../PROFILE-CONFIGKEY/rep-N``: the varied
values, the profile (quick/full) and the first 12 hex digits of the configuration's key
(everything the run uses but the repetition: every parameter after the profile, variants,
``--set`` and rate scaling, the duration, warm-up and sampling period). A point is reused
only when its directory holds a result with the same ``run_key`` and status ``ok``; a
failed or interrupted attempt of the same run is run again in place; a directory holding
another configuration's run is never touched (the point runs beside it, ``rep-N.2``...).
So a quick sweep is not reused by the full one, a changed ``--set``, ``--time``,
``BUFFERBLOAT_MAX_MBIT`` or scenario definition reruns, and the same command run again
runs only its missing points.

:func:`plan_sweep` resolves every point of a sweep once (:class:`Point`: the resolved
run and its varied values), before anything runs: a bad value is refused (UsageError,
exit 2) before any network exists, and so are two values of a key that make one run.
"""

import itertools
import json
import math
import os
import re
import shutil

from bufferbloat.core.errors import UsageError
from bufferbloat.core.params import REPEAT_LIMITS, check_range, env_number
from bufferbloat.results.records import superseded_why
from bufferbloat.results.records_layout import RESULT_FILE
from bufferbloat.run import derive, identity
from bufferbloat.run.resolved import resolve_run

_UNSAFE = re.compile(r"[^A-Za-z0-9_.,=+-]")


def parse_vary(items):
    """``["key=v1,v2", ...]`` -> {key: [v1, v2]} (values are strings until validated);
    an empty value (``20,,100``, a trailing comma) is refused, never dropped."""
    out = {}
    for item in items or []:
        key, sep, values = item.partition("=")
        key = key.strip()
        vals = [v.strip() for v in values.split(",")]
        if not sep or not key or not values.strip():
            raise UsageError(f"invalid --vary {item!r} (expected key=v1,v2,...)")
        if "" in vals:
            raise UsageError(f"invalid --vary {item!r}: an empty value in the list of "
                             f"{key} (expected key=v1,v2,... with no empty value)")
        if key in out:
            raise UsageError(f"--vary {key} given twice")
        out[key] = vals
    return out


#: The most runs one sweep may hold (its varied values' product x repetitions), counted
#: before its points are built: a mistyped --vary (1000 x 1000 values) is refused at
#: once instead of filling the memory. Env BUFFERBLOAT_MAX_SWEEP_RUNS overrides it.
MAX_SWEEP_RUNS = 10_000
MAX_SWEEP_RUNS_ENV = "BUFFERBLOAT_MAX_SWEEP_RUNS"
MAX_SWEEP_RUNS_LIMITS = (1, 10_000_000)


def max_sweep_runs():
    """The most runs a sweep may hold (env BUFFERBLOAT_MAX_SWEEP_RUNS, else
    MAX_SWEEP_RUNS)."""
    lo, hi = MAX_SWEEP_RUNS_LIMITS
    return env_number(MAX_SWEEP_RUNS_ENV, MAX_SWEEP_RUNS, lo, hi,
                      f"a number of runs, {lo} to {hi:,}", conv=int)


def check_sweep_size(vary, repeat=1, what="--vary"):
    """The number of runs of ``vary`` x ``repeat``, counted without building them;
    UsageError when it is above :func:`max_sweep_runs`."""
    limit = max_sweep_runs()
    sizes = [len(v) for v in vary.values()]
    runs = math.prod(sizes) * int(repeat)
    if runs > limit:
        shape = " x ".join(map(str, sizes)) or "1"
        raise UsageError(f"{what}: a sweep of {runs:,} runs ({shape} values x {repeat} "
                         f"repetition(s)) is above the limit of {limit:,} runs (env "
                         f"{MAX_SWEEP_RUNS_ENV} sets another)")
    return runs


class Point:
    """One point of a sweep: ``run``, its :class:`~bufferbloat.run.resolved.ResolvedRun`
    (a derived knob at a stand-in value until its provider has run: :mod:`.derive`),
    the values ``varied`` to make it, and the ``overrides`` as asked."""

    __slots__ = ("overrides", "run", "varied")

    def __init__(self, run, varied, overrides):
        self.run, self.varied, self.overrides = run, dict(varied), dict(overrides)

    @property
    def scn(self):
        return self.run.scn

    @property
    def rep(self):
        return self.run.rep

    @property
    def label(self):
        """``SCENARIO KEY=VALUE ... rep N``."""
        varied = " ".join(f"{k}={v}" for k, v in self.varied.items()) or "(defaults)"
        return f"{self.scn.name} {varied} rep {self.rep}"


def plan_points(todo, quick=False, duration_s=None):
    """[:class:`Point`] of ``todo`` = [(scenario, overrides, varied, rep)], each
    resolved once, in ``todo``'s order (bad input: UsageError before anything runs)."""
    return [Point(resolve_run(scn, derive.placeholders(scn, overrides), quick=quick,
                              duration_s=duration_s, rep=rep), varied, overrides)
            for scn, overrides, varied, rep in todo]


def plan_sweep(scn, vary, repeat=None, base=None, quick=False, duration_s=None):
    """Every point of ``scn`` x ``vary`` x ``repeat`` (None: the scenario's own
    repetitions) with ``base`` (--set) under it, resolved once (:func:`plan_points`).
    Refused (UsageError, exit 2, naming the key): a key both varied and set, a sweep
    above :func:`max_sweep_runs`, a bad value, and two values of a key that make the
    same run (``20,20``, ``20,20.0``)."""
    base = dict(base or {})
    both = sorted(set(vary) & set(base))
    if both:
        raise UsageError(f"{both[0]} is both set (--set {both[0]}={base[both[0]]}) and "
                         f"varied (--vary, or the scenario's own sweep): give it in one "
                         "of them")
    repeat = scn.repeat if repeat is None else repeat
    planned = plan_points([(scn, dict(base, **o), o, rep) for o, rep in points(vary, repeat)],
                          quick=quick, duration_s=duration_s)
    seen = {}
    for point in planned:
        other = seen.setdefault(point.run.key, point)
        if other is not point:
            key = next((k for k in vary if other.varied[k] != point.varied[k]), None) \
                or next(k for k in vary if len(set(vary[k])) < len(vary[k]))
            raise UsageError(f"invalid --vary {key}: {other.varied[key]!r} and "
                             f"{point.varied[key]!r} are the same value (one run would "
                             "be recorded twice)")
    return planned


def points(vary, repeat=1):
    """[(overrides, rep)] for the cartesian product of ``vary`` x ``repeat`` (refused
    above :func:`max_sweep_runs`, counted first)."""
    check_range("repeat", repeat, *REPEAT_LIMITS)
    check_sweep_size(vary, repeat, what="sweep")
    keys = list(vary)
    combos = itertools.product(*(vary[k] for k in keys)) if keys else [()]
    return [(dict(zip(keys, combo)), rep) for combo in combos
            for rep in range(1, int(repeat) + 1)]


def config_dir_name(config):
    """``PROFILE-SHORTKEY`` of a configuration (its repetitions share it)."""
    return f"{config['profile']}-{identity.short(identity.config_key(config))}"


def point_dir(root, varied, rep, config=None):
    """The directory of one point: its varied values (readable), then, given its
    configuration, the profile and short configuration key, then ``rep-N``."""
    name = ",".join(f"{k}={v}" for k, v in sorted(varied.items())) or "default"
    parts = [root, _UNSAFE.sub("_", name)]
    if config is not None:
        parts.append(config_dir_name(config))
    return os.path.join(*parts, f"rep-{rep}")


def set_aside(path):
    """True for a degraded attempt a sweep set aside (``rep-N.degraded-K``)."""
    return re.search(r"\.degraded-\d+$", os.path.normpath(str(path))) is not None


def set_aside_degraded(path):
    """Rename the degraded run in ``path`` to ``path.degraded-K`` (the first K free);
    returns the new directory."""
    return set_aside_as(path, "degraded")


def set_aside_as(path, why):
    """Rename the run in ``path`` to ``path.WHY-K`` (the first K free); returns it."""
    for k in itertools.count(1):
        target = f"{path}.{why}-{k}"
        if not os.path.exists(target):
            os.rename(path, target)
            return target


def read_record(path):
    """``path``/result.json as a dict, or {} when there is no readable record."""
    try:
        with open(os.path.join(path, RESULT_FILE)) as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return {}
    return rec if isinstance(rec, dict) else {}


def recorded(path):
    """(status, run_key) recorded in ``path``/result.json; (None, None) when there is
    no readable record. An ``ok`` run a fix made obsolete reads ``superseded``
    (:func:`~bufferbloat.results.records.superseded_why`)."""
    rec = read_record(path)
    status = rec.get("status")
    if status == "ok" and superseded_why(rec):
        status = "superseded"
    return status, rec.get("run_key")


def _candidates(path):
    """``path``, ``path.2``, ``path.3``...: where a point's run may be."""
    yield path
    for n in itertools.count(2):
        yield f"{path}.{n}"


def recorded_ok(path, key):
    """The directory (``path``, ``path.2``...) holding the run ``key`` recorded ``ok``,
    or None; reads only (:func:`place` decides, and clears failed attempts)."""
    for candidate in _candidates(path):
        if not os.path.exists(candidate):
            return None
        if recorded(candidate) == ("ok", key):
            return candidate


def overhead_of(rec, duration_s):
    """What a recorded run cost beyond its traffic (its ``wall_s`` - ``duration_s``), s,
    or None when its record has no finite wall time. (The run's own wall time, its
    last attempt's: a sweep's entry also counts degraded attempts and dispatch.)"""
    wall = rec.get("wall_s")
    if isinstance(wall, bool) or not isinstance(wall, (int, float)) or not math.isfinite(wall):
        return None
    return max(0.0, float(wall) - float(duration_s))


def place(path, key):
    """Where the run ``key`` goes, starting at ``path``: (directory, reuse). ``reuse``
    when a directory holds this run recorded ``ok``; a directory holding an attempt of
    this run that did not end ok (or no readable record) is emptied and used; one
    holding another run is skipped (``path.2``, ``path.3``...), never overwritten."""
    for candidate in _candidates(path):
        if not os.path.exists(candidate):
            return candidate, False
        status, rec_key = recorded(candidate)
        if status is None and not os.path.exists(os.path.join(candidate, RESULT_FILE)):
            shutil.rmtree(candidate)            # a run that died before its first record
            return candidate, False
        if rec_key == key:
            if status == "ok":
                return candidate, True
            if status == "superseded":          # kept, out of the way and unread
                set_aside_as(candidate, "superseded")
                return candidate, False
            shutil.rmtree(candidate)            # a failed or interrupted attempt
            return candidate, False
