"""Parameter sweeps: the cartesian product of varied keys x repetitions, resumable, each
point under a watchdog.

A point is one run of a fully resolved configuration (:mod:`.identity`). It runs in its
own directory ``OUT/SCENARIO/sweep/KEY=VALUE,.../PROFILE-CONFIGKEY/rep-N``: the varied
values, the profile (quick/full) and the first 12 hex digits of the configuration's key
(everything the run uses but the repetition: every parameter after the profile, variants,
``--set`` and rate scaling, the duration, warm-up and sampling period). A point is reused
only when its directory holds a result with the same ``run_key`` and status ``ok``; a
failed or interrupted attempt of the same run is run again in place; a directory holding
another configuration's run is never touched (the point runs beside it, ``rep-N.2``...).
So a quick sweep is not reused by the full one, a changed ``--set``, ``--time``,
``BUFFERBLOAT_MAX_MBIT`` or scenario definition reruns, and the same command run again
runs only its missing points. ``OUT/SCENARIO/sweep/index.json`` lists every point with
its status and keys, and groups the runs by configuration (``configs``).

Watchdog: a point that runs longer than its own duration plus a margin
(:func:`stall_limit_s`: duration + the flows' grace period + an allowance for setup and
teardown, plus 50 %) is ended (SIGALRM raises :class:`PointStalled` in the run, which
tears its network down and records it ``failed`` with the reason) and reported
``stalled``; the sweep goes on with the next point, as for a failed one.
"""

import contextlib
import itertools
import json
import math
import os
import re
import shutil
import signal
import statistics
import time

from bufferbloat.core.atomic import write_json_atomic
from bufferbloat.core.errors import UsageError
from bufferbloat.core.params import REPEAT_LIMITS, check_range, env_number
from bufferbloat.core.signals import alarm
from bufferbloat.results.health import headline, verdict_of
from bufferbloat.results.records import RESULT_FILE, superseded_why
from bufferbloat.run import derive, identity
from bufferbloat.run.executor import Job, SerialExecutor

_UNSAFE = re.compile(r"[^A-Za-z0-9_.,=+-]")
#: Seconds a point may take beyond its traffic and the flows' grace period (network
#: build, teardown, metrics; ~20 s at most measured in the TCG VM); env overrides.
STALL_ALLOWANCE_S = 60.0
STALL_ALLOWANCE_ENV = "BUFFERBLOAT_STALL_ALLOWANCE_S"
#: Env: a fixed stall limit in seconds instead of the formula (tests, odd machines).
STALL_LIMIT_ENV = "BUFFERBLOAT_STALL_LIMIT_S"
#: ... plus this share of the whole, for a slow machine.
STALL_MARGIN = 0.5
#: A stall swallowed by a broad ``except`` in the run is raised again this much later.
STALL_REFIRE_S = 10.0


#: A run that comes out degraded (the emulator fell behind: docs/HEALTH.md) is kept,
#: marked, set aside, and run again up to this many times (``--retry-degraded``, env
#: BUFFERBLOAT_RETRY_DEGRADED). Measured: a 15 s B run launching 8 flows in the TCG VM
#: started its last flow 0.6-1.2 s late on most runs and 2.3 s late on one in a CI run;
#: the rerun of such a point is usually healthy. Only the last attempt counts as the
#: point's result; the earlier ones stay on disk, degraded, left out of means.
RETRY_DEGRADED = 1
RETRY_DEGRADED_ENV = "BUFFERBLOAT_RETRY_DEGRADED"
RETRY_DEGRADED_LIMITS = (0, 10)


def retry_degraded_default():
    """The default number of reruns of a degraded run (env, else RETRY_DEGRADED)."""
    return env_number(RETRY_DEGRADED_ENV, RETRY_DEGRADED, *RETRY_DEGRADED_LIMITS,
                      "reruns of a degraded run", conv=int)


def run_until_healthy(run_once, retries, log=print, set_aside=None):
    """Call ``run_once()`` (returns a run directory) until its run is not degraded, at
    most 1 + ``retries`` times. Returns (run_dir, [the degraded attempts' directories]).
    ``set_aside(run_dir)`` -> new directory: moves a degraded attempt out of the way
    first (a sweep's point directory is fixed); without it each attempt keeps its own."""
    aside = []
    for attempt in range(retries + 1):
        run_dir = run_once()
        rec = read_record(run_dir)
        if attempt == retries or verdict_of(rec) != "degraded":
            return run_dir, aside
        kept = set_aside(run_dir) if set_aside else run_dir
        aside.append(kept)
        log(f"  DEGRADED, kept as {kept} ({headline(rec.get('health'))}); running it "
            f"again ({attempt + 1}/{retries})")
    raise AssertionError("unreachable")


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


class PointStalled(RuntimeError):
    """A point ran past its stall limit (raised in the run by the watchdog)."""


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


def check_vary(scn, vary, base=None, quick=False, duration_s=None):
    """Each varied value validated on its own (the other keys at their first value: a
    configuration per value, not per point) and no two values of a key that make the
    same run (``20,20``, ``20,20.0``); a key both varied and in ``base`` (--set) is
    refused. UsageError (exit 2) naming the key."""
    base = dict(base or {})
    both = sorted(set(vary) & set(base))
    if both:
        raise UsageError(f"{both[0]} is both set (--set {both[0]}={base[both[0]]}) and "
                         f"varied (--vary, or the scenario's own sweep): give it in one "
                         "of them")
    first = {k: v[0] for k, v in vary.items()}
    for key, values in vary.items():
        seen = {}
        for value in values:
            overrides = dict(base)
            overrides.update(first)
            overrides[key] = value
            config = identity.run_config(scn, derive.placeholders(scn, overrides),
                                         quick=quick, duration_s=duration_s)
            ckey = identity.config_key(config)
            if ckey in seen:
                raise UsageError(f"invalid --vary {key}: {seen[ckey]!r} and {value!r} are "
                                 "the same value (one run would be recorded twice)")
            seen[ckey] = value


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


#: A sweep's (and run-all's) index of its points, in its directory
INDEX_FILE = "index.json"


#: The JSON type of an index's fields and of its entries' (checked when present; every
#: index has ``done``)
_INDEX_TYPES = {"done": list, "vary": dict, "base": dict, "configs": dict,
                "catalogue": list, "scenario": str, "profile": str}
_ENTRY_TYPES = {"scenario": str, "run_dir": str, "overrides": dict, "varied": dict,
                "rep": int, "status": str, "run_key": str, "config_key": str,
                "profile": str, "health": str, "error": str, "worker": str,
                "machine": str, "where": str,
                "degraded_attempts": list}


def read_index(path):
    """The index (``path``/index.json) as a dict, or None when ``path`` holds none;
    UsageError naming the file when it is not JSON, not an object, lacks ``done`` or
    holds a field (or an entry's field) of the wrong type: a corrupt index is bad
    input, refused rather than read in part."""
    index_path = os.path.join(str(path), INDEX_FILE)
    if not os.path.isfile(index_path):
        return None
    try:
        with open(index_path) as f:
            index = json.load(f)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{index_path}: not valid JSON ({exc})") from None
    if not isinstance(index, dict):
        raise UsageError(f"{index_path}: not a JSON object")
    if "done" not in index:
        raise UsageError(f"{index_path}: corrupt index: no 'done' field (its runs)")
    _check_types(index_path, "", index, _INDEX_TYPES)
    for i, entry in enumerate(index["done"]):
        if not isinstance(entry, dict):
            raise UsageError(f"{index_path}: corrupt index: done[{i}] is "
                             f"{type(entry).__name__}, not an object")
        _check_types(index_path, f"done[{i}].", entry, _ENTRY_TYPES)
    return index


def _check_types(path, where, obj, types):
    for key, kind in types.items():
        value = obj.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kind)):
            raise UsageError(f"{path}: corrupt index: {where}{key} is "
                             f"{type(value).__name__} {value!r:.40}, not "
                             f"{ {dict: 'an object', list: 'an array', str: 'text', int: 'an integer'}[kind]}")


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


def stall_limit_s(config, allowance_s=None, margin=STALL_MARGIN):
    """Seconds after which a point of ``config`` counts as stalled: (duration + the
    flows' grace period + ``allowance_s``) x (1 + ``margin``). ``allowance_s`` defaults
    to env BUFFERBLOAT_STALL_ALLOWANCE_S, else STALL_ALLOWANCE_S; env
    BUFFERBLOAT_STALL_LIMIT_S replaces the whole formula."""
    from bufferbloat.run.engine import FLOW_GRACE_S  # noqa: PLC0415 - not the engine's imports for a limit
    fixed = _env_seconds(STALL_LIMIT_ENV, None)
    if fixed:
        return fixed
    if allowance_s is None:
        allowance_s = _env_seconds(STALL_ALLOWANCE_ENV, STALL_ALLOWANCE_S)
    return (float(config["duration_s"]) + FLOW_GRACE_S + allowance_s) * (1.0 + margin)


def _env_seconds(name, default):
    """Env ``name`` as seconds (0 to 86400), or ``default`` when unset or empty."""
    return env_number(name, default, 0, 86400, "seconds, 0 to 86400")


@contextlib.contextmanager
def watchdog(limit_s, what="the point"):
    """Raise :class:`PointStalled` in the main thread once ``limit_s`` seconds have
    passed (SIGALRM), and every STALL_REFIRE_S after that until the block ends (a broad
    ``except`` in the run may swallow one). Builds and teardowns hold it like SIGINT
    (:func:`bufferbloat.core.signals.deferred_signals`). Outside the main thread, or with no
    limit, a no-op."""
    def fire(_sig, _frame):
        signal.setitimer(signal.ITIMER_REAL, STALL_REFIRE_S)
        raise PointStalled(f"{what} still running after {limit_s:.4g} s (its stall "
                           "limit): ended")
    with alarm(limit_s, fire):
        yield


def run_sweep(scn, vary, repeat, out_root, run_point, quick=False, duration_s=None,
              base=None, log=print, stall_limit=stall_limit_s, retries=0, executor=None):
    """Run every missing point of ``scn`` x ``vary`` x ``repeat`` (None: the scenario's
    own repetitions); returns (index path, number of failed or stalled points). Every
    point is validated before the first runs, so a bad value stops the sweep before any
    network exists."""
    repeat = scn.repeat if repeat is None else repeat
    todo = [(scn, dict(base or {}, **o), o, rep) for o, rep in points(vary, repeat)]
    root = os.path.join(out_root, scn.name, "sweep")
    index_path = os.path.join(root, INDEX_FILE)
    meta = {"scenario": scn.name, "vary": vary, "repeat": repeat, "base": dict(base or {})}
    done, failed = run_points(todo, out_root, run_point, index_path, meta, quick=quick,
                              duration_s=duration_s, log=log, stall_limit=stall_limit,
                              retries=retries, executor=executor)
    return index_path, failed


class Outcome:
    """How one point ended (:func:`run_one`): ``status`` ok, stalled or failed; its run
    directory and health verdict when ok; the exception otherwise (``plain``: its text is
    the whole message, no exception type in front). On a cluster, the ``worker``, its
    ``machine`` and ``where`` it ran (host or VM)."""

    def __init__(self, status, run_dir=None, health=None, exc=None, plain=False):
        self.status, self.run_dir, self.health, self.exc = status, run_dir, health, exc
        self.plain = plain
        self.worker = self.machine = self.where = None


def run_one(run, label, limit, retries, log=print, set_aside=None):
    """One point, for ``run`` and ``sweep`` alike: ``run()`` (returns its run directory)
    under a stall watchdog of ``limit`` s (None: none), again while it comes out
    degraded, up to ``retries`` times (:func:`run_until_healthy`). A stalled or failed
    point is returned, not raised: the others go on; UsageError and KeyboardInterrupt
    are raised. Returns an :class:`Outcome`."""
    def once():
        with watchdog(limit, label):
            return run()
    try:
        run_dir, _ = run_until_healthy(once, retries, log=log, set_aside=set_aside)
    except (UsageError, KeyboardInterrupt):
        raise
    except PointStalled as exc:
        return Outcome("stalled", exc=exc)
    except Exception as exc:  # noqa: BLE001 - one failed point must not stop the rest
        return Outcome("failed", exc=exc)
    return Outcome("ok", run_dir, verdict_of(read_record(run_dir)))


#: the time a point takes beyond its traffic (build, start, sampling flush, metrics,
#: teardown), s, assumed until a point has been measured
POINT_OVERHEAD_S = 15.0


def time_left(waiting, overheads):
    """(seconds, how) the points still to run will take. ``waiting``: [(scenario,
    duration_s)] of those points (durations known from their configurations);
    ``overheads``: [(scenario, s)] of the points run or recorded so far (wall time -
    duration). Each waiting point costs its traffic plus the median overhead of its own
    scenario's points (a C point at 20-80 flows costs 30-70 s beyond its traffic, an A
    point 8-16), else of all points, else :data:`POINT_OVERHEAD_S`; ``how`` says so in
    words."""
    by_scn = {}
    for name, over in overheads:
        by_scn.setdefault(name, []).append(over)
    every = [over for _, over in overheads]
    per_all = statistics.median(every) if every else POINT_OVERHEAD_S
    pers = [statistics.median(by_scn[name]) if by_scn.get(name) else per_all
            for name, _ in waiting]
    traffic = float(sum(d for _, d in waiting))
    if not pers:
        return 0.0, "no points left"
    lo, hi = min(pers), max(pers)
    each = f"{lo:.0f} s" if round(lo) == round(hi) else f"{lo:.0f}-{hi:.0f} s"
    names = {name for name, _ in waiting}
    if not every:
        basis = "assumed"
    elif all(by_scn.get(name) for name in names):
        basis = (f"median of {len(by_scn[next(iter(names))])} run" if len(names) == 1
                 else "its scenario's median")
    elif any(by_scn.get(name) for name in names):
        basis = "its scenario's median, else of all"
    else:
        basis = f"median of {len(every)} run"
    return traffic + sum(pers), (
        f"{len(waiting)} points: {traffic:.0f} s of traffic + {each} each beyond it, "
        f"{basis}")


def run_points(todo, out_root, run_point, index_path, meta, quick=False, duration_s=None,
               log=print, stall_limit=stall_limit_s, retries=0, executor=None):
    """Run ``todo`` = [(scenario, overrides, varied, rep)] with progress (i/n, elapsed,
    the time left from the remaining points' durations, :func:`time_left`), skipping
    points already recorded as ok with the same run key, going on past failed and
    stalled ones (``stall_limit(config)``: seconds, or None for no watchdog). A degraded
    point is set aside (``rep-N.degraded-K``, listed in its entry's
    ``degraded_attempts``) and run again up to ``retries`` times, each attempt under its
    own watchdog. Each point goes to
    ``OUT/SCENARIO/sweep/<varied>/<profile>-<key>/rep-N``.

    ``executor`` (:mod:`.executor`; default: :class:`~.executor.SerialExecutor`) runs
    the points: at most its ``room()`` at a time; a point whose knobs are derived from
    another's result waits until its provider is recorded, or, if that never comes,
    until no point is in flight (then it fails as in a serial sweep). Writes
    ``index_path`` after every point, its entries in ``todo``'s order whatever the order
    they finish in. Returns (index entries, number failed or stalled)."""
    executor = executor or SerialExecutor(run_one, log)
    # points whose knobs come from another point's result run after it (derive.py)
    todo = derive.providers_first(todo)
    # every configuration first: validates every point before anything runs (a derived
    # knob with a stand-in value; its configuration is made again once it is known)
    configs = [identity.run_config(scn, derive.placeholders(scn, overrides), quick=quick,
                                   duration_s=duration_s, rep=rep)
               for scn, overrides, _, rep in todo]
    os.makedirs(os.path.dirname(index_path), exist_ok=True)
    entries, counts, overheads = {}, {"failed": 0}, []
    t0 = time.monotonic()
    n = len(todo)

    def save():
        index = [entries[k] for k in sorted(entries)]
        write_json_atomic(index_path, dict(meta, points=n,
                                           profile="quick" if quick else "full",
                                           executor=executor.describe(),
                                           wall_s=time.monotonic() - t0, done=index,
                                           configs=group_configs(index)))

    # the points recorded already (read only; a derived point's key is known only once
    # its provider ran): they are not waiting, and what they cost tells what the rest
    # will, wherever they sit in the order
    done_before = set()
    for pos, ((scn, overrides, varied, rep), config) in enumerate(zip(todo, configs)):
        if derive.needs(scn, overrides):
            continue
        found = recorded_ok(point_dir(os.path.join(out_root, scn.name, "sweep"), varied,
                                      rep, config), identity.run_key(config))
        if found:
            done_before.add(pos)
            over = overhead_of(read_record(found), config["duration_s"])
            if over is not None:
                overheads.append((scn.name, over))

    def left_text(pos):
        waiting = [(scn.name, float(c["duration_s"]))
                   for k, ((scn, *_), c) in enumerate(zip(todo, configs))
                   if k >= pos and k not in done_before]
        left, how = time_left(waiting, overheads)
        slots = max(1, executor.room() + executor.busy())
        if slots > 1:
            return f"~{left / slots:.0f} s left: {how}, over {slots} workers"
        return f"~{left:.0f} s left: {how}"

    def plan(pos):
        """The point at ``pos``: a Job to run, or None when it is recorded already."""
        (scn, overrides, varied, rep), config = todo[pos], configs[pos]
        i = pos + 1
        if derive.needs(scn, overrides):
            try:
                overrides = derive.fill(scn, overrides, varied, rep,
                                        os.path.join(out_root, scn.name, "sweep"),
                                        point_dir, quick=quick, duration_s=duration_s)
            except UsageError as exc:     # its provider failed or is missing: this point
                entries[pos] = {"scenario": scn.name, "overrides": overrides,  # fails
                                "varied": dict(varied), "rep": rep, "status": "failed",
                                "error": str(exc)}
                counts["failed"] += 1
                log(f"[{i}/{n}] {scn.name} {_fmt(varied)} rep {rep}: FAILED: {exc}")
                save()
                return None
            config = identity.run_config(scn, overrides, quick=quick,
                                         duration_s=duration_s, rep=rep)
        key = identity.run_key(config)
        path, reuse = place(point_dir(os.path.join(out_root, scn.name, "sweep"), varied,
                                      rep, config), key)
        entry = {"scenario": scn.name, "overrides": overrides, "varied": dict(varied),
                 "rep": rep, "run_dir": path, "run_key": key,
                 "config_key": identity.config_key(config), "profile": config["profile"],
                 "duration_s": config["duration_s"], "scaling": config["scaling"]}
        label = f"{scn.name} {_fmt(varied)} rep {rep}"
        tag = config_dir_name(config)
        if reuse:
            rec = read_record(path)
            entries[pos] = dict(entry, status="ok", resumed=True, health=verdict_of(rec))
            # what it cost when it ran tells what the points left will cost (counted
            # up front, unless its key was known only now)
            over = overhead_of(rec, config["duration_s"])
            if pos not in done_before and over is not None:
                overheads.append((scn.name, over))
            log(f"[{i}/{n}] {label}: already recorded ({tag})")
            return None
        limit = stall_limit(config) if stall_limit else None
        done_n = len(entries)
        log(f"[{i}/{n}] {label} (elapsed {time.monotonic() - t0:.0f} s, done {done_n}, "
            f"in flight {executor.busy()}, {left_text(pos)}; {tag}"
            + (f", stall limit {limit:.4g} s)" if limit else ")"))

        def run(scn=scn, overrides=overrides, path=path, rep=rep):
            run_point(scn, overrides, duration_s=duration_s, quick=quick, run_dir=path,
                      log=log, rep=rep)
            return path

        def aside(run_dir, entry=entry):   # listed at once: a failed rerun keeps the list
            kept = set_aside_degraded(run_dir)
            entry.setdefault("degraded_attempts", []).append(kept)
            return kept
        spec = {"scenario": scn.name, "overrides": overrides, "rep": rep, "quick": quick,
                "duration_s": duration_s, "limit_s": limit, "run_key": key,
                "label": label}
        job = Job(pos, label, entry, path, key, run, spec, limit, retries, aside,
                  float(config["duration_s"]))
        job.scn = scn
        return job

    def record(job, done):
        entry = job.entry
        entry["status"] = done.status
        for k in ("worker", "machine", "where"):
            if getattr(done, k):
                entry[k] = getattr(done, k)
        where = f" on {done.worker}" if done.worker else ""
        if done.status == "ok":
            entry["health"] = done.health
            if done.health == "degraded":
                log(f"  DEGRADED: the emulator fell behind ({job.path}/result.json: health)")
            rec_key = read_record(job.path).get("run_key")
            if rec_key != job.key:
                log(f"  warning: {job.path} records run_key {rec_key}, the sweep expected "
                    f"{job.key}")
        elif done.status == "stalled":
            entry["error"] = f"stalled: {done.exc}"
            counts["failed"] += 1
            log(f"  STALLED{where}: {done.exc}; going on with the next point")
        else:
            entry["error"] = (str(done.exc) if done.plain
                              else f"{type(done.exc).__name__}: {done.exc}")
            counts["failed"] += 1
            log(f"  FAILED{where}: {job.label}: {entry['error']}")
        entry["wall_s"] = round(time.monotonic() - job.started, 3)
        if entry["status"] == "ok":   # a failed point's time says little of the next
            overheads.append((job.scn.name, max(0.0, entry["wall_s"] - job.duration_s)))
        entries[job.pos] = entry
        # every point's outcome, as it ends: its health and what it cost beyond its traffic
        outcome = entry["status"] + (f", {entry['health']}" if entry.get("health") else "")
        log(f"  [{len(entries)}/{n} done, {executor.busy()} in flight] {job.label}: "
            f"{outcome}{where}, {entry['wall_s']:.0f} s ({entry['wall_s'] - job.duration_s:.0f}"
            f" s beyond its {job.duration_s:g} s of traffic; elapsed "
            f"{time.monotonic() - t0:.0f} s)")
        save()

    def provider_recorded(pos):
        scn, overrides, varied, rep = todo[pos]
        try:
            derive.fill(scn, overrides, varied, rep, os.path.join(out_root, scn.name, "sweep"),
                        point_dir, quick=quick, duration_s=duration_s)
            return True
        except UsageError:
            return False

    pending = list(range(n))
    try:
        while pending or executor.busy():
            while pending and executor.room() > 0:
                pos = pending[0]
                scn, overrides = todo[pos][0], todo[pos][1]
                if derive.needs(scn, overrides) and executor.busy() and \
                        not provider_recorded(pos):
                    break                       # its provider may still be running
                pending.pop(0)
                job = plan(pos)
                if job is not None:
                    job.started = time.monotonic()
                    executor.submit(job)
            if executor.busy():
                record(*executor.next_done())
    except KeyboardInterrupt:
        for job in executor.stop():
            entries[job.pos] = dict(job.entry, status="interrupted")
        save()
        raise
    save()
    return [entries[k] for k in sorted(entries)], counts["failed"]


def degraded(index):
    """The entries of ``index`` whose run is ok but degraded (the emulator fell behind)."""
    return [e for e in index if e.get("status") == "ok" and e.get("health") == "degraded"]


def faulty(index):
    """The entries of ``index`` whose run is ok but faulty (a part began before its due
    time: the run's fault, not the emulator's; a rerun would not clear it)."""
    return [e for e in index if e.get("status") == "ok" and e.get("health") == "faulty"]


def group_configs(entries):
    """{config_key: {scenario, varied, profile, duration_s, scaling, runs: [{rep,
    run_dir, status}]}}: the index's runs grouped by configuration."""
    out = {}
    for e in entries:
        group = out.setdefault(e.get("config_key") or "?", {
            k: e.get(k) for k in ("scenario", "varied", "overrides", "profile",
                                  "duration_s", "scaling")})
        group.setdefault("runs", []).append(
            {"rep": e.get("rep"), "run_dir": e.get("run_dir"), "status": e.get("status")})
    return out


def _fmt(varied):
    return " ".join(f"{k}={v}" for k, v in varied.items()) or "(defaults)"
