"""Booting the project VM: qemu's command line and the boot watchdog.

The kernel runs without ``quiet``: console.log shows the kernel, the initramfs, systemd
and bb-run's markers, i.e. the stage a boot reached (:func:`boot_stage`). A boot that
prints nothing within FIRST_OUTPUT_S, or whose command has not started within
BOOT_BOUND_S (TCG 150 s: boots measured 19-27 s, ~50 s loaded; env
BUFFERBLOAT_VM_BOOT_TIMEOUT), is hung (:class:`BootWatch`); :func:`boot_bounds` gives
the bounds and the number of boots (BOOT_ATTEMPTS, 3; env BUFFERBLOAT_VM_BOOT_ATTEMPTS).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Sequence

from bufferbloat.core.params import env_number
from bufferbloat.vm.common import Progress, VMError, tool
from bufferbloat.vm.control import RUN_ID
from bufferbloat.vm.image import ImagePaths

SHARE_TAG = "bb"
# Boot watchdog (see :class:`BootWatch`). Measured on this project's machine kind (2
# cores, qemu TCG, 2026-11): qemu start to guest command 19-27 s in 8 boots on a quiet
# machine (median ~23 s), 49-52 s with another process holding one core (the kernel
# prints its first line after 3.6-6.7 s either way); 1 boot in 8 hung before printing
# anything, qemu spinning on both cores. The command must start within BOOT_BOUND_S
# (TCG 150 s: 6.5x the quiet median, 3x the loaded one, so that a busy host costs no
# false alarm) and the console must show a first byte within FIRST_OUTPUT_S (the hang
# seen: caught in 30 s), else that qemu is stopped (by PID) and a fresh copy booted,
# BOOT_ATTEMPTS boots at most. KVM (not usable on this machine kind: its paravirtual
# KVM cannot boot a stock kernel) boots this image in seconds where it works.
# bench/bench_vm_boot.py measures.
TCG_BOOT_MEDIAN_S = 23.0
BOOT_BOUND_S = {"tcg": 150.0, "kvm": 30.0}
FIRST_OUTPUT_S = {"tcg": 30.0, "kvm": 20.0}
BOOT_ATTEMPTS = 3
BOOT_TIMEOUT_ENV = "BUFFERBLOAT_VM_BOOT_TIMEOUT"     # seconds: overrides BOOT_BOUND_S
BOOT_ATTEMPTS_ENV = "BUFFERBLOAT_VM_BOOT_ATTEMPTS"   # overrides BOOT_ATTEMPTS
APPEND_ENV = "BUFFERBLOAT_VM_APPEND"                 # extra kernel command line words


def _qemu_opt(value: str | Path) -> str:
    """Escape a value inside a qemu ``-opt a=b,c=d`` list (commas are doubled)."""
    return str(value).replace(",", ",,")


#: The guest kernel's soft-lockup report (kernel/watchdog.c), printed from ~22 s stuck
#: and every ~28 s after. Seen under TCG when kernel code was patched during a run
#: (docs/design/health.md; the guest now holds those patch points, vm/guest/bb-run): a CPU
#: stuck for good, until stopped from outside; the same tests passed in the next boot.
SOFT_LOCKUP = re.compile(r"watchdog: BUG: soft lockup - CPU#(\d+) stuck for (\d+)s! "
                         r"\[([^\]]*)\]")
#: a CPU reported stuck this long is a locked-up guest: the VM is stopped (exit 6)
LOCKUP_S = 120.0
LOCKUP_ENV = "BUFFERBLOAT_VM_LOCKUP_S"


def lockup_bound() -> float:
    """Seconds a guest CPU may be reported stuck before the VM is stopped (env)."""
    return env_number(LOCKUP_ENV, LOCKUP_S, 30, 86400, "seconds, 30 to 86400",
                      error=VMError)


def guest_lockup(console: str, bound_s: float) -> str | None:
    """Why the guest is locked up (its longest soft lockup, if ``bound_s`` or more), or
    None."""
    worst = None
    for m in SOFT_LOCKUP.finditer(console):
        if int(m[2]) >= bound_s and (worst is None or int(m[2]) > int(worst[2])):
            worst = m
    if worst is None:
        return None
    return (f"the guest kernel locked up: CPU#{worst[1]} stuck for {worst[2]}s in "
            f"{worst[3]} (soft lockup, bound {bound_s:.0f}s)")


_APPEND_WORD = re.compile(r"^[A-Za-z0-9_.,:=/+-]+$")


def parse_append(text: str | None) -> list[str]:
    """Extra kernel command line words (env BUFFERBLOAT_VM_APPEND), e.g. ``bb.delay=60``
    (bb-run waits before the command: a test of the boot watchdog) or
    ``systemd.unit=rescue.target``. Refuses words that would change the run protocol."""
    words = (text or "").split()
    for w in words:
        if not _APPEND_WORD.match(w) or w.startswith("bb.run"):
            raise VMError(f"{APPEND_ENV}: refused kernel command line word {w!r}")
    return words


def kernel_cmdline(run_id: str, extra: Sequence[str] = ()) -> str:
    """Guest kernel command line. No `quiet`: the kernel's messages and systemd's boot
    stages go to the console log, so that a hung boot shows where it stopped (bb-run
    lowers the console log level once the command starts). tsc=reliable: under TCG
    every vCPU reads the same virtual clock, so the TSC (read in the vDSO) can stay the
    clocksource instead of the HPET (an emulated MMIO read per clock_gettime);
    mitigations=off: a throw-away VM without network needs no retpolines, and syscalls
    get cheaper."""
    if not RUN_ID.match(run_id):
        raise VMError(f"invalid run id {run_id!r}")
    words = parse_append(" ".join(extra))
    return (f"root=/dev/vda rw console=ttyS0 bb.run={run_id}"
            f" panic=-1 tsc=reliable mitigations=off{''.join(' ' + w for w in words)}")


def qemu_args(paths: ImagePaths, run_id: str, share: Path | str, console_log: Path | str,
              out_log: Path | str, accel: str = "tcg", memory_mb: int = 3072,
              cpus: int = 2, qemu: str = "qemu-system-x86_64",
              append: Sequence[str] = ()) -> list[str]:
    """The qemu command line of one run (pure: no file is touched)."""
    if accel == "tcg":
        accel_args = ["-accel", "tcg,thread=multi", "-cpu", "max"]
    elif accel == "kvm":
        accel_args = ["-accel", "kvm", "-cpu", "host"]
    else:
        raise VMError(f"unknown accelerator {accel!r} (tcg or kvm)")
    return [
        qemu, "-name", f"bb-vm-{run_id}",
        "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
        *accel_args,
        "-smp", str(int(cpus)), "-m", str(int(memory_mb)),
        "-kernel", str(paths.kernel), "-initrd", str(paths.initrd),
        "-append", kernel_cmdline(run_id, append),
        "-drive", f"file={_qemu_opt(paths.image)},if=virtio,format=raw,snapshot=on",
        "-virtfs", (f"local,path={_qemu_opt(Path(share))},mount_tag={SHARE_TAG},"
                    f"security_model=none,id={SHARE_TAG}"),
        "-device", "virtio-rng-pci",
        "-nic", "none",
        "-serial", f"file:{console_log}",
        "-serial", f"file:{out_log}",
    ]


#: boot stages in order, each with the console text that shows it was reached (the
#: bb-run markers are printed by vm/guest/bb-run; "command" is also the ``started`` file)
BOOT_STAGES = (
    ("qemu", ()),
    ("kernel", ("Linux version ",)),
    ("initramfs", ("Run /init as init process", "Loading, please wait", "bb-init: [")),
    ("systemd", ("systemd[1]:", "Welcome to ", " running in system mode")),
    ("bb-run", ("bb-run: stage bb-run",)),
    ("share", ("bb-run: stage share",)),
    ("held", ("bb-run: stage held",)),
    ("command", ("bb-run: stage command",)),
)
STAGE_NAMES = tuple(name for name, _ in BOOT_STAGES)


def boot_stage(console: str, started: bool = False) -> str:
    """The furthest boot stage the console text (and the ``started`` file) shows."""
    if started:
        return "command"
    reached = "qemu"
    for name, markers in BOOT_STAGES[1:]:
        if any(m in console for m in markers):
            reached = name
    return reached


def boot_bounds(accel: str, environ: dict | None = None) -> tuple[float, float, int]:
    """(command-start bound s, first-console-output bound s, boot attempts) for ``accel``:
    the measured constants, or env BUFFERBLOAT_VM_BOOT_TIMEOUT / _BOOT_ATTEMPTS."""
    environ = os.environ if environ is None else environ
    bound = BOOT_BOUND_S.get(accel, BOOT_BOUND_S["tcg"])
    first = FIRST_OUTPUT_S.get(accel, FIRST_OUTPUT_S["tcg"])
    attempts = BOOT_ATTEMPTS
    bound = env_number(BOOT_TIMEOUT_ENV, bound, 1.0, 24 * 3600, "seconds, 1 to 86400",
                       environ=environ, error=VMError)
    attempts = env_number(BOOT_ATTEMPTS_ENV, attempts, 1, 20, "1 to 20", conv=int,
                          environ=environ, error=VMError)
    return bound, min(first, bound), attempts


class BootWatch:
    """Watches one boot: the stage reached and when (seconds since qemu started), and
    whether the boot is hung: no console byte within ``first_output_s``, or the command
    not started within ``bound_s``."""

    def __init__(self, bound_s: float, first_output_s: float):
        self.bound_s, self.first_output_s = bound_s, first_output_s
        self.stage = "qemu"
        self.times: dict[str, float] = {"qemu": 0.0}

    @property
    def started(self) -> bool:
        return self.stage == "command"

    def update(self, elapsed: float, console: str, started: bool = False) -> str | None:
        """Note what the console shows at ``elapsed`` s; return why the boot is hung,
        or None."""
        stage = boot_stage(console, started)
        idx = STAGE_NAMES.index(stage)
        if idx > STAGE_NAMES.index(self.stage):
            for name in STAGE_NAMES[STAGE_NAMES.index(self.stage) + 1:idx + 1]:
                self.times.setdefault(name, round(elapsed, 1))
            self.stage = stage
        if self.started:
            return None
        if not console and elapsed > self.first_output_s:
            return f"no console output after {self.first_output_s:.0f}s"
        if elapsed > self.bound_s:
            return f"the command had not started after {self.bound_s:.0f}s"
        return None

    def summary(self) -> str:
        return ", ".join(f"{n} {t:.1f}s" for n, t in self.times.items() if n != "qemu")


def qemu_version() -> str:
    try:
        out = subprocess.run([tool("qemu-system-x86_64"), "--version"], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.splitlines()[0].strip() if out else "unknown"


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _tail_lines(path: Path, n: int = 40) -> list[str]:
    try:
        data = path.read_bytes()[-65536:]
    except OSError:
        return []
    text = _ANSI.sub("", data.decode("utf-8", "replace").replace("\r", ""))
    return text.splitlines()[-n:]


def print_tails(progress: Progress, console_log: Path, qemu_log: Path, n_console: int,
                 n_qemu: int) -> None:
    for line in _tail_lines(console_log, n_console):
        progress(f"  console| {line}")
    for line in _tail_lines(qemu_log, n_qemu):
        progress(f"  qemu| {line}")


def read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""
