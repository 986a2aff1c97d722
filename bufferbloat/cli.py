"""The ``bufferbloat`` command: check, list, run, run-all.

Usage errors (bad parameter, unknown scenario, missing kernel feature or tool) print one
message and exit with code 2 before any network state is created.
"""

import argparse
import json
import os
import sys
import time

from .errors import EXIT_USAGE, UsageError


def _scenarios():
    from scenarios import catalogue
    return catalogue()


def _scenario(name):
    cat = _scenarios()
    if name not in cat:
        raise UsageError(f"unknown scenario {name!r} (valid: {', '.join(cat)})")
    return cat[name]


def _overrides(pairs):
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"invalid --set {pair!r} (expected key=value)")
        out[key.strip()] = value.strip()
    return out


def _needs(names):
    """(capabilities, features the named scenarios need on this machine)."""
    from .capabilities import probe
    from .network import Network
    caps = probe()
    needed = set()
    for name in names:
        needed |= set(Network(_scenario(name).build_topo(hz=caps.hz), caps=caps).features)
    return caps, sorted(needed)


def cmd_check(args):
    """Print what this machine can emulate; with --scenario, exit 2 if it can't run it."""
    from .capabilities import probe
    caps = probe()
    if args.json:
        print(json.dumps(caps.to_dict(), indent=1))
    elif not args.quiet:
        print(caps.table())
    names = list(_scenarios()) if args.scenario == ["all"] else (args.scenario or [])
    blocked = []
    for name in names:
        missing = [f for f in _needs([name])[1] if not caps.has(f)]
        if missing:
            blocked.append(f"{name}: needs {', '.join(missing)}")
    if blocked:
        if not args.quiet:
            print("\nscenarios this machine cannot run:\n  " + "\n  ".join(blocked))
        return EXIT_USAGE
    return 0


def cmd_list(_args):
    """List scenarios with one-line descriptions."""
    for name, scn in _scenarios().items():
        print(f"{name:<16} {scn.description}")
    return 0


def cmd_run(args):
    """Run one scenario."""
    from .runner import run_scenario
    scn = _scenario(args.scenario)
    overrides = _overrides(args.set)
    for i in range(args.repeat):
        run_dir = run_scenario(scn, overrides, args.time, args.out, quick=args.quick)
        print(f"result: {os.path.join(run_dir, 'result.json')}")
    return 0


def cmd_run_all(args):
    """Run the whole catalogue with progress; go on past failures; write an index."""
    from .runner import run_scenario, write_json_atomic
    cat = _scenarios()
    names = args.only or list(cat)
    caps, needed = _needs(names)
    caps.require(needed)  # refuse up front, before any network state, what can't run here
    t0 = time.monotonic()
    index, failed = [], []
    for i, name in enumerate(names, 1):
        elapsed = time.monotonic() - t0
        eta = "" if i == 1 else f", ~{elapsed / (i - 1) * (len(names) - i + 1):.0f} s left"
        print(f"[{i}/{len(names)}] {name} (elapsed {elapsed:.0f} s{eta})", flush=True)
        entry = {"scenario": name}
        try:
            entry["run_dir"] = run_scenario(cat[name], None, None, args.out, quick=args.quick)
            entry["status"] = "ok"
        except KeyboardInterrupt:
            entry["status"] = "interrupted"
            index.append(entry)
            break
        except Exception as exc:  # one failed scenario must not stop the others
            entry["status"] = "failed"
            entry["error"] = f"{type(exc).__name__}: {exc}"
            failed.append(name)
            print(f"  FAILED: {entry['error']}", file=sys.stderr)
        index.append(entry)
    os.makedirs(args.out, exist_ok=True)
    write_json_atomic(os.path.join(args.out, "index.json"),
                      {"profile": "quick" if args.quick else "full", "runs": index,
                       "wall_s": time.monotonic() - t0})
    print(f"done: {len(index) - len(failed)}/{len(names)} ok in "
          f"{time.monotonic() - t0:.0f} s; index: {os.path.join(args.out, 'index.json')}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0 if len(index) == len(names) and index[-1]["status"] == "ok" else 1


def parser():
    """The argument parser (exposed for tests and docs)."""
    p = argparse.ArgumentParser(prog="bufferbloat", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="what this kernel and machine can emulate")
    c.add_argument("--scenario", action="append", help="scenario name, or 'all'")
    c.add_argument("--json", action="store_true")
    c.add_argument("--quiet", action="store_true")
    c.set_defaults(func=cmd_check)
    sub.add_parser("list", help="scenarios").set_defaults(func=cmd_list)
    r = sub.add_parser("run", help="run one scenario")
    r.add_argument("scenario")
    r.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a parameter (qdisc.KEY for the qdisc's own)")
    r.add_argument("--time", type=float, help="seconds of traffic")
    r.add_argument("--out", default="results")
    r.add_argument("--repeat", type=int, default=1)
    r.add_argument("--quick", action="store_true")
    r.set_defaults(func=cmd_run)
    a = sub.add_parser("run-all", help="run every scenario")
    a.add_argument("--quick", action="store_true")
    a.add_argument("--out", default="results")
    a.add_argument("--only", action="append", help="run only these scenarios")
    a.set_defaults(func=cmd_run_all)
    return p


def main(argv=None):
    """Entry point of the ``bufferbloat`` console command."""
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except UsageError as err:
        print(f"bufferbloat: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("bufferbloat: interrupted", file=sys.stderr)
        return 130
