"""The full profile's wall time on N workers, simulated from a real run-all's records
(not a test; docs/guide/cluster.md).

    PYTHONPATH=. /usr/bin/python3 bench/simulate_cluster.py RESULTS/index.json [--workers 1,4,16]
                                                       [--profile full] [--boot-s 25]

Reads the per-point wall times a real ``run-all`` recorded (``index.json``: each
entry's ``wall_s`` and ``duration_s``), takes each scenario's overhead beyond its traffic
(the median of its points' ``wall_s - duration_s``; a scenario the index lacks gets the
median of all), and gives every point of the profile asked for its duration plus that
overhead. Then it schedules those points as :class:`bufferbloat.run.cluster.DaskExecutor`
does: in the runner's order (providers first), one point per worker at a time, the next
point to the first worker free, a derived point (study D's streams) only once its
provider is done; each worker pays ``--boot-s`` once (a VM worker's boot). Prints the
makespan per N and the speed-up over N = 1.
"""

import argparse
import heapq
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def overheads(index_path):
    """{scenario: median overhead s}, and the median over every point."""
    with open(index_path) as f:
        entries = json.load(f)["done"]
    per, every = {}, []
    for e in entries:
        if e.get("status") != "ok" or e.get("wall_s") is None:
            continue
        extra = max(0.0, float(e["wall_s"]) - float(e["duration_s"]))
        per.setdefault(e["scenario"], []).append(extra)
        every.append(extra)
    if not every:
        sys.exit(f"{index_path}: no point with a recorded wall time")
    return {k: statistics.median(v) for k, v in per.items()}, statistics.median(every)


def _key(name, overrides, rep):
    return name, tuple(sorted((k, str(v)) for k, v in overrides.items())), rep


def profile_points(quick):
    """[(scenario name, duration s, key, [its providers' keys])] in the runner's
    order."""
    from bufferbloat.commands.run_all import catalogue_points
    from bufferbloat.run import derive, identity
    todo = derive.providers_first(catalogue_points(quick))
    out = []
    for scn, overrides, _, rep in todo:
        config = identity.run_config(scn, derive.placeholders(scn, overrides), quick=quick,
                                     rep=rep)
        providers = [_key(scn.name, dict(overrides, **rule["from"]), rep)
                     for rule in derive.needs(scn, overrides).values()]
        out.append((scn.name, float(config["duration_s"]), _key(scn.name, overrides, rep),
                    providers))
    return out


def makespan(points, per, default, workers, boot_s):
    """Seconds until the last point is done on ``workers`` workers."""
    free = [boot_s] * workers                   # when each worker is next free
    heapq.heapify(free)
    ends, last_start = {}, 0.0
    for name, duration, key, providers in points:
        # in order: a derived point waits for its provider, and the points after it
        # wait with it (the runner submits in order)
        start = max([heapq.heappop(free), last_start] + [ends.get(p, 0.0) for p in providers])
        last_start = start
        ends[key] = start + duration + per.get(name, default)
        heapq.heappush(free, ends[key])
    return max(free)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("index", help="a real run-all's index.json")
    ap.add_argument("--workers", default="1,4,16")
    ap.add_argument("--profile", choices=("quick", "full"), default="full")
    ap.add_argument("--boot-s", type=float, default=25.0,
                    help="once per worker (a VM worker's boot; 0 on a host kernel)")
    args = ap.parse_args()
    per, default = overheads(args.index)
    points = profile_points(args.profile == "quick")
    traffic = sum(p[1] for p in points)
    print(f"{args.profile} profile: {len(points)} points, {traffic:.0f} s of traffic; "
          f"overheads from {os.path.abspath(args.index)}: "
          + ", ".join(f"{k} {v:.1f} s" for k, v in sorted(per.items()))
          + f" (others {default:.1f} s)")
    one = makespan(points, per, default, 1, args.boot_s)
    for n in (int(x) for x in args.workers.split(",")):
        span = makespan(points, per, default, n, args.boot_s)
        print(f"N = {n:3d}: {span:8.0f} s ({span / 3600:5.2f} h), speed-up "
              f"{one / span:5.2f}")


if __name__ == "__main__":
    main()
