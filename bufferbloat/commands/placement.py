"""Where the commands that build networks (run, sweep, run-all) run their points: here or
in the project VM (:func:`_place`, bufferbloat/run/where.py decides), or on Dask workers
(:func:`_executor`, ``--cluster`` / ``--workers``); and what the scenarios need of this
machine (:func:`_needs`). Each refuses, before anything is built, what cannot run."""

import sys

from bufferbloat.commands.common import _scenario
from bufferbloat.core.errors import UsageError

#: --workers N: local Dask workers (one point each at a time)
WORKERS_LIMITS = (1, 64)


def _needs(names):
    """(capabilities, features the named scenarios need on this machine)."""
    from bufferbloat.net.capabilities import probe
    from bufferbloat.net.network import Network
    caps = probe()
    needed = set()
    from bufferbloat.traffic.kinds import needs_of
    for name in names:
        topo, _, traffic = _scenario(name).build(hz=caps.hz)
        needed |= set(Network(topo, caps=caps).features) | set(needs_of(traffic))
    return caps, sorted(needed)


def _topologies(args, builds):
    """The topologies of ``builds`` [(scenario, overrides)], each distinct one once (a
    derived knob, set from its provider only when the point runs, stands in here)."""
    from bufferbloat.run.derive import placeholders
    seen, topos = set(), []
    for scn, overrides in builds:
        key = (scn.name, tuple(sorted((k, str(v)) for k, v in overrides.items())))
        if key not in seen:
            seen.add(key)
            topos.append(scn.build(placeholders(scn, overrides), quick=args.quick)[0])
    return topos


def _place(args, builds):
    """'host' or 'vm' for a command whose runs are ``builds`` [(scenario, overrides)]
    (bufferbloat/run/where.py: the VM when this kernel lacks a piece they need, unless
    --host; --vm forces it); refuses a user who is not root."""
    from bufferbloat.run.where import choose, require_here, require_root
    topos = _topologies(args, builds)
    place = choose(args.where, topos, log=lambda m: print(m, file=sys.stderr, flush=True))
    require_root(place)
    if place == "host":
        require_here(topos)     # what this machine lacks, before anything starts
    return place


def _executor(args, builds):
    """The Dask executor of ``--cluster ADDR`` / ``--workers N``, or None (serial, here or
    in the VM). Checked before anything is built: an address that is not tcp://HOST:PORT,
    N out of range, a scheduler that cannot be reached: exit 2. Local workers run on
    this kernel: it must have what the points need, and they need root."""
    address, workers = getattr(args, "cluster", None), getattr(args, "workers", None)
    if address is None and workers is None:
        return None
    from bufferbloat.core.params import check_range
    from bufferbloat.worker import re_address
    if address is not None and not re_address(address):
        raise UsageError(f"invalid --cluster {address!r}: give tcp://HOST:PORT (the "
                         "scheduler's default port is 8786)")
    if workers is not None:
        check_range("--workers", workers, *WORKERS_LIMITS)
        if args.where == "vm":
            raise UsageError("--workers runs its points on this kernel: it cannot be "
                             "combined with --vm (run the whole command in the VM: vm/run "
                             "-- bufferbloat ...)")
        from bufferbloat.run.where import missing_kernel_pieces, require_here, require_root
        require_root("host")
        topos = _topologies(args, builds)
        missing = missing_kernel_pieces(topos)
        if not missing or args.where == "host":
            require_here(topos)     # what this machine lacks, before anything starts
        else:
            from bufferbloat.core.paths import SOURCE_ROOT
            if workers > 1:
                raise UsageError(
                    f"this kernel lacks {', '.join(missing)}: the points run in a worker's "
                    "project VM, and one VM per machine keeps timing honest (two TCG "
                    "guests distort each other): use --workers 1 here, or --cluster with "
                    "workers on machines whose kernel has them (docs/CLUSTER.md)")
            if SOURCE_ROOT is None:
                raise UsageError(f"this kernel lacks {', '.join(missing)}: a worker runs "
                                 "such points in its project VM, from a checkout only")
            print(f"This kernel lacks {', '.join(missing)}: the worker runs the points in "
                  "its project VM, booted once for all of them", flush=True)
    from bufferbloat.run.cluster import DaskExecutor
    return DaskExecutor(address=address, workers=workers,
                        log=lambda m: print(m, flush=True))
