"""Parameter sweeps: the cartesian product of varied keys x repetitions, resumable.

Each point runs in its own directory ``OUT/SCENARIO/sweep/KEY=VALUE,.../rep-N`` whose name
is derived from the point alone; a point whose directory holds a result with status ``ok``
is not rerun, so an interrupted sweep rerun with the same arguments completes only the
missing points. ``OUT/SCENARIO/sweep/index.json`` lists every point with its status.
"""

import itertools
import json
import os
import re
import shutil
import time

from .errors import UsageError
from .results import RESULT_FILE, write_json_atomic

_UNSAFE = re.compile(r"[^A-Za-z0-9_.,=+-]")


def parse_vary(items):
    """``["key=v1,v2", ...]`` -> {key: [v1, v2]} (values are strings until validated)."""
    out = {}
    for item in items or []:
        key, sep, values = item.partition("=")
        key = key.strip()
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not key or not vals:
            raise UsageError(f"invalid --vary {item!r} (expected key=v1,v2,...)")
        if key in out:
            raise UsageError(f"--vary {key} given twice")
        out[key] = vals
    return out


def points(vary, repeat=1):
    """[(overrides, rep)] for the cartesian product of ``vary`` x ``repeat``."""
    if not 1 <= int(repeat) <= 1000:
        raise UsageError(f"invalid value for repeat: {repeat!r} (allowed: 1 to 1000)")
    keys = list(vary)
    combos = itertools.product(*(vary[k] for k in keys)) if keys else [()]
    return [(dict(zip(keys, combo)), rep) for combo in combos
            for rep in range(1, int(repeat) + 1)]


def point_dir(root, overrides, rep):
    """The directory of one point: a name made of the point alone (stable across runs)."""
    name = ",".join(f"{k}={v}" for k, v in sorted(overrides.items())) or "default"
    return os.path.join(root, _UNSAFE.sub("_", name), f"rep-{rep}")


def point_status(path):
    """Status recorded in a point's result.json, or None if there is none."""
    try:
        with open(os.path.join(path, RESULT_FILE)) as f:
            return json.load(f).get("status")
    except (OSError, ValueError):
        return None


def run_sweep(scn, vary, repeat, out_root, run_point, quick=False, duration_s=None,
              base=None, log=print):
    """Run every missing point of ``scn`` x ``vary`` x ``repeat``; returns
    (index path, number of failed points). Every point is validated before the first
    runs, so a bad value stops the sweep before any network exists."""
    todo = [(scn, dict(base or {}, **o), o, rep) for o, rep in points(vary, repeat)]
    root = os.path.join(out_root, scn.name, "sweep")
    index_path = os.path.join(root, "index.json")
    meta = {"scenario": scn.name, "vary": vary, "repeat": repeat}
    done, failed = run_points(todo, out_root, run_point, index_path, meta, quick=quick,
                              duration_s=duration_s, log=log)
    return index_path, failed


def run_points(todo, out_root, run_point, index_path, meta, quick=False, duration_s=None,
               log=print):
    """Run ``todo`` = [(scenario, overrides, varied, rep)] with progress (i/n, elapsed,
    estimated remaining), skipping points already recorded as ok, going on past failed
    ones. Each point goes to ``OUT/SCENARIO/sweep/<varied>/rep-N``. Writes ``index_path``
    after every point. Returns (index entries, number failed)."""
    for scn, overrides, _, _ in todo:
        scn.build(overrides, quick=quick)                  # raises UsageError up front
    os.makedirs(os.path.dirname(index_path), exist_ok=True)
    index, failed, ran = [], 0, 0
    t0 = time.monotonic()

    def save():
        write_json_atomic(index_path, dict(meta, points=len(todo),
                                           profile="quick" if quick else "full",
                                           wall_s=time.monotonic() - t0, done=index))
    for i, (scn, overrides, varied, rep) in enumerate(todo, 1):
        path = point_dir(os.path.join(out_root, scn.name, "sweep"), varied, rep)
        entry = {"scenario": scn.name, "overrides": overrides, "rep": rep, "run_dir": path}
        label = f"{scn.name} {_fmt(varied)} rep {rep}"
        if point_status(path) == "ok":
            index.append(dict(entry, status="ok", resumed=True))
            log(f"[{i}/{len(todo)}] {label}: already recorded")
            continue
        if os.path.exists(path):
            shutil.rmtree(path)       # a failed or interrupted attempt: run it again
        elapsed = time.monotonic() - t0
        eta = f", ~{elapsed / ran * (len(todo) - i + 1):.0f} s left" if ran else ""
        log(f"[{i}/{len(todo)}] {label} (elapsed {elapsed:.0f} s{eta})")
        try:
            run_point(scn, overrides, duration_s=duration_s, quick=quick, run_dir=path,
                      log=log)
            entry["status"] = "ok"
        except KeyboardInterrupt:
            index.append(dict(entry, status="interrupted"))
            save()
            raise
        except UsageError:
            raise
        except Exception as exc:  # noqa: BLE001 - one failed point must not stop the rest
            entry["status"] = "failed"
            entry["error"] = f"{type(exc).__name__}: {exc}"
            failed += 1
            log(f"  FAILED: {entry['error']}")
        ran += 1
        index.append(entry)
        save()
    save()
    return index, failed


def _fmt(varied):
    return " ".join(f"{k}={v}" for k, v in varied.items()) or "(defaults)"
