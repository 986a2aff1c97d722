"""One run of a command in a fresh project VM (:func:`run`): the image, the accelerator,
the boots under the watchdog, the output streamed, the interrupts, the exit code, and
the boots recorded.

On Ctrl-C (SIGINT) or SIGTERM the host writes ``stop`` in the control directory; bb-run
sends SIGINT to the command's process group (a bufferbloat run then records
``interrupted`` and keeps its series); the host streams the output for up to
STOP_GRACE_S (20 s; env BUFFERBLOAT_VM_STOP_GRACE) until the guest powers off, then
stops qemu (a second signal stops it at once). Then the run records the command left
``running`` are closed (:func:`bufferbloat.vm.control.close_unfinished`). Every run
appends one JSON line (its boots: outcome, stage reached, seconds from qemu start to
each stage; retries; exit code; how it ended) to ``boots.jsonl`` in the image cache
(env BUFFERBLOAT_VM_BOOT_LOG); the guest command sees its boot number and the failed
boots before it in env BUFFERBLOAT_VM_BOOTS (JSON).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Sequence

from bufferbloat.core import signals
from bufferbloat.core.atomic import write_json_atomic
from bufferbloat.core.errors import (
    EXIT_BOOT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_LOCKUP,
    EXIT_NO_RESULT,
    EXIT_TIMEOUT,
)
from bufferbloat.core.params import env_number
from bufferbloat.vm.boot import (
    APPEND_ENV,
    LOCKUP_S,
    BootWatch,
    boot_bounds,
    guest_lockup,
    lockup_bound,
    parse_append,
    print_tails,
    qemu_args,
    qemu_version,
    read_text,
)
from bufferbloat.vm.common import (
    REPO_ROOT,
    REQUIRED_TOOLS,
    Progress,
    VMError,
    cache_dir,
    check_tools,
    locked,
    quiet,
    stderr,
    stop_process,
    tool,
)
from bufferbloat.vm.control import (
    CONTROL_DIR,
    END_STATUS,
    close_unfinished,
    make_command_script,
    new_run_id,
    result_roots,
)
from bufferbloat.vm.image import build_image

GUEST_ACCEL_ENV = "BUFFERBLOAT_GUEST_ACCEL"   # set in the guest command's environment
ACCEL_ENV = "BUFFERBLOAT_VM_ACCEL"
DEFAULT_TIMEOUT_S = 4 * 3600.0
KVM_PROBE_TIMEOUT_S = 90.0
BOOT_LOG_ENV = "BUFFERBLOAT_VM_BOOT_LOG"             # where boots are recorded (JSON lines)
GUEST_BOOTS_ENV = "BUFFERBLOAT_VM_BOOTS"             # set in the guest command's environment
#: on Ctrl-C/SIGTERM the guest command gets SIGINT and this long to save its results
STOP_GRACE_S = 20.0
STOP_GRACE_ENV = "BUFFERBLOAT_VM_STOP_GRACE"


def boot_log_path() -> Path:
    """Where :func:`run` appends one JSON line per VM run (its boots): env
    BUFFERBLOAT_VM_BOOT_LOG, else ``boots.jsonl`` in the image cache."""
    return Path(os.environ.get(BOOT_LOG_ENV) or cache_dir() / "boots.jsonl")


def probe_kvm(progress: Progress | None = stderr) -> bool:
    """Whether qemu can boot the project VM with KVM here. Env BUFFERBLOAT_VM_ACCEL=tcg|kvm
    overrides; otherwise the verdict of one trial boot (``true`` with -accel kvm, 90 s
    at most) is cached per host kernel release and qemu version. The trial boot is
    watched like any other (:class:`BootWatch` with the KVM bounds, one attempt): a
    KVM that prints nothing, or does not reach the command in time, cannot boot it."""
    progress = progress or quiet
    forced = os.environ.get(ACCEL_ENV, "").strip().lower()
    if forced:
        if forced not in ("tcg", "kvm"):
            raise VMError(f"{ACCEL_ENV}={forced!r}: expected tcg or kvm")
        return forced == "kvm"
    if not os.path.exists("/dev/kvm") or not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    cache = cache_dir()
    ident = {"host_kernel": os.uname().release, "qemu": qemu_version()}
    verdict_file = cache / "kvm-probe.json"
    try:
        old = json.loads(verdict_file.read_text())
        if {k: old.get(k) for k in ident} == ident:
            return bool(old["kvm_ok"])
    except (OSError, ValueError, KeyError):
        pass
    progress("vm: probing whether KVM can boot the project VM (once per host kernel/qemu)")
    t0 = time.monotonic()
    with open(os.devnull, "wb") as devnull:
        rc = run(["true"], accel="kvm", timeout_s=KVM_PROBE_TIMEOUT_S, progress=quiet,
                 output=devnull, memory_mb=1024, cpus=1, _probe=True)
    ok = rc == 0
    progress(f"vm: KVM {'boots' if ok else 'cannot boot'} the VM "
             f"({time.monotonic() - t0:.0f}s): using {'kvm' if ok else 'tcg'}")
    with contextlib.suppress(OSError):
        write_json_atomic(verdict_file, {**ident, "kvm_ok": ok})
    return ok


def choose_accel(progress: Progress | None = stderr) -> str:
    return "kvm" if probe_kvm(progress) else "tcg"


#: what ends a VM run from outside: Ctrl-C, SIGTERM, the terminal closing (SIGHUP)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: how a run that ended on a signal ended (control.END_STATUS's keys)
_SIGNAL_END = {signal.SIGINT: "interrupt", signal.SIGTERM: "terminate",
               signal.SIGHUP: "hangup"}


class _Terminated(Exception):
    """SIGTERM or SIGHUP (or the parent's death, taken as SIGHUP): exit 128 + signal."""

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _Signals:
    """SIGINT/SIGTERM/SIGHUP while a VM runs: the first one is noted (the run loop asks
    the guest to stop its command, then stops qemu); before qemu runs, or a second time,
    they raise at once (KeyboardInterrupt, _Terminated). The death of the process that
    started us (we are re-parented) counts as SIGHUP: nobody is left to see the run."""

    def __init__(self):
        self.got: int | None = None
        self.armed = False
        self.ppid = os.getppid()

    def handler(self, signum, frame):
        if self.armed and self.got is None:
            self.got = signum
            return
        if self.got is None:
            self.got = signum
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise _Terminated(signum)

    def orphaned(self) -> bool:
        """True (once, noted as SIGHUP) when our parent has died since we started."""
        if self.got is None and os.getppid() != self.ppid:
            self.got = signal.SIGHUP
            return True
        return False

    @property
    def end(self) -> str:
        """control.END_STATUS's key for the signal (interrupt, terminate, hangup)."""
        return _SIGNAL_END.get(self.got, "terminate")

    @property
    def name(self) -> str:
        return signal.Signals(self.got).name if self.got else ""


def run(command: Sequence[str] | str, share: Path | str | None = None,
        timeout_s: float | None = DEFAULT_TIMEOUT_S, memory_mb: int = 3072, cpus: int = 2,
        progress: Progress | None = stderr, env: dict | None = None,
        accel: str | None = None, output=None, _probe: bool = False) -> int:
    """Run ``command`` in a fresh project VM; return its exit code.

    ``command`` is an argument list (quoted safely, exec'd) or a bash script body (str).
    It runs as root with cwd /bb (= ``share``, default the checkout, else the current
    directory), PYTHONPATH=/bb and
    the extra ``env`` variables; its stdout+stderr are streamed to ``output`` (a binary
    file, default our stdout) while it runs. Root fs changes are discarded (snapshot);
    files written under /bb land in ``share`` on the host.

    Boot watchdog (:class:`BootWatch`, :func:`boot_bounds`): a boot whose command has
    not started within the bound is stopped (by PID) and a fresh copy booted; after
    the last attempt EXIT_BOOT_FAILED (4). Boots are appended to :func:`boot_log_path`.

    Returns the command's exit code, or EXIT_NO_RESULT (3) if the guest gave none (crash),
    EXIT_TIMEOUT (124) after ``timeout_s`` seconds. On Ctrl-C or SIGTERM the guest
    command gets SIGINT (through the control directory) and STOP_GRACE_S to finish,
    then qemu is stopped; run records under the share left ``running`` are closed
    (:func:`close_unfinished`), and KeyboardInterrupt / SystemExit(143) is raised.
    """
    progress = DroppingProgress(progress or quiet)
    output = DroppingOutput(sys.stdout.buffer if output is None else output)
    make_command_script(command, env)          # validate before booting
    share = Path(share or REPO_ROOT or os.getcwd()).resolve()
    if not share.is_dir():
        raise VMError(f"share {share} is not a directory")
    append = parse_append(os.environ.get(APPEND_ENV))
    grace_s = env_number(STOP_GRACE_ENV, STOP_GRACE_S, 0, 3600, "seconds, 0 to 3600",
                         error=VMError)
    check_tools({"qemu-system-x86_64": REQUIRED_TOOLS["qemu-system-x86_64"]})
    paths = build_image(progress=progress)
    if accel is None:
        accel = choose_accel(progress)
    bound_s, first_s, attempts = boot_bounds(accel)
    lockup_s = lockup_bound()
    if _probe:
        attempts = 1
    run_id = new_run_id()
    ctl = share / CONTROL_DIR / run_id
    record = {"run_id": run_id, "time": datetime.datetime.now().isoformat(timespec="seconds"),
              "accel": accel, "cpus": cpus, "memory_mb": memory_mb,
              "command": command if isinstance(command, str) else shlex.join(command),
              "boot_bound_s": bound_s, "first_output_bound_s": first_s,
              "attempts_allowed": attempts, "boots": [], "rc": None, "end": None}
    tmp = None
    live = None
    proc = None
    rc = None
    since = None            # epoch s when the first qemu started (for close_unfinished)
    end = None
    sig = _Signals()
    one_at_a_time = contextlib.ExitStack()
    if threading.current_thread() is threading.main_thread():
        one_at_a_time.enter_context(signals.handled(STOP_SIGNALS, sig.handler))
    try:
        # One project VM per machine: two TCG guests share the host's cores and distort
        # each other's timing (and every measurement with it).
        one_at_a_time.enter_context(locked(
            cache_dir() / "run.lock", progress,
            "vm: another project VM is running on this machine; waiting for it to end"))
        # the lock is ours: a live file left now is a command killed with SIGKILL
        recover_killed(progress)
        t0 = time.monotonic()
        deadline = t0 + timeout_s if timeout_s else None
        ctl.mkdir(parents=True)
        tmp = Path(tempfile.mkdtemp(prefix=f"bb-vm-{run_id}-"))
        # what the next command must clean up should this one be killed (SIGKILL)
        live = LiveFile(run_id, share, command, ctl, tmp)
        qenv = dict(os.environ, TMPDIR=str(tmp))   # the snapshot overlay goes there too
        for attempt in range(1, attempts + 1):
            console_log, out_log, qemu_log = _boot_files(ctl, tmp, attempt, command, env,
                                                         accel, record["boots"])
            argv = qemu_args(paths, run_id, share, console_log, out_log, accel, memory_mb,
                             cpus, qemu=tool("qemu-system-x86_64"), append=append)
            progress(f"vm: booting the project VM ({accel}, {cpus} CPU, {memory_mb} MB, "
                     f"kernel {paths.kernel_release or '?'}), run {run_id}, boot "
                     f"{attempt}/{attempts} (the command must start within {bound_s:.0f}s)")
            t_boot = time.monotonic()
            if since is None:
                since = time.time() - 2.0
            with open(qemu_log, "wb") as qlog:
                # qemu dies with this process, even by SIGKILL (PR_SET_PDEATHSIG)
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=qlog,
                                        stderr=subprocess.STDOUT, env=qenv,
                                        start_new_session=True,
                                        preexec_fn=signals.die_with_parent)
            live.update(qemu_pid=proc.pid, qemu_start=signals.proc_start_time(proc.pid),
                        since=since, record=record)
            sig.armed = True
            watch = BootWatch(bound_s, first_s)
            outcome, end = _watch_boot(proc, watch, t_boot, ctl, console_log, out_log,
                                       qemu_log, output, accel, deadline, sig, grace_s,
                                       progress, lockup_s)
            sig.armed = False
            stop_process(proc)
            boot = {"attempt": attempt, "outcome": outcome, "stage": watch.stage,
                    "stages": watch.times, "boot_s": watch.times.get("command"),
                    "qemu_pid": proc.pid, "qemu_rc": proc.returncode}
            record["boots"].append(boot)
            if outcome == "timeout":
                end = "timeout"
            if outcome in ("hung", "qemu-exit") and not sig.got:
                progress(f"vm: boot {attempt}/{attempts} failed at stage {watch.stage!r} "
                         f"({end}); qemu (pid {proc.pid}) stopped; last console lines:")
                print_tails(progress, console_log, qemu_log, 15, 5)
                end = "boot"
                if attempt < attempts:
                    progress("vm: booting a fresh copy of the VM")
                    continue
                progress(f"vm: error: the project VM did not start the command in "
                         f"{attempts} boot(s) (stages reached: "
                         f"{', '.join(b['stage'] for b in record['boots'])}); "
                         f"exit code {EXIT_BOOT_FAILED}")
                rc = EXIT_BOOT_FAILED
            break
        wall = time.monotonic() - t0
        retries = len(record["boots"]) - 1
        if record["boots"] and record["boots"][-1]["outcome"] == "started":
            progress(f"vm: boots: {len(record['boots'])} ({retries} retr"
                     f"{'y' if retries == 1 else 'ies'}), the command started "
                     f"{record['boots'][-1]['boot_s']:.1f}s after qemu started")
        if sig.got:
            end = sig.end
            progress(f"vm: {sig.name}: the VM is stopped ({wall:.1f}s wall)")
            raise KeyboardInterrupt if sig.got == signal.SIGINT else _Terminated(sig.got)
        if rc is None:
            rc, end = _guest_rc(ctl, end, proc, wall, console_log, qemu_log, progress)
        return rc
    except KeyboardInterrupt:
        end = sig.end if sig.got else "interrupt"
        rc = EXIT_INTERRUPTED
        raise
    except _Terminated as exc:
        end = _SIGNAL_END.get(exc.signum, "terminate")
        rc = 128 + exc.signum
        raise SystemExit(rc)
    finally:
        if proc is not None and proc.poll() is None:
            progress(f"vm: stopping qemu (pid {proc.pid})")
            stop_process(proc)
        if since is not None:
            close_unfinished(result_roots(share, command), since,
                             end if end in END_STATUS else "crash", progress)
            record["end"], record["rc"] = end, rc
            record["wall_s"] = round(time.monotonic() - t0, 1)   # lock held: no waiting
            if output.dropped or progress.dropped:
                record["output_dropped"] = True
            _append_boot_log(record)
        shutil.rmtree(ctl, ignore_errors=True)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if live is not None:
            live.remove()
        one_at_a_time.close()


class DroppingOutput:
    """The guest's output stream: a reader that went away (``| head``, a closed terminal)
    is no error; what follows is dropped, the run and its bookkeeping go on."""

    def __init__(self, stream):
        self.stream = stream
        self.dropped = False

    def write(self, data: bytes) -> None:
        if not self.dropped:
            try:
                self.stream.write(data)
            except (BrokenPipeError, OSError, ValueError):
                self._drop()

    def flush(self) -> None:
        if not self.dropped:
            try:
                self.stream.flush()
            except (BrokenPipeError, OSError, ValueError):
                self._drop()

    def _drop(self) -> None:
        self.dropped = True
        signals.silence_closed_stream(self.stream)


class DroppingProgress:
    """``progress`` that never raises for a closed stream (its lines are then dropped;
    the default, :func:`stderr`, has its closed stderr pointed at /dev/null)."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.dropped = False

    def __call__(self, msg: str) -> None:
        if self.dropped:
            return
        try:
            self.progress(msg)
        except (BrokenPipeError, OSError, ValueError):
            self.dropped = True
            if self.progress is stderr:
                signals.silence_closed_stream(sys.stderr)


class LiveFile:
    """``live/<run id>.json`` in the image cache while a VM command runs: this process
    (PID and start time), its qemu, the control and temporary directories, the share
    and the command. A command killed by SIGKILL cannot clean up: the next one finds
    the file (:func:`recover_killed`), stops that qemu by PID if it still runs, closes
    the run records it left ``running``, records its boots and removes its folders."""

    def __init__(self, run_id: str, share: Path, command, ctl: Path, tmp: Path):
        self.path = cache_dir() / "live" / f"{run_id}.json"
        self.data = {"run_id": run_id, "host_pid": os.getpid(),
                     "host_start": signals.proc_start_time(os.getpid()),
                     "share": str(share),
                     "command": command if isinstance(command, str) else list(command),
                     "ctl": str(ctl), "tmp": str(tmp)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.update()

    def update(self, **fields) -> None:
        self.data.update(fields)
        with contextlib.suppress(OSError):
            write_json_atomic(self.path, self.data)

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def recover_killed(progress: Progress = quiet) -> list[str]:
    """Clean up after VM commands that were killed (their :class:`LiveFile` is left and
    their process is gone; call with the run lock held): their qemu stopped by PID (if
    it still runs: checked by its start time), their run records left ``running``
    closed as ``interrupted``, one boots.jsonl line each (end ``killed``), their
    control and temporary directories removed. Returns their run ids."""
    done = []
    live_dir = cache_dir() / "live"
    for path in sorted(live_dir.glob("*.json")) if live_dir.is_dir() else ():
        try:
            data = json.loads(path.read_text())
            host_pid, host_start = int(data["host_pid"]), data.get("host_start")
        except (OSError, ValueError, KeyError, TypeError):
            progress(f"vm: removing an unreadable live file {path}")
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        if host_pid != os.getpid() and signals.same_process(host_pid, host_start):
            continue          # still running (it cannot hold the lock: a stale wait)
        qemu_pid = data.get("qemu_pid")
        stopped = []
        if qemu_pid and signals.same_process(qemu_pid, data.get("qemu_start")):
            signals.end_processes({qemu_pid: data.get("qemu_start")}, grace_s=10.0)
            stopped.append(qemu_pid)
        closed = []
        if data.get("since") is not None:
            command = data.get("command") or []
            closed = close_unfinished(result_roots(Path(data["share"]), command),
                                      float(data["since"]), "killed", progress)
        record = dict(data.get("record") or {"run_id": data.get("run_id")})
        record.update(end="killed", rc=None, recovered_by_pid=os.getpid(),
                      recovered_at=datetime.datetime.now().isoformat(timespec="seconds"))
        _append_boot_log(record)
        for key in ("ctl", "tmp"):
            if data.get(key):
                shutil.rmtree(data[key], ignore_errors=True)
        with contextlib.suppress(OSError):
            path.unlink()
        progress(f"vm: run {data.get('run_id')} of a killed command (pid {host_pid}) "
                 f"cleaned up: qemu {'stopped (pid ' + str(stopped[0]) + ')' if stopped else 'already gone'}, "
                 f"{len(closed)} run record(s) closed, its folders removed")
        done.append(data.get("run_id"))
    return done


def _boot_files(ctl: Path, tmp: Path, attempt: int, command: Sequence[str] | str,
                env: dict | None, accel: str, boots: list) -> tuple[Path, Path, Path]:
    """The control directory made ready for boot ``attempt`` (the guest's files of an
    earlier boot removed, ``cmd`` written), and the boot's (console, output, qemu) logs.
    The guest learns how it is emulated (TCG: the engine keeps rates the VM sustains)
    and which boot this is."""
    for name in ("started", "booted", "rc", "rc.tmp", "stop"):
        with contextlib.suppress(FileNotFoundError):
            (ctl / name).unlink()
    guest_boots = {"attempt": attempt, "failed": [
        {k: b[k] for k in ("attempt", "stage", "outcome")} for b in boots]}
    (ctl / "cmd").write_text(make_command_script(command, dict(
        env or {}, **{GUEST_ACCEL_ENV: accel, GUEST_BOOTS_ENV: json.dumps(guest_boots)})))
    adir = tmp / f"boot-{attempt}"
    adir.mkdir()
    return adir / "console.log", adir / "out.log", adir / "qemu.log"


def _guest_rc(ctl: Path, end: str | None, proc, wall: float, console_log: Path,
              qemu_log: Path, progress: Progress) -> tuple[int, str | None]:
    """(exit code, how the run ended): the guest command's, from its ``rc`` file; else
    EXIT_LOCKUP, EXIT_TIMEOUT or EXIT_NO_RESULT, with the end of the console log
    shown."""
    rc_file = ctl / "rc"
    rc_text = rc_file.read_text().strip() if rc_file.is_file() else ""
    if rc_text.isdigit():
        progress(f"vm: guest command exited with {int(rc_text)} ({wall:.1f}s wall)")
        return int(rc_text), "exit"
    progress(f"vm: the guest gave no exit status ({end}, qemu exit {proc.returncode}, "
             f"{wall:.1f}s); last console lines:")
    print_tails(progress, console_log, qemu_log, 40, 10)
    if end == "lockup":
        progress(f"vm: error: the guest kernel locked up (an emulator fault, not the "
                 f"command's); exit code {EXIT_LOCKUP}")
        return EXIT_LOCKUP, end
    return (EXIT_TIMEOUT if end == "timeout" else EXIT_NO_RESULT), end


def _append_boot_log(record: dict) -> None:
    """One JSON line for the run (its boots) in :func:`boot_log_path`; a log that cannot
    be written is no error."""
    with contextlib.suppress(OSError, VMError):
        log = boot_log_path()
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as f:
            f.write(json.dumps(record, default=str) + "\n")


def _watch_boot(proc, watch: BootWatch, t_boot: float, ctl: Path, console_log: Path,
                out_log: Path, qemu_log: Path, output, accel: str, deadline: float | None,
                sig: _Signals, grace_s: float, progress: Progress,
                lockup_s: float = LOCKUP_S) -> tuple[str, str | None]:
    """Stream the guest's output while qemu runs; returns (outcome, end): outcome
    "started" (the command started), "hung" or "qemu-exit" (before it started);
    end: None, or why the VM is to be stopped (timeout, interrupt, crash, lockup: the
    guest kernel reported a CPU stuck for ``lockup_s`` or more)."""
    out_f = None
    stop_at = None
    end = None
    next_lockup_check = 0.0

    def pump() -> None:
        nonlocal out_f
        if out_f is None:
            try:
                out_f = open(out_log, "rb")
            except FileNotFoundError:
                return
        while True:
            chunk = out_f.read(65536)
            if not chunk:
                break
            output.write(chunk.replace(b"\r", b""))
        output.flush()

    try:
        while proc.poll() is None:
            time.sleep(0.2)
            pump()
            now = time.monotonic()
            if not watch.started:
                hung = watch.update(now - t_boot, read_text(console_log),
                                    (ctl / "started").exists())
                if watch.started:
                    progress(f"vm: guest command started {now - t_boot:.1f}s after boot "
                             f"({watch.summary()})")
                elif hung and not sig.got:
                    return "hung", hung
            if watch.started and now >= next_lockup_check and stop_at is None:
                next_lockup_check = now + 5.0
                locked_up = guest_lockup(read_text(console_log), lockup_s)
                if locked_up:
                    progress(f"vm: {locked_up}: stopping qemu (pid {proc.pid})")
                    return "started", "lockup"
            if accel == "kvm" and b"KVM internal error" in qemu_log.read_bytes()[-65536:]:
                progress("vm: KVM internal error: this KVM cannot run the guest")
                return ("started" if watch.started else "qemu-exit"), "crash"
            if sig.orphaned():
                progress("vm: the process that started this command has died: "
                         "stopping the VM as on SIGHUP")
            if sig.got and stop_at is None:
                end = sig.end
                if not watch.started:
                    progress(f"vm: {sig.name} before the command started: stopping qemu "
                             f"(pid {proc.pid})")
                    return "interrupted", end
                progress(f"vm: {sig.name}: asking the guest command to stop (SIGINT in the "
                         f"guest), {grace_s:.0f}s grace; again to stop the VM at once")
                with contextlib.suppress(OSError):
                    (ctl / "stop").write_text(f"{sig.name}\n")
                stop_at = now + grace_s
            if stop_at is not None and now > stop_at:
                progress(f"vm: the guest command did not stop within {grace_s:.0f}s: "
                         f"stopping qemu (pid {proc.pid})")
                return "started", end
            if deadline and now > deadline:
                progress(f"vm: timeout: stopping qemu (pid {proc.pid})")
                return ("started" if watch.started else "timeout"), "timeout"
        pump()
        if not watch.started:
            watch.update(time.monotonic() - t_boot, read_text(console_log),
                         (ctl / "started").exists())
        if not watch.started:
            return ("interrupted" if sig.got else "qemu-exit"), \
                (end or f"qemu exited ({proc.returncode}) before the command started")
        return "started", end or "crash"
    finally:
        with contextlib.suppress(Exception):
            pump()
        if out_f is not None:
            out_f.close()
