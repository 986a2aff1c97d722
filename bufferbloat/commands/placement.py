"""Where the commands that build networks (run, sweep, run-all) run their points: here or
in the project VM (:func:`where_to_run`, bufferbloat/run/where.py decides), or on Dask workers
(:func:`executor_for`, ``--cluster`` / ``--workers``); and what the points need of this
machine (:func:`needs`). Each takes the points as they were resolved, once
(:class:`~bufferbloat.run.resolved.ResolvedRun`), and refuses, before anything is built,
what cannot run."""

import sys

from bufferbloat.core.errors import UsageError

#: --workers N: local Dask workers (one point each at a time)
WORKERS_LIMITS = (1, 64)


def distinct(runs):
    """``runs`` with one run per configuration (repetitions share their network)."""
    seen = {}
    for run in runs:
        seen.setdefault(run.config_key, run)
    return list(seen.values())


def needs(runs):
    """(capabilities, features the resolved ``runs`` need on this machine)."""
    from bufferbloat.net.capabilities import probe
    from bufferbloat.net.network import Network
    from bufferbloat.traffic.kinds import needs_of
    caps = probe()
    needed = set()
    for run in distinct(runs):
        needed |= set(Network(run.topo, caps=caps).features) | set(needs_of(run.traffic))
    return caps, sorted(needed)


def topologies(runs):
    """The topologies of the resolved ``runs``, each configuration's once."""
    return [run.topo for run in distinct(runs)]


def where_to_run(args, runs):
    """'host' or 'vm' for a command whose points are the resolved ``runs``
    (bufferbloat/run/where.py: the VM when this kernel lacks a piece they need, unless
    --host; --vm forces it); refuses a user who is not root."""
    from bufferbloat.run.where import choose, require_here, require_root
    topos = topologies(runs)
    place = choose(args.where, topos, log=lambda m: print(m, file=sys.stderr, flush=True))
    require_root(place)
    if place == "host":
        require_here(topos)     # what this machine lacks, before anything starts
    return place


def executor_for(args, runs):
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
        topos = topologies(runs)
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
                    "workers on machines whose kernel has them (docs/guide/cluster.md)")
            if SOURCE_ROOT is None:
                raise UsageError(f"this kernel lacks {', '.join(missing)}: a worker runs "
                                 "such points in its project VM, from a checkout only")
            print(f"This kernel lacks {', '.join(missing)}: the worker runs the points in "
                  "its project VM, booted once for all of them", flush=True)
    from bufferbloat.run.cluster import DaskExecutor
    return DaskExecutor(address=address, workers=workers,
                        log=lambda m: print(m, flush=True))
