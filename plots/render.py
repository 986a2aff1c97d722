"""Figures as files, drawn once, in parallel: each run's in ``RUN/figures/``, each set's
(the study's figures, the exhaustive metric-vs-parameter plots, the tables) in its
directory's ``figures/`` as ``SCENARIO-NAME.FMT``.

``reuse``: figures drawn after what they show changed (the run's ``result.json`` and
``metrics.json``, a set's runs and index) and after the code that draws them
(``plots/``, the metrics, the theory, the scenarios) are kept rather than drawn again
(a manifest ``.drawn-*.json`` beside them says what was drawn, and asked for): the
report after ``run`` or ``sweep`` (which just drew them) and a second report cost
seconds. ``bufferbloat plot`` always draws again.

Several runs or sets are drawn in worker processes (fork: they inherit what is loaded;
one per CPU, at most 4).
"""

import concurrent.futures
import glob
import json
import multiprocessing
import os

from bufferbloat import scenarios
from bufferbloat.core.atomic import write_json_atomic
from bufferbloat.core.paths import PACKAGE_DIR
from bufferbloat.plots import (
    FIGURES,
    FIGURES_DIR,
    draw_figures,
    scenario_figures,
    study,
    sweep_figures,
    sweep_tables,
)
from bufferbloat.plots.common import as_run, save
from bufferbloat.results.records_layout import RESULT_FILE
from bufferbloat.run.index import INDEX_FILE

MAX_WORKERS = 4
_PLOTS = os.path.dirname(os.path.abspath(__file__))
_PACKAGE = str(PACKAGE_DIR)
#: the code a figure depends on: newer code draws again
CODE = [os.path.join(_PLOTS, "*.py"),
        os.path.join(os.path.dirname(os.path.abspath(scenarios.__file__)), "*.py")] + [
    os.path.join(_PACKAGE, *m.split("/")) + ".py"
    for m in ("results/metrics", "results/metrics_flows", "results/metrics_queue",
              "results/metrics_latency", "results/theory", "results/headline",
              "results/records", "results/records_csv", "results/records_layout",
              "results/records_writer", "run/scenario")]
_STATE = {}


def code_mtime():
    """The newest modification time of the code figures depend on (cached)."""
    if "code" not in _STATE:
        _STATE["code"] = max((os.path.getmtime(f) for pattern in CODE
                              for f in glob.glob(pattern)), default=0.0)
    return _STATE["code"]


def fresh(path, inputs):
    """Whether the file ``path`` exists and is newer than ``inputs`` and the code."""
    try:
        mtime = os.path.getmtime(path)
    except OSError:
        return False
    newest = max([code_mtime()] + [os.path.getmtime(p) for p in inputs if os.path.exists(p)])
    return mtime >= newest


def run_inputs(run_dir):
    """The files a run's figures are drawn from."""
    return [os.path.join(run_dir, RESULT_FILE), os.path.join(run_dir, "metrics.json")]


MANIFEST = ".drawn-{stem}.json"


def _manifest(target, stem):
    return os.path.join(target, MANIFEST.format(stem=stem))


def _reused(target, stem, inputs, asked):
    """What an earlier drawing left in ``target`` for ``stem``, when its manifest is
    fresh and it was asked for at least ``asked``: {group: {name: path}}, else None."""
    path = _manifest(target, stem)
    if not fresh(path, inputs):
        return None
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    if not set(asked) <= set(data.get("asked", [])):
        return None
    out = {group: {n: p for n, p in files.items() if os.path.isfile(p)}
           for group, files in data.get("files", {}).items()}
    listed = sum(len(v) for v in data.get("files", {}).values())
    return out if sum(len(v) for v in out.values()) == listed else None


def _remember(target, stem, asked, files):
    write_json_atomic(_manifest(target, stem), {"asked": sorted(asked), "files": files})


def run_figures(run_dir, names=None, fmt="png", reuse=False):
    """{name: path} of the run's figures in ``RUN/figures/`` (``names``: default every
    figure its data allow, the scenario's first), drawn unless ``reuse`` finds them
    fresh."""
    run = as_run(run_dir)
    order = list(dict.fromkeys(scenario_figures(run) + list(FIGURES)))
    wanted = [n for n in order if names is None or n in names]
    out_dir = os.path.join(run.dir, FIGURES_DIR)
    stem = f"run-{fmt}"
    if reuse:
        kept = _reused(out_dir, stem, run_inputs(run.dir), wanted)
        if kept is not None:
            return {n: p for n, p in kept.get("run", {}).items() if n in wanted}
    drawn = {n: save(fig, os.path.join(out_dir, f"{n}.{fmt}"), fmt)
             for n, fig in draw_figures(run, wanted).items()}
    if drawn:
        _remember(out_dir, stem, wanted, {"run": drawn})
    return drawn


def _pool(n_jobs, workers):
    workers = min(workers or MAX_WORKERS, os.cpu_count() or 1, n_jobs)
    if workers < 2:
        return None
    return concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("fork"))


def set_inputs(points, index_dir=None):
    """The files a set's figures are drawn from: its runs' and its index."""
    files = [f for p in points for f in run_inputs(p.run.dir)]
    if index_dir:
        files.append(os.path.join(index_dir, INDEX_FILE))
    return files


def set_figures(points, target, stem, fmt="png", reuse=False, exhaustive=True):
    """Draw a set's figures into ``target`` as ``STEM-NAME.FMT`` with its tables;
    returns {"study": {plot: path}, "more": {name: path}, "tables": [paths]}: the
    study's plots (:mod:`plots.study`), then (``exhaustive``) every other across-run
    figure (:func:`plots.sweep_figures.draw_all`); all of it kept when ``reuse`` finds it
    fresh."""
    inputs = set_inputs(points, os.path.dirname(target))
    names = study.declared(points)
    asked = [f"study:{n}" for n in names] + (["exhaustive"] if exhaustive else [])
    kept = _reused(target, f"{stem}-{fmt}", inputs, asked) if reuse else None
    if kept is not None and kept.get("tables"):
        return {"study": kept.get("study", {}), "more": kept.get("more", {}),
                "tables": list(kept["tables"].values())}
    path = lambda name: os.path.join(target, f"{stem}-{name}.{fmt}")  # noqa: E731
    out = {"study": {}, "more": {}}
    for name, (fig, _) in study.draw(points, names).items():
        out["study"][name] = save(fig, path(study.file_name(name)), fmt)
    if exhaustive:
        done = {study.file_name(n) for n in names}
        for name, fig in sweep_figures.draw_all(points).items():
            if name not in done:
                out["more"][name] = save(fig, path(name), fmt)
    tables = sweep_tables.write_tables(points, target, stem=f"{stem}-table")
    tables += study.write_headline_table(points, target, stem=f"{stem}-headline")
    _remember(target, f"{stem}-{fmt}", asked, dict(out, tables={os.path.basename(t): t
                                                                 for t in tables}))
    return dict(out, tables=tables)


def _each(jobs, progress, what, workers=None):
    """[fn(*args)] of ``jobs`` [(fn, args)] in order, in worker processes when there are
    several (the longest first is the caller's business: jobs are handed out in order)."""
    out = []
    pool = _pool(len(jobs), workers) if len(jobs) > 2 else None
    results = pool.map(_call, jobs) if pool else map(_call, jobs)
    try:
        for i, result in enumerate(results, 1):
            out.append(result)
            if progress:
                progress(f"{what} {i}/{len(jobs)}")
    finally:
        if pool:
            pool.shutdown()
    return out


def _call(job):
    fn, args = job
    return fn(*args)


def _set_job(i):
    points, target, stem, fmt, reuse, exhaustive = _STATE["sets"][i]
    return set_figures(points, target, stem, fmt, reuse, exhaustive)


def draw(run_jobs=(), sets=(), progress=None, workers=None):
    """([{name: path}] of ``run_jobs`` [(run_dir, names or None, fmt, reuse)],
    [set_figures(...)] of ``sets`` [(points, target, stem, fmt, reuse, exhaustive)]),
    all in one pool of worker processes (forked: they inherit the loaded points), the
    sets, which take longest, handed out first."""
    _STATE["sets"] = list(sets)
    try:
        jobs = [(_set_job, (i,)) for i in range(len(sets))]
        jobs += [(run_figures, tuple(job)) for job in run_jobs]
        done = _each(jobs, progress, "figures", workers)
    finally:
        _STATE.pop("sets", None)
    return done[len(sets):], done[:len(sets)]


def draw_runs(jobs, progress=None, workers=None):
    """[{name: path}] of ``jobs`` [(run_dir, names or None, fmt, reuse)]."""
    return draw(jobs, (), progress, workers)[0]


def draw_sets(sets, progress=None, workers=None):
    """[set_figures(...)] of ``sets`` [(points, target, stem, fmt, reuse, exhaustive)]."""
    return draw((), sets, progress, workers)[1]
