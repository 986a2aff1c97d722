"""A sweep's points on Dask distributed workers: many machines, one point per worker.

The driver (``sweep``/``run-all`` with ``--cluster ADDR`` or ``--workers N``) plans the
points as a serial sweep does (:mod:`bufferbloat.run.sweep`) and hands them to
:class:`DaskExecutor`, which keeps at most one point per worker in flight (each task asks
for the resource ``emulator=1``, which every worker has once) and submits the next as one
finishes, so that the blame for a failure is exact. Each worker runs its point with
:func:`bufferbloat.run.remote.run_remote`, in a network namespace of its own (Mininet's
interface names, the bridge and the tool processes of two workers on one kernel never
meet), and sends the run back; the driver checks its ``run_key`` and moves it into its
own tree atomically (:func:`unpack_run`). A point whose worker died is run again by Dask
on another worker (or on the same one, restarted); its partial run is never recorded.

The driver interrupted (Ctrl-C): it sets a Dask :class:`distributed.Event`; the workers
end their points (SIGTERM to the child: interrupted, network removed) and the runner
records them ``interrupted``; the same command run again runs only the missing points.
"""


import contextlib
import io
import os
import re
import shutil
import signal
import tarfile
import time
import uuid
from concurrent.futures import CancelledError

from bufferbloat.core.errors import UsageError
from bufferbloat.core.paths import code_fingerprint
from bufferbloat.results.health import verdict_of
from bufferbloat.run.plan import read_record
from bufferbloat.run.remote import (
    CHILD_STOP_S,
    CONNECT_TIMEOUT_S,
    FIRST_WORKER_TIMEOUT_S,
    RESOURCE,
    close_worker_vms,
    global_settings,
    run_remote,
    worker_root,
)
from bufferbloat.run.watch import Outcome

#: a point's run larger than this on its way back says so (env SEND_LIMIT_ENV: bytes);
#: a quick host point sends ~60 kB, measured (docs/design/measurements.md)
SEND_LIMIT_BYTES = 20_000_000
SEND_LIMIT_ENV = "BUFFERBLOAT_SEND_LIMIT_BYTES"
#: a lost scheduler: how long the driver waits for it to be back, and how many losses
#: a point is sent again after
SCHEDULER_BACK_S = 120.0
LOST_TRIES = 3


def unpack_run(archive, path, key):
    """Write a run sent by a worker into ``path``: unpacked beside it, its result's
    run_key checked against ``key`` (ValueError otherwise, nothing written), then
    renamed into place (a half-written run is never at ``path``)."""
    tmp = f"{path}.incoming-{uuid.uuid4().hex[:8]}"
    os.makedirs(tmp)
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            for member in tar.getmembers():
                target = os.path.normpath(os.path.join(tmp, member.name))
                if not (target == tmp or target.startswith(tmp + os.sep)) or \
                        member.issym() or member.islnk() or member.isdev():
                    raise ValueError(f"refused a run archive member {member.name!r}")
            tar.extractall(tmp)
        got = read_record(tmp).get("run_key")
        if got != key:
            raise ValueError(f"the worker's run records run_key {got}, the driver "
                             f"expected {key}")
        if os.path.exists(path):
            if _recorded_ok(path, key):      # a late copy never replaces the record
                shutil.rmtree(tmp, ignore_errors=True)
                return False
            shutil.rmtree(path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return True


def _recorded_ok(path, key):
    rec = read_record(path) if os.path.isfile(os.path.join(path, "result.json")) else {}
    return rec.get("status") == "ok" and rec.get("run_key") == key


def send_limit():
    """Bytes a point's run may take on its way back before its entry warns."""
    with contextlib.suppress(ValueError):
        return int(os.environ.get(SEND_LIMIT_ENV) or SEND_LIMIT_BYTES)
    return SEND_LIMIT_BYTES


def sent(res, limit=None):
    """What a worker's reply cost on the way back: {sent_bytes} (its transfer time is
    that over the lab's rate: measured in docs/design/measurements.md), and a warning
    when the run is larger than ``limit``."""
    size = len(res.get("archive") or b"")
    limit = send_limit() if limit is None else limit
    got = {"sent_bytes": size}
    if size > limit:
        got["warning"] = (f"its run was {size / 1e6:.1f} MB on its way back from worker "
                          f"{res.get('worker')}, over the {limit / 1e6:.1f} MB limit "
                          f"({SEND_LIMIT_ENV}): at 100 Mbit/s {size * 8 / 1e8:.1f} s "
                          "per point")
    return got


class KeepSigint:
    """A Dask worker plugin: the worker ignores SIGINT (a local cluster's workers share
    the driver's terminal; the driver ends their points itself)."""

    def setup(self, worker=None):
        with contextlib.suppress(ValueError):      # not the main thread: nothing to do
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    def teardown(self, worker=None):
        pass


class DaskExecutor:
    """Points on Dask workers: an existing scheduler (``address``) or a local cluster of
    ``workers`` processes (one thread each, ``emulator=1``)."""

    name = "dask"

    def __init__(self, address=None, workers=None, log=print):
        try:
            import distributed  # noqa: PLC0415 - only a cluster needs Dask
        except ModuleNotFoundError:
            raise UsageError("--cluster/--workers need Dask distributed: install Debian's "
                             "python3-distributed (scripts/install-deps.sh does)") from None
        self.distributed, self.log = distributed, log
        self.code = code_fingerprint()
        self.cluster = None
        self.futures = {}
        self.stopping = False
        self.settings = contextlib.ExitStack()
        self.client = None
        self.address = None if workers else address
        try:
            self._connect(address, workers, log)
        except BaseException:
            self.close()
            raise

    def _connect(self, address, workers, log):
        distributed = self.distributed
        if workers:
            self.settings.enter_context(global_settings(log))
            import logging  # noqa: PLC0415
            logging.getLogger("distributed").setLevel(logging.ERROR)
            self.cluster = distributed.LocalCluster(
                n_workers=int(workers), threads_per_worker=1, processes=True,
                resources={RESOURCE: 1}, dashboard_address=":0",
                local_directory=os.path.join(worker_root(), "dask"),
                silence_logs=logging.ERROR)
            self.client = distributed.Client(self.cluster)
            # the terminal's Ctrl-C reaches the whole process group: the local workers
            # leave it to this driver, which stops their points (and restarted ones too)
            self.client.register_worker_plugin(KeepSigint(), name="bufferbloat-sigint")
            self.where = f"a local cluster of {workers} workers"
        else:
            try:
                self.client = distributed.Client(address, timeout=f"{CONNECT_TIMEOUT_S}s")
            except (OSError, TimeoutError) as exc:
                raise UsageError(f"cannot reach the Dask scheduler at {address}: {exc}; "
                                 "start one (dask-scheduler) or check the address "
                                 "(docs/guide/cluster.md)") from None
            self.where = f"the Dask scheduler at {address}"
        self.event_name = f"bufferbloat-stop-{uuid.uuid4().hex}"
        self.event = distributed.Event(self.event_name, client=self.client)
        try:
            self.client.wait_for_workers(int(workers or 1), timeout=FIRST_WORKER_TIMEOUT_S)
        except (TimeoutError, OSError):
            raise UsageError(f"no worker joined {self.where} within "
                             f"{FIRST_WORKER_TIMEOUT_S:.0f} s: start one per machine with "
                             "`sudo bufferbloat worker ADDRESS` (docs/guide/cluster.md)") from None
        info = self.client.scheduler_info()
        dash = (info.get("services") or {}).get("dashboard")
        log(f"cluster: {self.where}, {self.slots()} worker(s); "
            + (f"dashboard {self.client.dashboard_link}" if dash else
               "no dashboard (python3-bokeh is not installed)"))

    def slots(self):
        """Workers that can take a point now (each has ``emulator`` once)."""
        workers = self.client.scheduler_info().get("workers") or {}
        return sum(1 for w in workers.values() if (w.get("resources") or {}).get(RESOURCE))

    def room(self):
        if not self.futures:
            return 1            # queued at the scheduler until a worker joins
        return max(0, self.slots() - len(self.futures))

    def busy(self):
        return len(self.futures)

    def describe(self):
        return f"dask ({self.where})"

    def submit(self, job):
        from bufferbloat.net.bottleneck import features_for  # noqa: PLC0415
        spec = dict(job.spec, code=self.code, stop_event=self.event_name)
        if job.run is not None:        # what the worker's kernel must have (else its VM)
            spec["features"] = sorted(features_for(job.run.topo))
        key = re.sub(r"[^A-Za-z0-9_.=,-]", "_", job.label)[:80]
        fut = self.client.submit(run_remote, spec, resources={RESOURCE: 1}, pure=False,
                                 key=f"bufferbloat-{key}-{uuid.uuid4().hex[:8]}")
        self.futures[fut] = job

    def next_done(self):
        """(job, Outcome) of the next point to finish (a degraded run is set aside and
        sent again, up to the job's retries, before it counts)."""
        while True:
            try:
                done, _ = self.distributed.wait(list(self.futures),
                                                return_when="FIRST_COMPLETED")
            except CancelledError:       # the scheduler was lost, its tasks with it
                done = [f for f in self.futures if f.status == "cancelled"]
            fut = next(iter(done))
            job = self.futures.pop(fut)
            if fut.status == "cancelled":
                outcome = self._scheduler_lost(job)
            else:
                outcome = self._outcome(job, fut)
            if outcome is not None:
                return job, outcome

    def _scheduler_lost(self, job):
        """The scheduler was lost (restarted, its machine cut off) with ``job`` in
        flight: once it is back (the client reconnects; a new one after Dask's
        reconnection gives up) with a worker, the point is sent again (its workers
        ended their points as they lost it); None. Failed when it is not back within
        SCHEDULER_BACK_S, or after LOST_TRIES losses of this point."""
        job.lost = getattr(job, "lost", 0) + 1
        if job.lost > LOST_TRIES or self.address is None:
            return Outcome("failed", plain=True, exc=RuntimeError(
                f"the scheduler was lost with it in flight ({job.lost} time(s)); "
                "not recorded"))
        self.log(f"  the scheduler ({self.address}) was lost with {job.label} in flight: "
                 f"sending it again once it is back (up to {SCHEDULER_BACK_S:.0f} s)")
        deadline = time.monotonic() + SCHEDULER_BACK_S
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, TimeoutError):
                if self.client.status in ("closing", "closed"):
                    self.client = self.distributed.Client(
                        self.address, timeout=f"{CONNECT_TIMEOUT_S}s")
                    self.event = self.distributed.Event(self.event_name,
                                                        client=self.client)
                if self.client.status == "running":
                    self.client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
                    self.submit(job)
                    return None
            time.sleep(1.0)
        return Outcome("failed", plain=True, exc=RuntimeError(
            f"the scheduler was lost with it in flight and not back within "
            f"{SCHEDULER_BACK_S:.0f} s; not recorded"))

    def _outcome(self, job, fut):
        if fut.status != "finished":
            exc = fut.exception()
            name = type(exc).__name__
            if name == "KilledWorker":
                text = (f"its worker died while running it, again on every worker Dask "
                        f"tried ({exc}); not recorded")
            else:
                text = str(exc)
            return Outcome("failed", exc=RuntimeError(text), plain=True)
        res = fut.result()
        cost = sent(res)
        out = None
        if res.get("archive"):
            try:
                if not unpack_run(res["archive"], job.path, job.key):
                    self.log(f"  a late copy of {job.label} from worker {res['worker']} "
                             "ignored: the recorded run is kept")      # its entry too
                    return Outcome("ok", job.path, verdict_of(read_record(job.path)))
            except ValueError as exc:
                out = Outcome("failed", exc=RuntimeError(f"{exc} (worker {res['worker']})"))
        status = res["status"] if out is None else "failed"
        if out is None:
            if status == "ok":
                health = verdict_of(read_record(job.path))
                if health == "degraded" and job.attempt < job.retries:
                    kept = job.set_aside(job.path)
                    job.attempt += 1
                    self.log(f"  DEGRADED on worker {res['worker']}, kept as {kept}; "
                             f"running it again ({job.attempt}/{job.retries})")
                    self.submit(job)
                    return None
                out = Outcome("ok", job.path, health)
            else:
                error = res.get("error") or status
                out = Outcome(status if status in ("stalled", "interrupted") else "failed",
                              exc=RuntimeError(error), plain=True)
        out.sent = cost
        if cost.get("warning"):
            self.log(f"  warning: {cost['warning']}")
        out.worker = f"worker {res['worker']}"
        out.machine = res["machine"]
        if res.get("where"):
            out.where = f"{res['where']}; its boot {res.get('vm_boots')}"
        return out

    def stop(self):
        """Interrupted: ask the workers to end their points, wait for them (each records
        itself interrupted, its network removed); the jobs that did not finish."""
        jobs = list(self.futures.values())
        with contextlib.suppress(Exception):
            self.event.set()
        with contextlib.suppress(Exception):
            self.distributed.wait(list(self.futures), timeout=CHILD_STOP_S + 30)
        with contextlib.suppress(Exception):
            self.client.cancel(list(self.futures))
        self.futures.clear()
        return jobs

    def close(self):
        if self.cluster is not None and self.client is not None:  # our workers' VMs
            with contextlib.suppress(Exception):                    # end with us
                self.client.run(close_worker_vms)
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.close()
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.close()
        self.settings.close()
