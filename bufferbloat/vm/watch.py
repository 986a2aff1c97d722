"""One boot of the project VM watched from the host (:func:`watch_boot`): the guest's
output streamed while qemu runs, the boot watchdog's verdicts (hung, no output, a guest
kernel lockup, a KVM error, the timeout) and a stop signal passed on to the guest
command; and the host's output streams, which a reader gone away never breaks
(:class:`DroppingOutput`, :class:`DroppingProgress`)."""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

from bufferbloat.core import signals
from bufferbloat.vm.boot import LOCKUP_S, BootWatch, guest_lockup, read_text
from bufferbloat.vm.common import Progress, stderr


def watch_boot(proc, watch: BootWatch, t_boot: float, ctl: Path, console_log: Path,
               out_log: Path, qemu_log: Path, output, accel: str, deadline: float | None,
               sig, grace_s: float, progress: Progress,
               lockup_s: float = LOCKUP_S) -> tuple[str, str | None]:
    """Stream the guest's output while qemu runs; returns (outcome, end): outcome
    "started" (the command started), "hung" or "qemu-exit" (before it started);
    end: None, or why the VM is to be stopped (timeout, interrupt, crash, lockup: the
    guest kernel reported a CPU stuck for ``lockup_s`` or more). ``sig``: the run's stop
    signals (bufferbloat/vm/session.py), whose first one is passed on to the guest
    command (``stop`` in the control directory ``ctl``) with ``grace_s`` to end."""
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
