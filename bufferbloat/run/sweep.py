"""Parameter sweeps: every point of a plan (:mod:`.plan`) run, resumable, with progress.

:class:`SweepRunner` runs the planned points: it skips the points recorded already with
the same run key, hands the others to an executor (:mod:`.executor`: here, one at a
time, or on Dask workers), each under its stall watchdog and rerun while degraded
(:mod:`.watch`), and writes ``OUT/SCENARIO/sweep/index.json`` (:mod:`.index`) after
every point, with the time left estimated from what the points so far cost.
"""

import os
import statistics
import time

from bufferbloat.core.atomic import write_json_atomic
from bufferbloat.core.errors import UsageError
from bufferbloat.results.health import network_of, verdict_of
from bufferbloat.run import derive
from bufferbloat.run.executor import Job, SerialExecutor
from bufferbloat.run.index import INDEX_FILE, group_configs
from bufferbloat.run.plan import (
    Point,
    config_dir_name,
    overhead_of,
    place,
    plan_sweep,
    point_dir,
    read_record,
    recorded_ok,
    set_aside_degraded,
)
from bufferbloat.run.precision import judge
from bufferbloat.run.watch import run_one, stall_limit_s

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


class SweepRunner:
    """Runs the planned points of a sweep (or of run-all) with progress (i/n, elapsed,
    the time left from the remaining points' durations, :func:`time_left`), skipping
    points already recorded as ok with the same run key, going on past failed and
    stalled ones (``stall_limit(config)``: seconds, or None for no watchdog). A degraded
    point is set aside (``rep-N.degraded-K``, listed in its entry's
    ``degraded_attempts``) and run again up to ``retries`` times, each attempt under its
    own watchdog. Each point goes to ``OUT/SCENARIO/sweep/<varied>/<profile>-<key>/rep-N``;
    ``runner(run, run_dir=..., log=...)`` runs its resolved run there
    (:func:`bufferbloat.run.engine.run_resolved`).

    ``executor`` (:mod:`.executor`; default: :class:`~.executor.SerialExecutor`) runs
    the points: at most its ``room()`` at a time; a point whose knobs are derived from
    another's result waits until its provider is recorded, or, if that never comes,
    until no point is in flight (then it fails as in a serial sweep). Writes
    ``index_path`` after every point, its entries in the points' order whatever the
    order they finish in."""

    def __init__(self, planned, out_root, runner, index_path, meta, log=print,
                 stall_limit=stall_limit_s, retries=0, executor=None, precision=None):
        # points whose knobs come from another point's result run after it (derive.py)
        self.points = derive.providers_first(planned)
        self.out_root, self.runner, self.index_path, self.meta = (out_root, runner,
                                                                   index_path, meta)
        self.log, self.stall_limit, self.retries = log, stall_limit, retries
        self.executor = executor or SerialExecutor(run_one, log)
        #: {position: index entry} of the points planned or done so far
        self.entries = {}
        self.failed = 0
        #: [(scenario, s beyond its traffic)] of the points run or recorded so far
        self.overheads = []
        #: positions of the points recorded before this sweep started
        self.done_before = set()
        self.t0 = time.monotonic()
        #: positions still to plan or run
        self.pending = []
        #: ``--precision``: the rule (:mod:`.precision`), each configuration's positions
        #: and its verdict once it stops
        self.precision = precision
        self.groups = {}
        self.judged = {}
        if precision is not None:
            for pos, point in enumerate(self.points):
                if not point.scn.derived:      # D keeps its own repetitions
                    self.groups.setdefault(point.run.config_key, []).append(pos)

    @property
    def n(self):
        return len(self.points)

    def run(self):
        """Run every point; returns (index entries, number failed or stalled)."""
        os.makedirs(os.path.dirname(self.index_path), exist_ok=True)
        self.t0 = time.monotonic()
        self._count_recorded()
        executor, pending = self.executor, self.pending
        pending[:] = range(self.n)
        try:
            while pending or executor.busy():
                while pending and executor.room() > 0:
                    point = self.points[pending[0]]
                    if derive.needs(point.scn, point.overrides) and executor.busy() and \
                            not self._provider_recorded(point):
                        break                       # its provider may still be running
                    pos = pending.pop(0)
                    job = self._plan(pos)
                    if job is not None:
                        job.started = time.monotonic()
                        executor.submit(job)
                    else:
                        self._ended(pos)
                if executor.busy():
                    job, done = executor.next_done()
                    self._record(job, done)
                    self._ended(job.pos)
        except KeyboardInterrupt:
            for job in executor.stop():
                self.entries[job.pos] = dict(job.entry, status="interrupted")
            self._save()
            raise
        self._save()
        return [self.entries[k] for k in sorted(self.entries)], self.failed

    def _ended(self, pos):
        """A point ended (ran, was recorded already, or failed): with ``--precision``,
        once every repetition of its configuration has, judge it and add what it needs
        (:func:`bufferbloat.run.precision.judge`)."""
        if self.precision is None:
            return
        point = self.points[pos]
        key = point.run.config_key
        group = self.groups.get(key)
        if group is None:
            return
        if key in self.judged or any(p not in self.entries for p in group):
            return
        dirs = [self.entries[p].get("run_dir") for p in group
                if self.entries[p].get("status") == "ok" and self.entries[p].get("run_dir")]
        verdict = judge(self.precision, dirs, len(group))
        if verdict["stop"]:
            self.judged[key] = verdict
            widths = "; ".join(
                f"{m} {c['mean']:.4g} +- {c['half_width']:.2g}" if c.get("half_width")
                else f"{m} {c['mean']}" for m, c in verdict["metrics"].items())
            self.log(f"  {point.label.rsplit(' rep ', 1)[0]}: {verdict['why']} after "
                     f"{verdict['runs']} healthy of {len(group)} runs ({widths})")
            return
        last = max(self.points[p].rep for p in group)
        for rep in range(last + 1, last + 1 + verdict["more"]):
            added = Point(point.run.again(rep=rep), point.varied, point.overrides)
            self.points.append(added)
            group.append(len(self.points) - 1)
            self.pending.append(len(self.points) - 1)
        self.log(f"  {point.label.rsplit(' rep ', 1)[0]}: {verdict['runs']} healthy "
                 f"runs are not precise enough yet: {verdict['more']} more")

    def _root(self, point):
        return os.path.join(self.out_root, point.scn.name, "sweep")

    def _save(self):
        index = [self.entries[k] for k in sorted(self.entries)]
        quick = bool(self.points) and self.points[0].run.quick
        extra = {}
        if self.precision is not None:
            extra["precision"] = {"rule": self.precision.describe(), "configs": {
                key: {k: v[k] for k in ("why", "runs", "metrics")}
                for key, v in self.judged.items()}}
        nets = [e["network"]["reused"] for e in index if e.get("network")]
        write_json_atomic(self.index_path, dict(
            self.meta, points=self.n, profile="quick" if quick else "full",
            executor=self.executor.describe(), wall_s=time.monotonic() - self.t0,
            done=index, configs=group_configs(index),
            networks={"reused": sum(nets), "built": len(nets) - sum(nets)}, **extra))

    def _count_recorded(self):
        """The points recorded already (read only; a derived point's key is known only
        once its provider ran): they are not waiting, and what they cost tells what the
        rest will, wherever they sit in the order."""
        for pos, point in enumerate(self.points):
            if derive.needs(point.scn, point.overrides):
                continue
            run = point.run
            found = recorded_ok(point_dir(self._root(point), point.varied, run.rep,
                                          run.config), run.key)
            if found:
                self.done_before.add(pos)
                over = overhead_of(read_record(found), run.duration_s)
                if over is not None:
                    self.overheads.append((run.name, over))

    def _left_text(self, pos):
        waiting = [(p.scn.name, float(p.run.duration_s))
                   for k, p in enumerate(self.points)
                   if k >= pos and k not in self.done_before]
        left, how = time_left(waiting, self.overheads)
        slots = max(1, self.executor.room() + self.executor.busy())
        if slots > 1:
            return f"~{left / slots:.0f} s left: {how}, over {slots} workers"
        return f"~{left:.0f} s left: {how}"

    def _filled(self, point):
        """The point's overrides with every derived knob set from its provider's record;
        UsageError when the provider is not recorded."""
        run = point.run
        return derive.fill(run.scn, point.overrides, point.varied, run.rep,
                           self._root(point), point_dir, quick=run.quick,
                           duration_s=run.asked_duration_s)

    def _provider_recorded(self, point):
        try:
            self._filled(point)
            return True
        except UsageError:
            return False

    def _plan(self, pos):
        """The point at ``pos``: a Job to run, or None when it is recorded already."""
        point, i, n, log = self.points[pos], pos + 1, self.n, self.log
        run, label = point.run, point.label
        if derive.needs(point.scn, point.overrides):
            try:
                # resolved again: its stand-in value made the first one
                run = run.again(overrides=self._filled(point))
            except UsageError as exc:     # its provider failed or is missing: this point
                self.entries[pos] = {"scenario": run.name,           # fails
                                     "overrides": point.overrides,
                                     "varied": dict(point.varied), "rep": run.rep,
                                     "status": "failed", "error": str(exc)}
                self.failed += 1
                log(f"[{i}/{n}] {label}: FAILED: {exc}")
                self._save()
                return None
        path, reuse = place(point_dir(self._root(point), point.varied, run.rep, run.config),
                            run.key)
        entry = {"scenario": run.name, "overrides": run.overrides,
                 "varied": dict(point.varied), "rep": run.rep, "run_dir": path,
                 "run_key": run.key, "config_key": run.config_key,
                 "profile": run.profile, "duration_s": run.duration_s,
                 "scaling": run.config["scaling"]}
        tag = config_dir_name(run.config)
        if reuse:
            rec = read_record(path)
            self.entries[pos] = dict(entry, status="ok", resumed=True, health=verdict_of(rec))
            # what it cost when it ran tells what the points left will cost (counted
            # up front, unless its key was known only now)
            over = overhead_of(rec, run.duration_s)
            if pos not in self.done_before and over is not None:
                self.overheads.append((run.name, over))
            log(f"[{i}/{n}] {label}: already recorded ({tag})")
            return None
        limit = self.stall_limit(run.config) if self.stall_limit else None
        log(f"[{i}/{n}] {label} (elapsed {time.monotonic() - self.t0:.0f} s, done "
            f"{len(self.entries)}, in flight {self.executor.busy()}, "
            f"{self._left_text(pos)}; {tag}"
            + (f", stall limit {limit:.4g} s)" if limit else ")"))

        def go(run=run, path=path):
            self.runner(run, run_dir=path, log=log)
            return path

        def aside(run_dir, entry=entry):   # listed at once: a failed rerun keeps the list
            kept = set_aside_degraded(run_dir)
            entry.setdefault("degraded_attempts", []).append(kept)
            return kept
        spec = dict(run.spec(), limit_s=limit, label=label)
        return Job(pos, label, entry, path, run.key, go, spec, limit, self.retries, aside,
                   float(run.duration_s), run=run)

    def _record(self, job, done):
        entry, log = job.entry, self.log
        entry["status"] = done.status
        for k in ("worker", "machine", "where"):
            if getattr(done, k):
                entry[k] = getattr(done, k)
        sent = dict(getattr(done, "sent", None) or {})
        if sent.get("warning"):
            entry.setdefault("warnings", []).append(sent.pop("warning"))
        entry.update(sent)
        where = f" on {done.worker}" if done.worker else ""
        if done.status == "ok":
            entry["health"] = done.health
            if done.health == "degraded":
                log(f"  DEGRADED: the emulator fell behind ({job.path}/result.json: health)")
            rec = read_record(job.path)
            rec_key = rec.get("run_key")
            if network_of(rec) is not None:    # kept from the point before, or built
                entry["network"] = network_of(rec)
            if rec_key != job.key:
                log(f"  warning: {job.path} records run_key {rec_key}, the sweep expected "
                    f"{job.key}")
        elif done.status == "stalled":
            entry["error"] = f"stalled: {done.exc}"
            self.failed += 1
            log(f"  STALLED{where}: {done.exc}; going on with the next point")
        else:
            entry["error"] = (str(done.exc) if done.plain
                              else f"{type(done.exc).__name__}: {done.exc}")
            self.failed += 1
            log(f"  FAILED{where}: {job.label}: {entry['error']}")
        entry["wall_s"] = round(time.monotonic() - job.started, 3)
        if entry["status"] == "ok":   # a failed point's time says little of the next
            self.overheads.append((job.run.name, max(0.0, entry["wall_s"] - job.duration_s)))
        self.entries[job.pos] = entry
        # every point's outcome, as it ends: its health and what it cost beyond its traffic
        outcome = entry["status"] + (f", {entry['health']}" if entry.get("health") else "")
        elapsed = time.monotonic() - self.t0
        log(f"  [{len(self.entries)}/{self.n} done, {self.executor.busy()} in flight] "
            f"{job.label}: {outcome}{where}, {entry['wall_s']:.0f} s "
            f"({entry['wall_s'] - job.duration_s:.0f} s beyond its {job.duration_s:g} s of "
            f"traffic; elapsed {elapsed:.0f} s)")
        self._save()


def run_points(planned, out_root, runner, index_path, meta, log=print,
               stall_limit=stall_limit_s, retries=0, executor=None, precision=None):
    """Run the planned points (:class:`SweepRunner`); returns (index entries, number
    failed or stalled)."""
    return SweepRunner(planned, out_root, runner, index_path, meta, log=log,
                       stall_limit=stall_limit, retries=retries, executor=executor,
                       precision=precision).run()



def run_sweep(scn, vary, repeat, out_root, runner, quick=False, duration_s=None,
              base=None, log=print, stall_limit=stall_limit_s, retries=0, executor=None,
              planned=None, precision=None):
    """Run every missing point of ``scn`` x ``vary`` x ``repeat`` (None: the scenario's
    own repetitions); returns (index path, number of failed or stalled points).
    ``planned``: its points as :func:`~bufferbloat.run.plan.plan_sweep` made them (made
    here when not given). Every point is resolved before the first runs, so a bad value
    stops the sweep before any network exists."""
    repeat = scn.repeat if repeat is None else repeat
    if precision is not None:      # each configuration starts with its first stage
        repeat = precision.min_reps
    if planned is None:
        planned = plan_sweep(scn, vary, repeat, base, quick=quick, duration_s=duration_s)
    index_path = os.path.join(out_root, scn.name, "sweep", INDEX_FILE)
    meta = {"scenario": scn.name, "vary": vary, "repeat": repeat, "base": dict(base or {})}
    _, failed = run_points(planned, out_root, runner, index_path, meta, log=log,
                           stall_limit=stall_limit, retries=retries, executor=executor,
                           precision=precision)
    return index_path, failed
