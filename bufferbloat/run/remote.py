"""What a Dask worker does with a point: :func:`run_remote` runs it in a child process
in a network namespace of its own (or in the worker's project VM when its kernel lacks a
piece the point needs) and sends the run back as bytes.

* it refuses a point whose driver runs other code (:func:`~bufferbloat.core.paths.
  code_fingerprint`: both identities in the message), before anything runs;
* the global settings a namespace cannot make (the congestion controls allowed) are
  made once, in the initial namespace, by the worker's command or the local cluster's
  driver (:func:`global_settings`);
* the child's network state file and lock are the worker's own (:func:`slot_dir`), so
  that a restarted worker removes what its dead predecessor left (:func:`clean_slot`:
  processes by PID, as recorded), never by name;
* the child dies with the worker (PR_SET_PDEATHSIG, SIGTERM: it tears its network down
  and records itself interrupted); a run that passes its stall limit is ended;
* it sends back the run directory as a tar archive (:func:`pack_run`) with its
  ``run_key``. The driver's side is :mod:`bufferbloat.run.cluster`.
"""


import contextlib
import glob
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
import uuid
from functools import partial

from bufferbloat.core.errors import UsageError
from bufferbloat.core.paths import IMPORT_ROOT, code_fingerprint
from bufferbloat.core.signals import die_with_parent, proc_start_time, same_process

#: the resource every worker has once: one point at a time per worker
RESOURCE = "emulator"
#: env: where a worker keeps its state (default below, one directory per worker name)
WORKER_DIR_ENV = "BUFFERBLOAT_WORKER_DIR"
WORKER_DIR = "/var/tmp/bufferbloat-workers"
#: seconds a child gets, past its own stall limit, before the worker ends it
CHILD_MARGIN_S = 120.0
#: seconds an interrupted child gets to tear down and record
CHILD_STOP_S = 60.0
#: seconds the driver waits for a scheduler, and for its first worker
CONNECT_TIMEOUT_S = 10.0
FIRST_WORKER_TIMEOUT_S = 120.0


class CodeMismatch(RuntimeError):
    """A worker runs other code than the driver: it refuses the point."""


def worker_root():
    return os.environ.get(WORKER_DIR_ENV) or WORKER_DIR


def slot_dir(name):
    """The directory of the worker named ``name``: its network state file and lock, its
    child's PID, its runs in progress. A restarted worker of the same name finds what
    its predecessor left here."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", str(name)) or "worker"
    path = os.path.join(worker_root(), safe)
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def clean_slot(slot, log=None, runs=True):
    """Remove what an earlier worker of this slot left: its point's child (by the PID
    and start time it recorded), the network that child's state file records, the
    runs in progress (``runs``). Returns a list of what was done, in words."""
    from bufferbloat.net.cleanup import recover  # noqa: PLC0415 - workers only
    done = []
    child = os.path.join(slot, "child.json")
    with contextlib.suppress(OSError, ValueError):
        with open(child) as f:
            rec = json.load(f)
        pid = int(rec["pid"])
        if same_process(pid, rec.get("start")):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + CHILD_STOP_S
            while same_process(pid, rec.get("start")) and time.monotonic() < deadline:
                time.sleep(0.2)
            if same_process(pid, rec.get("start")):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            done.append(f"ended the point child {pid}")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(child)
    state = os.path.join(slot, "network.json")
    if os.path.exists(state):
        got = recover(state, log=log or (lambda m: None))
        if got:
            done.append(f"removed a network: {len(got['processes'])} process(es), "
                        f"link(s) {got['links'] or 'none'}")
    unfinished = os.path.join(slot, "runs")
    if runs and os.path.isdir(unfinished) and os.listdir(unfinished):
        done.append("removed unfinished runs")
    if runs:
        shutil.rmtree(unfinished, ignore_errors=True)
    return done


@contextlib.contextmanager
def global_settings(log=None):
    """For the block (a worker's life, a local cluster's): the global settings a point's
    namespace cannot make, made in this (the initial) namespace: every congestion
    control a topology can select, loaded and allowed
    (net.ipv4.tcp_allowed_congestion_control); the allowed list is restored after."""
    from bufferbloat.net import isolation  # noqa: PLC0415 - workers only
    before = None
    if isolation.in_initial_netns():
        before = isolation.read_sysctl(isolation.ALLOWED_CCAS)
        got = isolation.prepare_ccas()
        if log and got["added"]:
            log(f"allowed congestion controls for the points' namespaces: "
                f"{' '.join(got['added'])} (restored at the end)")
    elif log:
        log("not in this machine's initial network namespace: the congestion controls "
            "the points choose must be allowed there (net.ipv4.tcp_allowed_congestion_"
            "control); a point whose CCA is not allowed fails, saying so")
    try:
        yield
    finally:
        if before is not None:
            with contextlib.suppress(OSError):
                isolation.write_sysctl(isolation.ALLOWED_CCAS, before)


def child_argv(spec_path):
    """The point's child: this Python, in a network namespace of its own."""
    return ["unshare", "--net", "--", sys.executable, "-m", "bufferbloat.worker",
            "point", spec_path]


def _child_env(slot):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(IMPORT_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["BUFFERBLOAT_STATE_PATH"] = os.path.join(slot, "network.json")
    env["BUFFERBLOAT_LOCK_PATH"] = os.path.join(slot, "network.lock")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _stop_requested(name):
    if not name:
        return False
    from distributed import Event  # noqa: PLC0415 - workers only
    try:
        return Event(name).is_set()
    except Exception:  # noqa: BLE001 - the driver gone: its event with it
        return False


def _closing(worker):
    """True once this point's worker is closing: it lost its scheduler (a cut link:
    Dask's comm timeout; or the scheduler dropped it and said so), which has given the
    point to another worker. Its result would never be taken: the point ends now, and
    the worker with it (Dask's close waits up to 30 s for a running task)."""
    status = getattr(getattr(worker, "status", None), "name", "running")
    return status in ("closing", "closed", "closing_gracefully", "failed")


def kernel_missing(features):
    """The kernel pieces (qdiscs, kernel features, CCAs) among ``features`` this
    machine's kernel lacks (the point then runs in the worker's project VM)."""
    from bufferbloat.net.capabilities import probe  # noqa: PLC0415 - workers only
    from bufferbloat.run.where import KERNEL_KINDS  # noqa: PLC0415 - workers only
    caps = probe()
    kinds = {r.name: r.kind for r in caps.rows}
    return [f for f in features or () if kinds.get(f) in KERNEL_KINDS and not caps.has(f)]


class VMWorker:
    """A worker's project VM, booted once and kept across its points (no ~25 s boot per
    point): the guest runs ``python3 -m bufferbloat.worker spool DIR`` on a spool in
    the checkout it shares as /bb (``.scratch/workers/NAME/``); the host drops a point's
    spec there (the guest claims it: ``.running``) and waits for its outcome, then
    removes both; a ``.stop`` file beside a spec interrupts it,
    ``quit`` ends the guest. The VM's command dies with the worker (PR_SET_PDEATHSIG:
    SIGTERM, on which it stops the guest and qemu)."""

    BOOT_WAIT_S = 1200.0        # an image build (~2.5 min) and a TCG boot, at most

    def __init__(self, name, log=None):
        from bufferbloat.core.paths import SOURCE_ROOT  # noqa: PLC0415 - workers only
        if SOURCE_ROOT is None:
            raise UsageError("a worker runs points in its project VM from a checkout "
                             "only (the VM shares it as /bb): start the worker from one")
        self.name = re.sub(r"[^A-Za-z0-9_.-]", "_", str(name))
        self.rel = os.path.join(".scratch", "workers", self.name)
        self.host = os.path.join(str(SOURCE_ROOT), self.rel)
        self.guest = "/bb/" + self.rel
        self.log = log or (lambda m: None)
        self.proc = None
        self.boots = 0

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def ensure(self, stop=lambda: False):
        """Boot the VM unless it runs; wait until its spool is ready."""
        if self.alive() and os.path.exists(os.path.join(self.host, "ready")):
            return
        self.close()
        shutil.rmtree(self.host, ignore_errors=True)
        os.makedirs(self.host)
        from bufferbloat.run.where import prepare_sampler_for_vm  # noqa: PLC0415
        prepare_sampler_for_vm(self.log)
        argv = [sys.executable, "-m", "bufferbloat.vm", "run", "--timeout", "0", "--",
                "python3", "-m", "bufferbloat.worker", "spool", self.guest]
        started = []

        def own():          # PDEATHSIG follows the thread that started the process
            with open(os.path.join(self.host, "..", f"{self.name}.vm.log"), "ab") as log:
                self.proc = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    env=dict(os.environ, PYTHONPATH=str(IMPORT_ROOT)),
                    start_new_session=True,
                    preexec_fn=partial(die_with_parent, signal.SIGTERM))
            started.append(True)
            self.proc.wait()
        import threading  # noqa: PLC0415
        threading.Thread(target=own, daemon=True, name=f"vm-{self.name}").start()
        while not started:
            time.sleep(0.05)
        self.boots += 1
        deadline = time.monotonic() + self.BOOT_WAIT_S
        while not os.path.exists(os.path.join(self.host, "ready")):
            if not self.alive():
                raise RuntimeError(f"the worker's project VM ended before its spool was "
                                   f"ready (exit {self.proc.returncode}; "
                                   f"{self.rel}.vm.log)")
            if stop() or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("the worker's project VM did not start its spool "
                                   f"within {self.BOOT_WAIT_S:.0f} s" if not stop() else
                                   "the driver was interrupted")
            time.sleep(0.5)

    def run(self, spec, stop, deadline):
        """Run ``spec`` in the VM; (status or None, error or None, host run dir, host
        outcome file)."""
        self.ensure(stop)
        pid = uuid.uuid4().hex[:12]
        host_dir = os.path.join(self.host, pid)
        os.makedirs(host_dir)
        guest_dir = f"{self.guest}/{pid}"
        spec_path = os.path.join(self.host, f"{pid}.spec.json")
        with open(spec_path + ".tmp", "w") as f:
            json.dump(dict(spec, run_dir=f"{guest_dir}/run",
                           outcome=f"{guest_dir}/outcome.json"), f)
        os.rename(spec_path + ".tmp", spec_path)
        outcome = os.path.join(host_dir, "outcome.json")
        status, error, stopped_at = None, None, None
        while not os.path.exists(outcome):
            if not self.alive():
                status, error = "failed", ("the worker's project VM ended during the point "
                                           f"(exit {self.proc.returncode}; "
                                           f"{self.rel}.vm.log)")
                break
            if stopped_at is None and (stop() or time.monotonic() > deadline):
                status, error = (("interrupted", "the driver was interrupted") if stop()
                                 else ("stalled", "past its stall limit in the VM: ended"))
                open(spec_path + ".stop", "w").close()
                stopped_at = time.monotonic()
            if stopped_at is not None and time.monotonic() - stopped_at > CHILD_STOP_S:
                self.close()             # the guest did not end it: the VM goes
                break
            time.sleep(0.3)
        for done in glob.glob(spec_path + "*"):     # the spec (.running), its .stop
            with contextlib.suppress(OSError):
                os.unlink(done)
        return status, error, os.path.join(host_dir, "run"), outcome, host_dir

    def close(self):
        """End the guest's spool (``quit``), then the VM's command, by PID."""
        if self.proc is None:
            return
        with contextlib.suppress(OSError):
            open(os.path.join(self.host, "quit"), "w").close()
        try:
            self.proc.wait(timeout=CHILD_STOP_S)
        except subprocess.TimeoutExpired:
            _end(self.proc, signal.SIGTERM)
        self.proc = None
        shutil.rmtree(self.host, ignore_errors=True)


#: this worker process's VM (one per worker: points run one at a time)
_VM = {}


def worker_vm(name):
    if name not in _VM:
        _VM[name] = VMWorker(name)
        import atexit  # noqa: PLC0415
        atexit.register(_VM[name].close)
    return _VM[name]


def close_worker_vms():
    """On a worker: end its project VM (the guest's spool quits, the VM powers off)."""
    for vm in _VM.values():
        vm.close()
    return len(_VM)


def run_remote(spec):
    """On a worker: run one point (``spec``: scenario, overrides, rep, quick,
    duration_s, limit_s, run_key, code, stop_event); returns {status, error, archive
    (the run directory as tar.gz bytes, or None), worker, machine, wall_s, log}.
    Raises :class:`CodeMismatch` when this worker's code is not the driver's."""
    from distributed import get_worker  # noqa: PLC0415 - workers only
    t0 = time.monotonic()
    try:
        worker = get_worker()
        name = str(worker.name)
    except ValueError:
        worker, name = None, "local"
    machine = socket.gethostname()
    mine = code_fingerprint()
    theirs = spec.get("code") or {}
    if mine["hash"] != theirs.get("hash"):
        raise CodeMismatch(
            f"worker {name} on {machine} runs other code than the driver: the worker's "
            f"is {mine['text']} (code hash {mine['hash']}), the driver's is "
            f"{theirs.get('text')} (code hash {theirs.get('hash')}); refused, nothing "
            "run: put the driver's commit on that machine and start the worker again")
    missing = kernel_missing(spec.get("features"))
    if missing:
        return _run_in_worker_vm(spec, name, machine, missing, t0)
    slot = slot_dir(name)
    clean_slot(slot)
    runs = os.path.join(slot, "runs", uuid.uuid4().hex[:12])
    os.makedirs(runs)
    run_dir = os.path.join(runs, "run")
    spec_path = os.path.join(runs, "spec.json")
    with open(spec_path, "w") as f:
        json.dump(dict(spec, run_dir=run_dir, outcome=os.path.join(runs, "outcome.json")),
                  f)
    log_path = os.path.join(runs, "point.log")
    limit = spec.get("limit_s")
    deadline = _deadline(spec)
    status, error = None, None
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(child_argv(spec_path), stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, env=_child_env(slot),
                                start_new_session=True,
                                preexec_fn=partial(die_with_parent, signal.SIGTERM))
    with open(os.path.join(slot, "child.json"), "w") as f:
        json.dump({"pid": proc.pid, "start": proc_start_time(proc.pid)}, f)
    try:
        while proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=1.0)
            if proc.poll() is not None:
                break
            if _stop_requested(spec.get("stop_event")):
                status, error = "interrupted", "the driver was interrupted"
                _end(proc, signal.SIGTERM)
            elif _closing(worker):
                status, error = "interrupted", ("its worker lost the scheduler (cut off, "
                                                "or dropped): ended, run elsewhere")
                _end(proc, signal.SIGTERM)
            elif time.monotonic() > deadline:
                status, error = "stalled", (f"still running {CHILD_MARGIN_S:.0f} s past "
                                            f"its stall limit ({limit} s): ended")
                _end(proc, signal.SIGTERM)
    finally:
        if proc.poll() is None:
            _end(proc, signal.SIGTERM)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(slot, "child.json"))
    if os.path.exists(os.path.join(slot, "network.json")):
        clean_slot(slot, runs=False)    # the child died before removing its network
    with open(log_path, "rb") as f:
        tail = f.read()[-4000:].decode(errors="replace")
    return _reply(spec, status, error, os.path.join(runs, "outcome.json"), run_dir, runs,
                  f"the point's process exited {proc.returncode}", name, machine, t0,
                  log=tail)


def _run_in_worker_vm(spec, name, machine, missing, t0):
    """The point in this worker's project VM (its kernel lacks ``missing``)."""
    vm = worker_vm(name)
    boots = vm.boots

    def stop():
        return _stop_requested(spec.get("stop_event"))
    status, error, run_dir, outcome_path, host_dir = vm.run(spec, stop, _deadline(spec))
    return _reply(spec, status, error, outcome_path, run_dir, host_dir,
                  "the point ended without an outcome", name, machine, t0,
                  where=f"project VM (this kernel lacks {', '.join(missing)})",
                  vm_boots=vm.boots, booted_now=vm.boots > boots)


def _deadline(spec):
    """When the worker ends a point its own watchdog did not: its stall limit plus
    CHILD_MARGIN_S (a day without one)."""
    limit = spec.get("limit_s")
    return time.monotonic() + (float(limit) + CHILD_MARGIN_S if limit else 86400.0)


def _reply(spec, status, error, outcome_path, run_dir, scratch, no_outcome, name,
           machine, t0, log="", **extra):
    """What a worker sends back for a point: its status (``status`` when the worker
    ended it, else the point's own outcome file, else failed with ``no_outcome``), the
    run directory as bytes; ``scratch`` (the point's working copy) is removed."""
    try:
        with open(outcome_path) as f:
            outcome = json.load(f)
    except (OSError, ValueError):
        outcome = {}
    status = status or outcome.get("status") or "failed"
    if status != "ok" and not error:
        error = outcome.get("error") or no_outcome
    archive = pack_run(run_dir) if os.path.isdir(run_dir) else None
    shutil.rmtree(scratch, ignore_errors=True)
    return dict({"status": status, "error": error, "archive": archive, "worker": name,
                 "machine": machine, "wall_s": round(time.monotonic() - t0, 3),
                 "log": log, "run_key": spec.get("run_key")}, **extra)


def _end(proc, sig):
    """End the point's child (ours, by PID): ``sig``, then SIGKILL after CHILD_STOP_S."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, sig)
    try:
        proc.wait(timeout=CHILD_STOP_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def pack_run(run_dir):
    """The run directory as tar.gz bytes (names relative to it)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=3) as tar:
        tar.add(run_dir, arcname=".")
    return buf.getvalue()
