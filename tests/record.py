"""The record of a run of the test command: one JSON file per pytest session.

Written by tests/conftest.py's hooks to env ``BUFFERBLOAT_TEST_RECORD`` (run_tests.sh
names it: ``.scratch/test-records/<stamp>-<tier>-<phase>.json``), rewritten after every
test (a session stopped half-way keeps what had ended) and summarised at the end:

* the tier, the phase (host or vm), the kernel, the machine's load average at the start,
  at the end and its maximum between tests, the session's wall time;
* each test: outcome, duration (setup + call + teardown), the bands it measured with
  each attempt's outcome and misses (tests/retries.py), each band's measured values with
  their bounds (``values``: what bench/band_spreads.py calibrates from), the degraded
  runs it reran with their reasons;
* the degraded ledger by family; the fault tests' seed (env ``BUFFERBLOAT_FAULT_SEED``,
  chosen here when unset, so that it is printed and can be set again).
"""
import contextlib
import json
import os
import platform
import time

RECORD_ENV = "BUFFERBLOAT_TEST_RECORD"
SEED_ENV = "BUFFERBLOAT_FAULT_SEED"

_state = {"tests": {}, "current": None}


def _load():
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def start(tier, phase):
    """At the session's start: the seed (set in the environment for the fault tests)."""
    seed = os.environ.get(SEED_ENV) or str(int(time.time()) % 1_000_000)
    os.environ[SEED_ENV] = seed
    _state.update({
        "tier": tier, "phase": phase, "kernel": platform.release(),
        "machine": platform.node(), "cpus": os.cpu_count(), "seed": int(seed),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "t0": time.monotonic(),
        "load_start": _load(), "load_max": _load(), "tests": {}})
    return int(seed)


def entry(nodeid):
    """The record of test ``nodeid`` (made on first use)."""
    return _state["tests"].setdefault(nodeid, {"outcome": None, "duration_s": 0.0,
                                               "bands": [], "degraded": [], "values": []})


def begin(nodeid):
    _state["current"] = nodeid
    entry(nodeid)


@contextlib.contextmanager
def kept_apart(own_nodeid):
    """For the tests of this record and of tests/retries.py: the entries they make under
    made-up names ("obs", "whole", ...) are dropped when they end, so that the session's
    record, and the archive bench/band_spreads.py reads, holds real tests only."""
    before, current = set(_state["tests"]), _state["current"]
    try:
        yield
    finally:
        for name in set(_state["tests"]) - before - {own_nodeid}:
            del _state["tests"][name]
        _state["current"] = current


def note_band(label, outcomes, misses, judged):
    """A band measured by the running test (tests/retries.py: measure_until_met)."""
    e = entry(_state["current"] or "?")
    e["bands"].append({"label": label, "attempts": len(outcomes), "met": outcomes,
                       "misses": misses, "judged": judged})


def note_value(name, value, lo=None, hi=None, unit=""):
    """A band's measured value and its bounds (tests/retries.py: observe), kept for
    calibration (bench/band_spreads.py reads them from every archived record)."""
    entry(_state["current"] or "?")["values"].append(
        {"name": name, "value": value, "lo": lo, "hi": hi, "unit": unit})


def note_report(report):
    """A test phase's report (setup, call, teardown): its duration and outcome."""
    e = entry(report.nodeid)
    e["duration_s"] = round(e["duration_s"] + report.duration, 3)
    if report.failed:
        e["outcome"] = "failed" if report.when == "call" else "error"
    elif report.skipped and e["outcome"] is None:
        e["outcome"] = "skipped"
    elif report.when == "call" and e["outcome"] is None:
        e["outcome"] = "passed"
    load = _load()
    if load and _state.get("load_max"):
        _state["load_max"] = [max(a, b) for a, b in zip(_state["load_max"], load)]


def write(ledger=None, path=None):
    """Write the record to ``path`` (default: env); returns the path or None."""
    path = path or os.environ.get(RECORD_ENV)
    if not path or "t0" not in _state:
        return None
    data = json.loads(json.dumps({k: v for k, v in _state.items()
                                  if k not in ("t0", "current")}))
    data["wall_s"] = round(time.monotonic() - _state["t0"], 1)
    data["load_end"] = _load()
    if ledger is not None:
        for test, fam, d, reasons in ledger.reruns:
            data["tests"].setdefault(test, {"outcome": None, "duration_s": 0.0, "bands": [],
                                            "degraded": []})["degraded"].append(
                {"family": fam, "dir": d, "reasons": reasons})
        data["degraded_by_family"] = {f: {"degraded": k, "runs": n, "tail": tail}
                                      for f, (k, n, tail) in ledger.by_family().items()}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)
    return path


def read(path):
    """A record :func:`write` wrote, as a dict, or None when it cannot be read (gone,
    cut short, not JSON)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def summary():
    """Lines for the end of the session: counts, wall time, the slowest tests, the bands
    missed (judged or not)."""
    tests = _state.get("tests", {})
    by = {}
    for e in tests.values():
        by[e["outcome"]] = by.get(e["outcome"], 0) + 1
    wall = time.monotonic() - _state.get("t0", time.monotonic())
    lines = [f"tier {_state.get('tier')}, phase {_state.get('phase')}: "
             + ", ".join(f"{n} {o}" for o, n in sorted(by.items(), key=str))
             + f" in {wall / 60:.1f} min; load {_state.get('load_start')} -> {_load()} "
             f"(max {_state.get('load_max')}); fault seed {_state.get('seed')} "
             f"({SEED_ENV} sets it)"]
    lines += [f"  not judged (degraded through its reruns): {t}: {e['not_judged']}"
              for t, e in tests.items() if e.get("not_judged")]
    missed = [(t, b) for t, e in tests.items() for b in e["bands"] if b["misses"]]
    for t, b in missed:
        lines.append(f"  band missed{' (judged)' if b['judged'] else ' (not judged here)'}: "
                     f"{t}: {b['label']}: {b['misses'][0]}")
    slow = sorted(tests.items(), key=lambda kv: -kv[1]["duration_s"])[:10]
    lines += [f"  {e['duration_s']:7.1f} s  {t}" for t, e in slow]
    return lines
