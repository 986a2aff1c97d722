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
    BootWatch,
    boot_bounds,
    lockup_bound,
    parse_append,
    print_tails,
    qemu_args,
    qemu_version,
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
from bufferbloat.vm.watch import DroppingOutput, DroppingProgress, watch_boot

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
    vm = _Session(command, share, env, paths, accel, memory_mb, cpus, append, grace_s,
                  progress, output, attempts=1 if _probe else None)
    one_at_a_time = contextlib.ExitStack()
    if threading.current_thread() is threading.main_thread():
        one_at_a_time.enter_context(signals.handled(STOP_SIGNALS, vm.sig.handler))
    try:
        vm.begin(one_at_a_time, timeout_s)
        vm.boot()
        return vm.outcome()
    except KeyboardInterrupt:
        vm.end = vm.sig.end if vm.sig.got else "interrupt"
        vm.rc = EXIT_INTERRUPTED
        raise
    except _Terminated as exc:
        vm.end = _SIGNAL_END.get(exc.signum, "terminate")
        vm.rc = 128 + exc.signum
        raise SystemExit(vm.rc)
    finally:
        vm.clean_up()
        one_at_a_time.close()


class _Session:
    """One :func:`run` once its settings are checked, in steps: :meth:`begin` (the lock,
    the folders), :meth:`boot` (until the command starts), :meth:`outcome` (the exit
    code), :meth:`clean_up` (always); and what the clean-up needs however far the run
    got: the control and temporary directories, the live file, qemu, the exit code and
    how the run ended (``end``), the boots recorded (``record``)."""

    def __init__(self, command, share: Path, env: dict | None, paths, accel: str,
                 memory_mb: int, cpus: int, append, grace_s: float, progress, output,
                 attempts: int | None = None):
        self.command, self.share, self.env, self.paths = command, share, env, paths
        self.accel, self.memory_mb, self.cpus, self.append = accel, memory_mb, cpus, append
        self.grace_s, self.progress, self.output = grace_s, progress, output
        self.bound_s, self.first_s, self.attempts = boot_bounds(accel)
        self.lockup_s = lockup_bound()
        if attempts is not None:
            self.attempts = attempts
        self.run_id = new_run_id()
        self.ctl = share / CONTROL_DIR / self.run_id
        self.record = {
            "run_id": self.run_id,
            "time": datetime.datetime.now().isoformat(timespec="seconds"),
            "accel": accel, "cpus": cpus, "memory_mb": memory_mb,
            "command": command if isinstance(command, str) else shlex.join(command),
            "boot_bound_s": self.bound_s, "first_output_bound_s": self.first_s,
            "attempts_allowed": self.attempts, "boots": [], "rc": None, "end": None}
        self.tmp = self.live = self.proc = self.rc = self.end = None
        self.since = None       # epoch s when the first qemu started (for close_unfinished)
        self.t0 = self.deadline = None
        self.logs = None        # the last boot's (console, qemu) logs
        self.sig = _Signals()

    def begin(self, one_at_a_time: contextlib.ExitStack, timeout_s: float | None) -> None:
        """Wait for this machine's run lock (held in ``one_at_a_time``), clean up after
        killed commands, make the control and temporary directories and the live file;
        the timeout's clock starts."""
        # One project VM per machine: two TCG guests share the host's cores and distort
        # each other's timing (and every measurement with it).
        one_at_a_time.enter_context(locked(
            cache_dir() / "run.lock", self.progress,
            "vm: another project VM is running on this machine; waiting for it to end"))
        # the lock is ours: a live file left now is a command killed with SIGKILL
        recover_killed(self.progress)
        self.t0 = time.monotonic()
        self.deadline = self.t0 + timeout_s if timeout_s else None
        self.ctl.mkdir(parents=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=f"bb-vm-{self.run_id}-"))
        # what the next command must clean up should this one be killed (SIGKILL)
        self.live = LiveFile(self.run_id, self.share, self.command, self.ctl, self.tmp)

    def boot(self) -> None:
        """Boot until the command starts: a fresh copy after a boot that hung or whose
        qemu exited before, EXIT_BOOT_FAILED after the last attempt."""
        qenv = dict(os.environ, TMPDIR=str(self.tmp))   # the snapshot overlay goes there too
        for attempt in range(1, self.attempts + 1):
            outcome, watch = self._boot_once(attempt, qenv)
            if outcome == "timeout":
                self.end = "timeout"
            if outcome in ("hung", "qemu-exit") and not self.sig.got:
                self.progress(f"vm: boot {attempt}/{self.attempts} failed at stage "
                              f"{watch.stage!r} ({self.end}); qemu (pid {self.proc.pid}) "
                              "stopped; last console lines:")
                print_tails(self.progress, *self.logs, 15, 5)
                kept = keep_failed_boot(self.logs[0].parent, f"{self.run_id}-boot{attempt}")
                if kept is not None:
                    self.record["boots"][-1]["logs"] = str(kept)
                    self.progress(f"vm: that boot's console, output and qemu logs kept in "
                                  f"{kept}")
                self.end = "boot"
                if attempt < self.attempts:
                    self.progress("vm: booting a fresh copy of the VM")
                    continue
                self.progress(f"vm: error: the project VM did not start the command in "
                              f"{self.attempts} boot(s) (stages reached: "
                              f"{', '.join(b['stage'] for b in self.record['boots'])}); "
                              f"exit code {EXIT_BOOT_FAILED}")
                self.rc = EXIT_BOOT_FAILED
            break

    def _boot_once(self, attempt: int, qenv: dict) -> tuple[str, BootWatch]:
        """Boot ``attempt``: qemu started, the guest's output streamed until the command
        ends or the boot fails (:func:`watch_boot`), qemu stopped, the boot recorded;
        returns (outcome, the boot's watch)."""
        console_log, out_log, qemu_log = _boot_files(self.ctl, self.tmp, attempt,
                                                     self.command, self.env, self.accel,
                                                     self.record["boots"])
        self.logs = console_log, qemu_log
        argv = qemu_args(self.paths, self.run_id, self.share, console_log, out_log, self.accel,
                         self.memory_mb, self.cpus, qemu=tool("qemu-system-x86_64"),
                         append=self.append)
        self.progress(f"vm: booting the project VM ({self.accel}, {self.cpus} CPU, "
                      f"{self.memory_mb} MB, kernel {self.paths.kernel_release or '?'}), run "
                      f"{self.run_id}, boot {attempt}/{self.attempts} (the command must "
                      f"start within {self.bound_s:.0f}s)")
        t_boot = time.monotonic()
        if self.since is None:
            self.since = time.time() - 2.0
        with open(qemu_log, "wb") as qlog:
            # qemu dies with this process, even by SIGKILL (PR_SET_PDEATHSIG)
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=qlog,
                                         stderr=subprocess.STDOUT, env=qenv,
                                         start_new_session=True,
                                         preexec_fn=signals.die_with_parent)
        proc = self.proc
        self.live.update(qemu_pid=proc.pid, qemu_start=signals.proc_start_time(proc.pid),
                         since=self.since, record=self.record)
        self.sig.armed = True
        watch = BootWatch(self.bound_s, self.first_s)
        outcome, self.end = watch_boot(proc, watch, t_boot, self.ctl, console_log, out_log,
                                       qemu_log, self.output, self.accel, self.deadline,
                                       self.sig, self.grace_s, self.progress, self.lockup_s)
        self.sig.armed = False
        stop_process(proc)
        self.record["boots"].append({
            "attempt": attempt, "outcome": outcome, "stage": watch.stage,
            "stages": watch.times, "boot_s": watch.times.get("command"),
            "qemu_pid": proc.pid, "qemu_rc": proc.returncode})
        return outcome, watch

    def outcome(self) -> int:
        """The exit code, once the boots are over: the boots reported; on a signal the
        run is interrupted (KeyboardInterrupt, _Terminated); else the guest command's
        (:func:`_guest_rc`) unless the boots failed."""
        wall = time.monotonic() - self.t0
        boots = self.record["boots"]
        retries = len(boots) - 1
        if boots and boots[-1]["outcome"] == "started":
            self.progress(f"vm: boots: {len(boots)} ({retries} retr"
                          f"{'y' if retries == 1 else 'ies'}), the command started "
                          f"{boots[-1]['boot_s']:.1f}s after qemu started")
        if self.sig.got:
            self.end = self.sig.end
            self.progress(f"vm: {self.sig.name}: the VM is stopped ({wall:.1f}s wall)")
            raise KeyboardInterrupt if self.sig.got == signal.SIGINT \
                else _Terminated(self.sig.got)
        if self.rc is None:
            self.rc, self.end = _guest_rc(self.ctl, self.end, self.proc, wall, *self.logs,
                                          self.progress)
        return self.rc

    def clean_up(self) -> None:
        """However far the run got: qemu stopped, the run records under the share left
        ``running`` closed, the boots recorded, the control and temporary directories
        and the live file removed."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            self.progress(f"vm: stopping qemu (pid {proc.pid})")
            stop_process(proc)
        if self.since is not None:
            close_unfinished(result_roots(self.share, self.command), self.since,
                             self.end if self.end in END_STATUS else "crash", self.progress)
            self.record["end"], self.record["rc"] = self.end, self.rc
            self.record["wall_s"] = round(time.monotonic() - self.t0, 1)   # lock held: no waiting
            if self.output.dropped or self.progress.dropped:
                self.record["output_dropped"] = True
            _append_boot_log(self.record)
        shutil.rmtree(self.ctl, ignore_errors=True)
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
        if self.live is not None:
            self.live.remove()


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


#: how many failed boots' logs :func:`keep_failed_boot` keeps (the newest)
FAILED_BOOTS_KEPT = 30


def keep_failed_boot(attempt_dir: Path, name: str) -> Path | None:
    """A failed boot's logs (console, the guest's output, qemu's) copied from its
    temporary ``attempt_dir`` to ``failed-boots/<name>`` beside :func:`boot_log_path`,
    so that a boot the next attempt replaced can still be read (where it stopped, what
    bb-run said); only the newest :data:`FAILED_BOOTS_KEPT` are kept. None when they
    cannot be written (no error: the boot is retried or reported all the same)."""
    try:
        root = boot_log_path().parent / "failed-boots"
        dest = root / name
        dest.mkdir(parents=True, exist_ok=True)
        for log in ("console.log", "out.log", "qemu.log"):
            with contextlib.suppress(FileNotFoundError):
                shutil.copyfile(attempt_dir / log, dest / log)
        kept = sorted(root.iterdir(), key=lambda d: d.stat().st_mtime)
        for old in kept[:-FAILED_BOOTS_KEPT]:
            shutil.rmtree(old, ignore_errors=True)
        return dest
    except (OSError, VMError):
        return None


def _append_boot_log(record: dict) -> None:
    """One JSON line for the run (its boots) in :func:`boot_log_path`; a log that cannot
    be written is no error."""
    with contextlib.suppress(OSError, VMError):
        log = boot_log_path()
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as f:
            f.write(json.dumps(record, default=str) + "\n")
