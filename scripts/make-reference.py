#!/usr/bin/python3
"""Make the reference a grader compares a run with (``reference/``).

    sudo scripts/make-reference.py                   # a2_pie, 5 repetitions a point
    sudo scripts/make-reference.py --only a2_pie --only b2_pie_target --repeat 5
    scripts/make-reference.py --publish RESULTS      # publish runs made already

Each scenario's quick sweep is run with ``--repeat N`` (in the project VM when this
kernel lacks a qdisc, as every command does) into ``.scratch/reference-build``; then its
runs' records and metrics (``result.json``, ``metrics.json``; no series) and the sweeps'
indexes are copied into ``reference/``, with ``reference.json``: the code identity, the
machine and kernel the runs came from, the date, the command and each scenario's runs.
``bufferbloat compare RUN reference`` then says, per headline metric, whether the run
falls inside the reference's spread. The whole stays under 2 MB (refused otherwise).
"""

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bufferbloat.compare import REFERENCE_FILE  # noqa: E402
from bufferbloat.core.paths import code_identity  # noqa: E402
from bufferbloat.results.metrics import run_rows, write_metrics  # noqa: E402
from bufferbloat.results.records import find_runs, load_run  # noqa: E402

MAX_BYTES = 2 * 1024 * 1024


def run_sweeps(names, repeat, out):
    for name in names:
        cmd = [sys.executable, "-m", "bufferbloat", "sweep", name, "--quick", "--repeat",
               str(repeat), "--no-figures", "--out", out]
        print("+", " ".join(cmd), flush=True)
        rc = subprocess.run(cmd, cwd=ROOT).returncode
        if rc not in (0, 5):          # 5: some runs degraded (kept, not counted)
            sys.exit(f"make-reference: {name}'s sweep failed (exit {rc})")


def publish(src, dest, command):
    """Copy the records, metrics and indexes of ``src`` into ``dest``; write
    REFERENCE_FILE; returns the bytes written."""
    if os.path.isdir(dest):
        shutil.rmtree(dest)
    runs, machine, scenarios = 0, None, {}
    for run_dir in find_runs(src):
        rel = os.path.relpath(run_dir, src)
        if ".degraded-" in rel or ".superseded-" in rel:
            continue
        os.makedirs(os.path.join(dest, rel), exist_ok=True)
        shutil.copy2(os.path.join(run_dir, "result.json"), os.path.join(dest, rel))
        # the metrics as this code computes them (a reference has no series to
        # recompute them from later)
        run = load_run(run_dir)
        write_metrics(os.path.join(dest, rel), run_rows(run), warmup_s=run.warmup_s)
        rec = run.record
        machine = machine or rec.get("machine")
        scn = (rec.get("scenario") or {}).get("name", "?")
        scenarios[scn] = scenarios.get(scn, 0) + 1
        runs += 1
    for dirpath, _, files in os.walk(src):
        if "index.json" in files:
            rel = os.path.relpath(dirpath, src)
            os.makedirs(os.path.join(dest, rel), exist_ok=True)
            shutil.copy2(os.path.join(dirpath, "index.json"), os.path.join(dest, rel))
    meta = {"code": code_identity(), "machine": machine, "runs": runs,
            "scenarios": scenarios, "made": datetime.datetime.now().astimezone()
            .isoformat(timespec="seconds"), "command": command,
            "how": "quick profile, the scenario's quick sweep, --repeat N; records and "
                   "metrics only (no series)"}
    with open(os.path.join(dest, REFERENCE_FILE), "w") as f:
        json.dump(meta, f, indent=1)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(dest)
               for f in fs)
    if size > MAX_BYTES:
        sys.exit(f"make-reference: {dest} holds {size} bytes, over {MAX_BYTES}: fewer "
                 "scenarios or repetitions")
    return runs, size


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", metavar="SCENARIO")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--publish", metavar="RESULTS", help="publish runs made already")
    ap.add_argument("--dest", default=os.path.join(ROOT, "reference"))
    args = ap.parse_args(argv)
    if args.repeat < 2:
        ap.error("--repeat: at least 2 (a spread needs two runs)")
    src = args.publish
    if src is None:
        src = os.path.join(".scratch", "reference-build")
        run_sweeps(args.only or ["a2_pie"], args.repeat, src)
        src = os.path.join(ROOT, src)
    runs, size = publish(src, args.dest, " ".join(["scripts/make-reference.py"]
                                                 + (argv or sys.argv[1:])))
    print(f"reference: {runs} runs, {size} bytes in {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
