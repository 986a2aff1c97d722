"""``bufferbloat worker ADDRESS``: a Dask worker that runs a cluster's points, and the
child process that runs one point (``python3 -m bufferbloat.worker point SPEC``).

A lab starts one worker per machine (by ssh or a systemd unit: docs/guide/cluster.md); each
runs one point at a time (one thread, the resource ``emulator=1``), as root, each point
in a network namespace of its own (:mod:`bufferbloat.run.cluster`). On start it removes
what a dead predecessor of the same name left, and allows the catalogue's congestion
controls in the initial namespace (a global setting no point's namespace can make).
"""

import json
import os
import socket
import sys

from bufferbloat.core.errors import EXIT_USAGE, UsageError


def cmd_worker(args):
    """Run a Dask worker for ``args.scheduler`` until interrupted."""
    from bufferbloat.run import remote
    if not re_address(args.scheduler):
        raise UsageError(f"invalid scheduler address {args.scheduler!r}: give "
                         "tcp://HOST:PORT (the scheduler's default port is 8786)")
    if os.geteuid() != 0:
        raise UsageError("a worker builds networks: run it as root (sudo bufferbloat worker "
                         f"{args.scheduler})")
    try:
        import asyncio

        from distributed import Worker
    except ModuleNotFoundError:
        raise UsageError("bufferbloat worker needs Dask distributed: install Debian's "
                         "python3-distributed (scripts/install-deps.sh does)") from None
    _check_reachable(args.scheduler)
    name = args.name or socket.gethostname()
    slot = remote.slot_dir(name)
    for what in remote.clean_slot(slot, log=print):
        print(f"worker {name}: {what} (left by an earlier worker of this name)", flush=True)

    async def serve():
        async with Worker(args.scheduler, nthreads=1, name=name,
                          resources={remote.RESOURCE: 1}) as worker:
            print(f"worker {name}: joined {args.scheduler} as {worker.address}; one point "
                  f"at a time; state in {slot}", flush=True)
            await worker.finished()
    with remote.global_settings(log=print):
        asyncio.run(serve())
    return 0


def re_address(text):
    import re
    return re.fullmatch(r"(tcp|tls)://[A-Za-z0-9_.:\[\]-]+:\d{1,5}", text or "") is not None


def _check_reachable(address, timeout_s=5.0):
    """UsageError (exit 2) when nothing listens at the scheduler's address."""
    hostport = address.split("://", 1)[1]
    host, _, port = hostport.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise UsageError(f"cannot reach the Dask scheduler at {address}: {exc}; start one "
                         "(dask-scheduler) or check the address (docs/guide/cluster.md)") from None


def point_main(spec_path):
    """The child of :func:`bufferbloat.run.remote.run_remote`: run one point as the
    spec says, under its stall watchdog; write its outcome beside the spec."""
    from bufferbloat.run.engine import run_resolved
    from bufferbloat.run.resolved import resolve_spec
    from bufferbloat.run.watch import run_one
    from bufferbloat.scenarios import catalogue
    with open(spec_path) as f:
        spec = json.load(f)
    outcome = {"status": "interrupted", "error": "interrupted"}
    try:
        # the run the sweep planned, made from its data once here, its key checked
        run = resolve_spec(spec, catalogue())
        done = run_one(lambda: run_resolved(run, run_dir=spec["run_dir"]),
                       spec.get("label") or run.name, spec.get("limit_s"), 0)
        outcome = {"status": done.status, "health": done.health,
                   "error": None if done.exc is None else
                   f"{type(done.exc).__name__}: {done.exc}"}
    except UsageError as exc:
        outcome = {"status": "failed", "error": str(exc)}
    finally:       # atomic: the host (through the VM's share) may read it at once
        from bufferbloat.core.atomic import write_json_atomic
        write_json_atomic(spec["outcome"], outcome)
    return 0 if outcome["status"] == "ok" else 1


def spool_main(spool, poll_s=0.3):
    """In a worker's project VM: run the points whose specs appear in ``spool``
    (``ID.spec.json``, written by the host's :class:`bufferbloat.run.remote.VMWorker`),
    one at a time, each a child (:func:`point_main`); ``ID.spec.json.stop`` ends the
    point (SIGTERM: it records itself interrupted); ``quit`` ends the spool. Writes
    ``ready`` once it listens."""
    import glob
    import signal
    import subprocess
    import time

    from bufferbloat.core.signals import die_with_parent
    with open(os.path.join(spool, "ready"), "w") as f:
        f.write(str(os.getpid()))
    print(f"worker spool: ready in {spool}", flush=True)
    while not os.path.exists(os.path.join(spool, "quit")):
        specs = sorted(glob.glob(os.path.join(spool, "*.spec.json")))
        if not specs:
            time.sleep(poll_s)
            continue
        spec = specs[0]
        print(f"worker spool: point {os.path.basename(spec)}", flush=True)
        claimed = spec + ".running"        # taken: the host removes it with the outcome
        os.rename(spec, claimed)
        proc = subprocess.Popen([sys.executable, "-m", "bufferbloat.worker", "point",
                                 claimed], start_new_session=True,
                                preexec_fn=die_with_parent)
        stopped = False
        while proc.poll() is None:
            if not stopped and os.path.exists(spec + ".stop"):
                proc.send_signal(signal.SIGTERM)
                stopped = True
            time.sleep(poll_s)
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 2 and argv[0] == "point":
        try:
            return point_main(argv[1])
        except KeyboardInterrupt:
            return 130
    if len(argv) == 2 and argv[0] == "spool":
        try:
            return spool_main(argv[1])
        except KeyboardInterrupt:
            return 130
    print("usage: python3 -m bufferbloat.worker point SPEC.json | spool DIR (run by a "
          "worker)", file=sys.stderr)
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
