"""The project VM: build a Debian bookworm disk image and run commands in it under qemu.

The host kernel lacks sch_netem, sch_pie, openvswitch, tcp_vegas... (see PLATFORM.md), so
experiments that need them run in a small VM: Debian bookworm with the stock 6.1 kernel,
Mininet and Open vSwitch, built with ``debootstrap`` (no Vagrant needed) and booted with
``qemu-system-x86_64`` (TCG unless a probe shows that KVM can boot it).

Build (``python3 -m bufferbloat.vm build``, as root; ``vm/build``)
    debootstrap --variant=minbase, then ``vm/provision.sh`` in the chroot (the same script
    the Vagrantfile uses), the guest unit ``vm/guest/bb-run.service``, then
    ``mkfs.ext4 -d`` turns the tree into ``image-<key>.ext4`` (no loop mount). Kernel and
    initrd are copied next to it. The cache (default ``/var/cache/bufferbloat-vm``,
    env ``BUFFERBLOAT_VM_CACHE``) is keyed by a hash of vm/packages.txt,
    vm/provision.sh, vm/guest/* and :data:`RECIPE_VERSION`; ``image.json`` is written
    last, atomically, so a half-built image is never used.

Run (``python3 -m bufferbloat.vm run -- CMD ARGS...``; ``vm/run``; :func:`run`)
    Host <-> guest protocol, one control directory per run:

    * the host picks a run id (``[A-Za-z0-9_.-]``), creates ``SHARE/.vm-run/<id>/`` and
      writes ``cmd`` there: a bash script (``export`` lines for the env vars given, then
      ``exec`` of the shlex-quoted argument list, or a script body given as a string);
    * qemu boots with ``bb.run=<id>`` on the kernel command line, the share exported over
      virtio-9p with mount tag ``bb``, the disk with ``snapshot=on`` (every run starts
      from the pristine image), no network, ttyS0 -> console log, ttyS1 -> output log;
    * in the guest, bb-run.service mounts the share at ``/bb``, writes ``booted``, then
      ``started``, runs ``cmd`` as root with cwd ``/bb`` and ``PYTHONPATH=/bb`` in its
      own process group, its stdout+stderr going to ttyS1 (which the host streams
      live), writes its exit status to ``rc`` (write-then-rename), and powers the VM
      off; it prints ``bb-run: stage <name>`` markers on the console;
    * the host returns the ``rc`` value; when there is none (guest crash, timeout) it
      prints the end of the console log and returns :data:`RC_NO_RESULT` (3) or
      :data:`RC_TIMEOUT` (124). The control directory is removed afterwards.

Boot watchdog (:class:`BootWatch`)
    The kernel runs without ``quiet``: console.log shows the kernel, the initramfs,
    systemd and bb-run's markers, i.e. the stage a boot reached (:func:`boot_stage`).
    A boot that prints nothing within FIRST_OUTPUT_S, or whose command has not started
    within BOOT_BOUND_S (TCG 150 s: boots measured 19-27 s, ~50 s loaded; env
    BUFFERBLOAT_VM_BOOT_TIMEOUT), is stopped (that qemu, by PID), reported with its
    stage and last console lines, and a fresh copy is booted; after BOOT_ATTEMPTS (3;
    env BUFFERBLOAT_VM_BOOT_ATTEMPTS) failed boots :func:`run` returns
    :data:`RC_BOOT_FAILED` (4). The KVM probe is one such boot with the KVM bounds.
    Every run appends one JSON line (its boots: outcome, stage reached, seconds from
    qemu start to each stage; retries; exit code; how it ended) to ``boots.jsonl`` in
    the image cache (env BUFFERBLOAT_VM_BOOT_LOG), and the guest command sees its boot
    number and the failed boots before it in env BUFFERBLOAT_VM_BOOTS (JSON).

Interrupts
    On Ctrl-C (SIGINT) or SIGTERM the host writes ``stop`` in the control directory;
    bb-run sends SIGINT to the command's process group (a bufferbloat run then records
    ``interrupted`` and keeps its series); the host streams the output for up to
    STOP_GRACE_S (20 s; env BUFFERBLOAT_VM_STOP_GRACE) until the guest powers off,
    then stops qemu (a second signal stops it at once). Then every result.json under
    ``SHARE/results`` and the command's ``--out`` directories (6 levels at most)
    written since the VM started, by the project VM, and still ``running`` is closed
    by the host (:func:`close_unfinished`: ``interrupted`` after an interrupt, a
    SIGTERM or the timeout, ``failed`` when the guest died by itself). The CLI exits
    130 (SIGINT) or 143 (SIGTERM).

Only the qemu process this module started is ever terminated (by its PID).
Stdlib only: runs with /usr/bin/python3 as root.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import fcntl
import hashlib
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Callable, Iterable, Sequence

from . import signals
from .atomic import write_json_atomic
from .params import env_number

REPO_ROOT = Path(__file__).resolve().parent.parent
VM_DIR = REPO_ROOT / "vm"

#: Bump when the build steps in this file change in a way that changes the image.
RECIPE_VERSION = "4"

DEFAULT_CACHE_DIR = "/var/cache/bufferbloat-vm"
GUEST_ACCEL_ENV = "BUFFERBLOAT_GUEST_ACCEL"   # set in the guest command's environment
CACHE_ENV = "BUFFERBLOAT_VM_CACHE"
ACCEL_ENV = "BUFFERBLOAT_VM_ACCEL"
SUITE = "bookworm"
IMAGE_SIZE = "4G"
IMAGE_LABEL = "bbroot"
MIN_FREE_BYTES = 6 * 1024**3
SHARE_TAG = "bb"
CONTROL_DIR = ".vm-run"

DEFAULT_TIMEOUT_S = 4 * 3600.0
KVM_PROBE_TIMEOUT_S = 90.0

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
BOOT_LOG_ENV = "BUFFERBLOAT_VM_BOOT_LOG"             # where boots are recorded (JSON lines)
GUEST_BOOTS_ENV = "BUFFERBLOAT_VM_BOOTS"             # set in the guest command's environment
#: on Ctrl-C/SIGTERM the guest command gets SIGINT and this long to save its results
STOP_GRACE_S = 20.0
STOP_GRACE_ENV = "BUFFERBLOAT_VM_STOP_GRACE"

#: exit codes of :func:`run` when the guest gave no exit status
RC_NO_RESULT = 3
RC_BOOT_FAILED = 4
RC_TIMEOUT = 124
RC_INTERRUPTED = 130
RC_TERMINATED = 143

#: modules of the initramfs (MODULES=list): what mounting the virtio ext4 root needs
INITRAMFS_MODULES = ("virtio_pci", "virtio_blk", "ext4", "crc32c_generic")
#: units masked in the image (see _Builder._configure)
MASKED_UNITS = ("getty-static.service", "e2scrub_reap.service", "apt-daily.timer",
                "apt-daily-upgrade.timer", "dpkg-db-backup.timer", "e2scrub_all.timer",
                "fstrim.timer")
BLACKLISTED_MODULES = ("kvm_amd", "kvm_intel", "kvm", "powernow_k8", "pcspkr")

#: host tool -> Debian package providing it
REQUIRED_TOOLS = {
    "debootstrap": "debootstrap",
    "qemu-system-x86_64": "qemu-system-x86",
    "mkfs.ext4": "e2fsprogs",
}

_RUN_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SYS_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

Progress = Callable[[str], None]


class VMError(Exception):
    """A failure of the VM tooling; ``exit_code`` is what the CLI exits with."""

    exit_code = 1


class MissingTool(VMError):
    """A host tool or prerequisite is missing: the message names the fix. Exit code 2."""

    exit_code = 2


class BuildError(VMError):
    """The image build failed; the message ends with the tail of the build log."""


@dataclasses.dataclass(frozen=True)
class ImagePaths:
    key: str
    image: Path
    kernel: Path
    initrd: Path
    kernel_release: str = ""


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _quiet(msg: str) -> None:
    pass


# ---------------------------------------------------------------------------- pure parts

def cache_dir() -> Path:
    """The image cache directory (env BUFFERBLOAT_VM_CACHE); never inside the checkout."""
    path = Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE_DIR).resolve()
    if path == REPO_ROOT or REPO_ROOT in path.parents:
        raise VMError(f"{CACHE_ENV}={path} is inside the checkout {REPO_ROOT}: "
                      f"choose a directory outside it (default {DEFAULT_CACHE_DIR})")
    return path


def _key_inputs(vm_dir: Path) -> list[Path]:
    files = [vm_dir / "packages.txt", vm_dir / "provision.sh"]
    guest = vm_dir / "guest"
    if guest.is_dir():
        files += sorted(p for p in guest.rglob("*") if p.is_file())
    return files


def compute_cache_key(vm_dir: Path | str = VM_DIR, recipe: str | None = None) -> str:
    """sha256 over vm/packages.txt, vm/provision.sh, vm/guest/* (names and contents,
    not timestamps) and the recipe version."""
    vm_dir = Path(vm_dir)
    h = hashlib.sha256()
    h.update(f"bufferbloat-vm recipe {recipe or RECIPE_VERSION} suite {SUITE}\n".encode())
    for path in _key_inputs(vm_dir):
        if not path.is_file():
            raise VMError(f"missing VM recipe file {path}")
        data = path.read_bytes()
        rel = path.relative_to(vm_dir).as_posix()
        h.update(f"{rel}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def parse_apt_sources(text: str) -> list[dict]:
    """Entries of an apt sources text, deb822 (``.sources``) or one-line (``.list``)
    format: ``[{"types": [...], "uris": [...], "suites": [...]}]`` (disabled ones
    dropped)."""
    entries: list[dict] = []
    lines = text.splitlines()
    if any(re.match(r"^\s*(deb|deb-src)\s", ln) for ln in lines):
        for ln in lines:
            ln = ln.split("#", 1)[0].strip()
            m = re.match(r"^(deb|deb-src)\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", ln)
            if m:
                entries.append({"types": [m.group(1)], "uris": [m.group(2)],
                                "suites": [m.group(3)]})
        return entries
    stanza: dict[str, str] = {}
    last = None

    def flush():
        if stanza:
            if stanza.get("enabled", "yes").strip().lower() not in ("no", "false", "0"):
                entries.append({k: stanza.get(k, "").split()
                                for k in ("types", "uris", "suites")})
            stanza.clear()

    for ln in lines + [""]:
        if not ln.strip():
            flush()
            last = None
            continue
        if ln.lstrip().startswith("#"):
            continue
        if ln[0] in " \t" and last:           # continuation line
            stanza[last] += " " + ln.strip()
            continue
        name, sep, value = ln.partition(":")
        if sep:
            last = name.strip().lower()
            stanza[last] = value.strip()
    return entries


def pick_mirrors(entries: Iterable[dict], suite: str = SUITE) -> tuple[str, str | None]:
    """(main mirror URI, security mirror URI or None) from parsed apt sources."""
    debs = [e for e in entries if "deb" in e["types"] and e["uris"]]
    main = sec = None
    for e in debs:                      # an entry listing the suite itself
        if suite in e["suites"]:
            main = e["uris"][0]
            break
    if main is None:                    # any entry that is not security/updates/backports
        for e in debs:
            if any(not re.search(r"-(security|updates|backports|proposed-updates)$", s)
                   for s in e["suites"]):
                main = e["uris"][0]
                break
    for e in debs:
        if any(s.endswith("-security") or s.endswith("/updates") for s in e["suites"]):
            sec = e["uris"][0]
            break
    if main is None:
        raise VMError("no Debian mirror found in the apt sources")
    return main.rstrip("/"), (sec.rstrip("/") if sec else None)


def host_mirrors(suite: str = SUITE) -> tuple[str, str | None]:
    """The mirrors the host's apt uses: /etc/apt/sources.list.d/debian.sources, then
    /etc/apt/sources.list, then any other file in sources.list.d."""
    candidates = [Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list")]
    d = Path("/etc/apt/sources.list.d")
    if d.is_dir():
        candidates += sorted(p for p in d.iterdir() if p.suffix in (".sources", ".list"))
    for path in candidates:
        try:
            text = path.read_text()
        except OSError:
            continue
        try:
            return pick_mirrors(parse_apt_sources(text), suite)
        except VMError:
            continue
    raise MissingTool("no Debian mirror in /etc/apt/sources.list.d/debian.sources or "
                      "/etc/apt/sources.list: configure apt on the host first")


def guest_sources_list(main: str, security: str | None, suite: str = SUITE) -> str:
    text = f"deb {main} {suite} main\ndeb {main} {suite}-updates main\n"
    if security:
        text += f"deb {security} {suite}-security main\n"
    return text


def redactor(uris: Iterable[str | None]) -> Callable[[str], str]:
    """A function replacing the mirrors' host names by ``<mirror>`` (the build log must
    not record them)."""
    hosts = sorted({urllib.parse.urlsplit(u).hostname for u in uris if u} - {None},
                   key=len, reverse=True)

    def redact(line: str) -> str:
        for host in hosts:
            line = line.replace(host, "<mirror>")
        return line
    return redact


def new_run_id() -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
    return f"{stamp}-{os.getpid()}-{secrets.token_hex(3)}"


def make_command_script(command: Sequence[str] | str, env: dict | None = None) -> str:
    """The ``cmd`` script the guest runs: ``export`` lines, then the command. An argument
    list is quoted with shlex.join and exec'd; a string is a bash script body."""
    lines = ["#!/bin/bash",
             "# written by bufferbloat.vm on the host, run by bb-run in the guest",
             "# (as root, cwd /bb, PYTHONPATH=/bb, stdout+stderr -> host)"]
    for name, value in (env or {}).items():
        if not _ENV_NAME.match(str(name)):
            raise VMError(f"invalid environment variable name {name!r}")
        lines.append(f"export {name}={shlex.quote(str(value))}")
    if isinstance(command, str):
        if not command.strip():
            raise VMError("empty command script")
        lines.append(command.rstrip("\n"))
    else:
        argv = [str(a) for a in command]
        if not argv:
            raise VMError("empty command")
        lines.append("exec " + shlex.join(argv))
    return "\n".join(lines) + "\n"


def _qemu_opt(value: str | Path) -> str:
    """Escape a value inside a qemu ``-opt a=b,c=d`` list (commas are doubled)."""
    return str(value).replace(",", ",,")


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
    if not _RUN_ID.match(run_id):
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


# ---------------------------------------------------------------------------- boot watchdog

#: boot stages in order, each with the console text that shows it was reached (the
#: bb-run markers are printed by vm/guest/bb-run; "command" is also the ``started`` file)
BOOT_STAGES = (
    ("qemu", ()),
    ("kernel", ("Linux version ",)),
    ("initramfs", ("Run /init as init process", "Loading, please wait")),
    ("systemd", ("systemd[1]:", "Welcome to ", " running in system mode")),
    ("bb-run", ("bb-run: stage bb-run",)),
    ("share", ("bb-run: stage share",)),
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


# ---------------------------------------------------------------------------- run records

RESULT_SCAN_DEPTH = 6


def result_roots(share: Path, command: Sequence[str] | str) -> list[Path]:
    """Where the guest command may have written run records, seen from the host:
    ``SHARE/results`` and every ``--out DIR`` / ``--out=DIR`` of the command (relative
    to the share, or absolute under /bb). Directories outside the share are not
    reachable from the host (the guest's root fs is thrown away)."""
    roots = [share / "results"]
    words = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    outs = []
    for i, w in enumerate(words):
        if w == "--out" and i + 1 < len(words):
            outs.append(words[i + 1])
        elif w.startswith("--out="):
            outs.append(w[len("--out="):])
    for out in outs:
        if out.startswith("/bb/") or out == "/bb":
            out = out[len("/bb"):].lstrip("/")
        elif out.startswith("/"):
            continue
        path = (share / out).resolve()
        if (path == share or share in path.parents) and path not in roots:
            roots.append(path)
    return roots


def running_results(roots: Iterable[Path], since: float,
                    depth: int = RESULT_SCAN_DEPTH) -> list[Path]:
    """result.json files under ``roots`` (at most ``depth`` levels down) modified at or
    after ``since`` (epoch s), still ``"status": "running"`` and written in the project
    VM (``machine.in_project_vm``; a record without ``machine`` yet also counts): the
    runs a VM command left unfinished. Runs of this host are never touched."""
    found = []
    seen = set()
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            continue
        base = len(root.parts)
        for dirpath, dirnames, filenames in os.walk(root):
            if len(Path(dirpath).parts) - base >= depth:
                dirnames[:] = []
            if "result.json" not in filenames:
                continue
            path = Path(dirpath) / "result.json"
            try:
                if path.stat().st_mtime < since or path.resolve() in seen:
                    continue
                rec = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            seen.add(path.resolve())
            machine = rec.get("machine")
            if rec.get("status") == "running" and \
                    (machine is None or (isinstance(machine, dict)
                                         and machine.get("in_project_vm") is True)):
                found.append(path)
    return found


def mark_unfinished(path: Path, status: str, error: str) -> bool:
    """Close a run record the guest left ``running``: ``status`` (interrupted or failed)
    and ``error``, written atomically; its series stay as they are. Returns whether it
    was changed."""
    try:
        rec = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return False
    if rec.get("status") != "running":
        return False
    rec["status"] = status
    rec["error"] = error
    rec["closed_by_host"] = {"time": time.time(), "by": "bufferbloat.vm"}
    write_json_atomic(path, rec, allow_nan=True)
    return True


def boot_log_path() -> Path:
    """Where :func:`run` appends one JSON line per VM run (its boots): env
    BUFFERBLOAT_VM_BOOT_LOG, else ``boots.jsonl`` in the image cache."""
    return Path(os.environ.get(BOOT_LOG_ENV) or cache_dir() / "boots.jsonl")


# ---------------------------------------------------------------------------- host helpers

def check_tools(tools: dict[str, str] = REQUIRED_TOOLS) -> None:
    missing = [(t, pkg) for t, pkg in tools.items()
               if not shutil.which(t, path=os.environ.get("PATH", "") + ":" + _SYS_PATH)]
    if missing:
        names = ", ".join(t for t, _ in missing)
        pkgs = " ".join(sorted({p for _, p in missing}))
        raise MissingTool(f"missing host tool(s): {names}; install them with: "
                          f"apt-get install {pkgs}")


def _tool(name: str) -> str:
    return shutil.which(name, path=os.environ.get("PATH", "") + ":" + _SYS_PATH) or name


def _qemu_version() -> str:
    try:
        out = subprocess.run([_tool("qemu-system-x86_64"), "--version"], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.splitlines()[0].strip() if out else "unknown"


def _mounts_under(root: Path) -> list[str]:
    root_s = str(root)
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4]
            mp = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), mp)
            if mp == root_s or mp.startswith(root_s + "/"):
                found.append(mp)
    return found


def _umount_all(root: Path) -> None:
    for mp in sorted(set(_mounts_under(root)), key=len, reverse=True):
        if subprocess.run(["umount", mp], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", mp], capture_output=True)
    left = _mounts_under(root)
    if left:
        raise BuildError(f"could not unmount {', '.join(left)}")


def _chroot_pids(root: Path) -> list[int]:
    pids = []
    root_s = str(root)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            r = os.readlink(f"/proc/{entry}/root")
        except OSError:
            continue
        if r == root_s or r.startswith(root_s + "/"):
            pids.append(int(entry))
    return pids


def _kill_chroot_procs(root: Path) -> None:
    """Processes left running inside OUR build chroot (found by their root directory)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = _chroot_pids(root)
        if not pids:
            return
        for pid in pids:
            signals.signal_pid(pid, sig, group=False)
        time.sleep(1.0)


def _remove_tree(root: Path) -> None:
    if not root.exists():
        return
    _kill_chroot_procs(root)
    _umount_all(root)
    subprocess.run(["rm", "-rf", "--one-file-system", str(root)], check=True)


@contextlib.contextmanager
def _chroot_mounts(root: Path):
    """/proc, /sys and /dev/pts inside the chroot; ALWAYS unmounted on the way out."""
    try:
        for fstype, src, rel in (("proc", "proc", "proc"), ("sysfs", "sysfs", "sys"),
                                 (None, "/dev/pts", "dev/pts")):
            target = root / rel
            target.mkdir(parents=True, exist_ok=True)
            opts = ["--bind"] if fstype is None else ["-t", fstype]
            subprocess.run(["mount", *opts, src, str(target)], check=True,
                           capture_output=True)
        yield
    finally:
        _kill_chroot_procs(root)
        _umount_all(root)


@contextlib.contextmanager
def _locked(path: Path, progress: Progress, waiting: str | None = None):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(waiting or f"vm: waiting for another build of the VM image ({path})")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# ---------------------------------------------------------------------------- image build

def cached_image(cache: Path | None = None, key: str | None = None) -> ImagePaths | None:
    """The cached image if its key file matches ``key`` (default: the current recipe)
    and its files exist, else None."""
    cache = cache or cache_dir()
    key = key or compute_cache_key()
    try:
        meta = json.loads((cache / "image.json").read_text())
    except (OSError, ValueError):
        return None
    if meta.get("key") != key:
        return None
    paths = ImagePaths(key=key, image=cache / meta["image"], kernel=cache / meta["kernel"],
                       initrd=cache / meta["initrd"],
                       kernel_release=meta.get("kernel_release", ""))
    if not all(p.is_file() for p in (paths.image, paths.kernel, paths.initrd)):
        return None
    return paths


class _Builder:
    """One image build: steps with progress, logged subprocesses, a heartbeat."""

    STEPS = ["debootstrap (minbase, %s)" % SUITE,
             "provision.sh in the chroot (apt-get install)",
             "guest unit and system settings",
             "initramfs with virtio drivers",
             "remove the build's apt sources and caches",
             "copy kernel and initrd",
             "mkfs.ext4 -d (disk image)",
             "key file, stale images, rootfs"]

    def __init__(self, cache: Path, key: str, progress: Progress, verbose: bool):
        self.cache, self.key, self.progress, self.verbose = cache, key, progress, verbose
        self.rootfs = cache / "rootfs.build"
        self.log_path = cache / "build.log"
        self.t0 = time.monotonic()
        self.step_no = 0
        self.main, self.security = host_mirrors()
        self.redact = redactor([self.main, self.security])
        self.log = open(self.log_path, "w", buffering=1)

    def step(self, i: int) -> None:
        self.step_no = i
        msg = f"[{i}/{len(self.STEPS)}] {self.STEPS[i - 1]}  (t+{self.elapsed():.0f}s)"
        self.progress(msg)
        self.log.write(f"==== {msg}\n")

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def sh(self, argv: list[str], env: dict | None = None, heartbeat_s: float = 10.0) -> None:
        """Run a build command, its output into build.log (mirror host names redacted),
        with a one-line status every ``heartbeat_s`` seconds (every line if verbose)."""
        self.log.write(f"$ {self.redact(shlex.join(argv))}\n")
        full_env = {"PATH": _SYS_PATH, "LC_ALL": "C", "HOME": "/root", "TERM": "dumb"}
        full_env.update(env or {})
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=full_env)
        last = [""]
        tail: list[str] = []

        def reader():
            for raw in proc.stdout:
                line = self.redact(raw.decode("utf-8", "replace").rstrip())
                self.log.write(line + "\n")
                if line.strip():
                    last[0] = line.strip()
                    tail.append(line)
                    del tail[:-25]
                if self.verbose:
                    self.progress(f"    | {line}")
        t = threading.Thread(target=reader, daemon=True)
        t.start()
        start = time.monotonic()
        next_beat = start + heartbeat_s
        try:
            while proc.poll() is None:
                time.sleep(0.2)
                now = time.monotonic()
                if now >= next_beat and not self.verbose:
                    next_beat = now + heartbeat_s
                    self.progress(f"      {now - start:5.0f}s  {last[0][:100]}")
        finally:
            _stop_process(proc)          # interrupted: stop what WE started
            t.join(5)
        if proc.returncode != 0:
            raise BuildError(f"step {self.step_no} failed: {self.redact(shlex.join(argv))} "
                             f"exited with {proc.returncode}; see {self.log_path}\n"
                             + "\n".join("  " + ln for ln in tail))

    def chroot(self, *argv: str, env: dict | None = None) -> None:
        self.sh(["chroot", str(self.rootfs), *argv], env=env)

    # -- the steps
    def build(self) -> ImagePaths:
        root = self.rootfs
        _remove_tree(root)
        for p in self.cache.glob("*.tmp"):
            p.unlink()
        try:
            return self._build(root)
        finally:
            _remove_tree(root)           # also after a failure: the log says what broke
            for p in self.cache.glob("*.tmp"):
                p.unlink()

    def _build(self, root: Path) -> ImagePaths:
        self.step(1)
        self.sh([_tool("debootstrap"), "--variant=minbase", SUITE, str(root), self.main])
        with _chroot_mounts(root):
            self.step(2)
            self._provision()
            self.step(3)
            self._configure()
            self.step(4)
            self._initramfs()
            self.step(5)
            self._clean_apt()
        if _mounts_under(root):
            raise BuildError(f"mounts left under {root}: {_mounts_under(root)}")
        self._check_no_mirror()
        self.step(6)
        tag = self.key[:16]
        kernel, initrd, release = self._copy_kernel(tag)
        self.step(7)
        image = self.cache / f"image-{tag}.ext4"
        tmp = image.with_name(image.name + ".tmp")
        self.sh([_tool("mkfs.ext4"), "-F", "-q", "-L", IMAGE_LABEL,
                 "-E", "lazy_itable_init=0,lazy_journal_init=0",
                 "-d", str(root), str(tmp), IMAGE_SIZE])
        os.replace(tmp, image)
        self.step(8)
        meta = {"key": self.key, "image": image.name, "kernel": kernel.name,
                "initrd": initrd.name, "kernel_release": release,
                "recipe_version": RECIPE_VERSION,
                "built": datetime.datetime.now().isoformat(timespec="seconds"),
                "build_seconds": round(self.elapsed(), 1)}
        write_json_atomic(self.cache / "image.json", meta)
        keep = {image.name, kernel.name, initrd.name}
        for p in self.cache.iterdir():
            if p.is_file() and p.name.startswith(("image-", "vmlinuz-", "initrd-")) \
                    and p.name not in keep:
                p.unlink()
        return ImagePaths(self.key, image, kernel, initrd, release)

    def _provision(self) -> None:
        root = self.rootfs
        # Written before the kernel package builds its initramfs: only the modules the
        # root disk needs (MODULES=list + etc/initramfs-tools/modules) instead of
        # MODULES=most: a ~5x smaller initrd that unpacks and boots seconds faster
        # under TCG. gzip: bookworm's default zstd is not installed.
        conf = root / "etc/initramfs-tools/conf.d"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "bufferbloat-vm.conf").write_text(
            "# written by bufferbloat.vm (vm/build)\nMODULES=list\nCOMPRESS=gzip\n")
        mods = root / "etc/initramfs-tools/modules"
        have = mods.read_text().split() if mods.exists() else []
        add = [m for m in INITRAMFS_MODULES if m not in have]
        if add:
            with open(mods, "a") as f:
                f.write("# bufferbloat.vm: the root disk is virtio, ext4\n"
                        + "\n".join(add) + "\n")
        (root / "etc/apt/sources.list").write_text(guest_sources_list(self.main, self.security))
        resolv = root / "etc/resolv.conf"
        if resolv.is_symlink() or resolv.exists():
            resolv.unlink()
        shutil.copyfile("/etc/resolv.conf", resolv)
        dest = root / "root/bb-provision"
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(VM_DIR / "provision.sh", dest / "provision.sh")
        shutil.copy2(VM_DIR / "packages.txt", dest / "packages.txt")
        self.chroot("/bin/bash", "/root/bb-provision/provision.sh",
                    env={"BB_IN_CHROOT": "1", "DEBIAN_FRONTEND": "noninteractive"})
        shutil.rmtree(dest)

    def _configure(self) -> None:
        root = self.rootfs
        guest = VM_DIR / "guest"
        shutil.copyfile(guest / "bb-run", root / "usr/local/sbin/bb-run")
        os.chmod(root / "usr/local/sbin/bb-run", 0o755)
        unit = root / "etc/systemd/system/bb-run.service"
        shutil.copyfile(guest / "bb-run.service", unit)
        os.chmod(unit, 0o644)
        wants = root / "etc/systemd/system/multi-user.target.wants"
        wants.mkdir(parents=True, exist_ok=True)
        link = wants / "bb-run.service"
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to("/etc/systemd/system/bb-run.service")
        (root / "etc/fstab").write_text(
            "# written by bufferbloat.vm (vm/build); runs use a throw-away snapshot\n"
            "/dev/vda / ext4 rw,noatime,errors=remount-ro 0 0\n")
        (root / "etc/hostname").write_text("bb-vm\n")
        (root / "etc/hosts").write_text("127.0.0.1\tlocalhost\n127.0.1.1\tbb-vm\n"
                                        "::1\tlocalhost ip6-localhost ip6-loopback\n")
        resolv = root / "etc/resolv.conf"
        resolv.unlink()
        resolv.write_text("# the project VM has no network\n")
        self.chroot("passwd", "-d", "root")     # console login without password (no network)
        # matplotlib's font cache, built once here instead of at every run (the root fs
        # is a throw-away snapshot; bb-run runs commands with HOME=/root)
        self.chroot("python3", "-c", "import matplotlib; matplotlib.use('Agg'); "
                    "import matplotlib.font_manager", env={"HOME": "/root"})
        mid = root / "etc/machine-id"
        if not mid.exists() or not mid.read_text().strip():
            self.chroot("systemd-machine-id-setup")
        # Boot faster and keep runs quiet: no VGA gettys (no display), no periodic
        # jobs (apt, scrub, trim) that could fire in the middle of a measurement, and
        # no kvm/cpufreq modules that udev loads for `-cpu max`'s CPU flags.
        systemd = root / "etc/systemd/system"
        for unit in MASKED_UNITS:
            link = systemd / unit
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to("/dev/null")
        with contextlib.suppress(FileNotFoundError):
            (systemd / "getty.target.wants/getty@tty1.service").unlink()
        (root / "etc/modprobe.d/bufferbloat-vm.conf").write_text(
            "# written by bufferbloat.vm (vm/build): not needed in the project VM\n"
            + "".join(f"blacklist {m}\n" for m in BLACKLISTED_MODULES))

    def _initramfs(self) -> None:
        self.chroot("update-initramfs", "-u", "-k", "all")

    def _clean_apt(self) -> None:
        root = self.rootfs
        self.chroot("apt-get", "clean")
        for p in [root / "etc/apt/sources.list", *(root / "etc/apt/sources.list.d").glob("*")]:
            if p.is_file() or p.is_symlink():
                p.unlink()
        lists = root / "var/lib/apt/lists"
        for p in lists.glob("*"):
            if p.is_file():
                p.unlink()
            elif p.is_dir() and p.name != "partial":
                shutil.rmtree(p)
        for p in (root / "var/cache/apt").glob("*.bin"):
            p.unlink()
        shutil.rmtree(root / "debootstrap", ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            (root / "var/log/bootstrap.log").unlink()    # debootstrap's log names the mirror

    def _check_no_mirror(self) -> None:
        """The mirror's host name must not stay in the image's apt configuration/state."""
        hosts = {urllib.parse.urlsplit(u).hostname for u in (self.main, self.security) if u}
        hosts.discard(None)
        root = self.rootfs
        for top in ("etc/apt", "var/lib/apt", "var/cache/apt", "var/log", "root",
                    "etc/hosts", "etc/resolv.conf"):
            base = root / top
            files = [base] if base.is_file() else [p for p in base.rglob("*") if p.is_file()]
            for p in files:
                try:
                    data = p.read_bytes()
                except OSError:
                    continue
                if any(h.encode() in data or h.encode() in p.name.encode() for h in hosts):
                    raise BuildError(f"the mirror host name is still in {p}")

    def _copy_kernel(self, tag: str) -> tuple[Path, Path, str]:
        boot = self.rootfs / "boot"
        kernels = sorted(boot.glob("vmlinuz-*"))
        if not kernels:
            raise BuildError(f"no kernel in {boot} (linux-image-amd64 not installed?)")
        vmlinuz = kernels[-1]
        release = vmlinuz.name[len("vmlinuz-"):]
        initrd = boot / f"initrd.img-{release}"
        if not initrd.is_file():
            raise BuildError(f"no initrd {initrd}")
        k_out, i_out = self.cache / f"vmlinuz-{tag}", self.cache / f"initrd-{tag}"
        shutil.copyfile(vmlinuz, k_out)
        shutil.copyfile(initrd, i_out)
        self.log.write(f"kernel {release}\n")
        return k_out, i_out, release


def build_image(force: bool = False, progress: Progress | None = print,
                verbose: bool = False) -> ImagePaths:
    """Build the VM image unless the cached one matches the recipe; return its paths.

    Needs root and debootstrap, qemu-system-x86_64, mkfs.ext4 (MissingTool otherwise).
    """
    progress = progress or _quiet
    cache = cache_dir()
    key = compute_cache_key()
    if not force:
        paths = cached_image(cache, key)
        if paths:
            return paths
    check_tools()
    if os.geteuid() != 0:
        raise MissingTool("building the VM image needs root: sudo vm/build")
    cache.mkdir(parents=True, exist_ok=True)
    with _locked(cache / "build.lock", progress):
        if not force:
            paths = cached_image(cache, key)     # built meanwhile by another process
            if paths:
                return paths
        free = shutil.disk_usage(cache).free
        if free < MIN_FREE_BYTES:
            raise MissingTool(
                f"building the VM image needs ~{MIN_FREE_BYTES / 1024**3:.0f} GiB free in "
                f"{cache} (only {free / 1024**3:.1f} GiB free): free some space there or set "
                f"{CACHE_ENV} to a directory on a larger disk")
        progress(f"vm: building the project VM image in {cache} (key {key[:16]}; "
                 f"log {cache / 'build.log'})")
        builder = _Builder(cache, key, progress, verbose)
        try:
            paths = builder.build()
        finally:
            builder.log.close()
        size = paths.image.stat().st_blocks * 512
        progress(f"vm: image built in {builder.elapsed():.0f}s: {paths.image} "
                 f"({size / 1024**3:.2f} GiB used of {IMAGE_SIZE}), kernel "
                 f"{paths.kernel_release}")
        return paths


# ---------------------------------------------------------------------------- running

def probe_kvm(progress: Progress | None = _stderr) -> bool:
    """Whether qemu can boot the project VM with KVM here. Env BUFFERBLOAT_VM_ACCEL=tcg|kvm
    overrides; otherwise the verdict of one trial boot (``true`` with -accel kvm, 90 s
    at most) is cached per host kernel release and qemu version. The trial boot is
    watched like any other (:class:`BootWatch` with the KVM bounds, one attempt): a
    KVM that prints nothing, or does not reach the command in time, cannot boot it."""
    progress = progress or _quiet
    forced = os.environ.get(ACCEL_ENV, "").strip().lower()
    if forced:
        if forced not in ("tcg", "kvm"):
            raise VMError(f"{ACCEL_ENV}={forced!r}: expected tcg or kvm")
        return forced == "kvm"
    if not os.path.exists("/dev/kvm") or not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    cache = cache_dir()
    ident = {"host_kernel": os.uname().release, "qemu": _qemu_version()}
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
        rc = run(["true"], accel="kvm", timeout_s=KVM_PROBE_TIMEOUT_S, progress=_quiet,
                 output=devnull, memory_mb=1024, cpus=1, _probe=True)
    ok = rc == 0
    progress(f"vm: KVM {'boots' if ok else 'cannot boot'} the VM "
             f"({time.monotonic() - t0:.0f}s): using {'kvm' if ok else 'tcg'}")
    with contextlib.suppress(OSError):
        write_json_atomic(verdict_file, {**ident, "kvm_ok": ok})
    return ok


def choose_accel(progress: Progress | None = _stderr) -> str:
    return "kvm" if probe_kvm(progress) else "tcg"


class _Terminated(Exception):
    pass


class _Signals:
    """SIGINT/SIGTERM while a VM runs: the first one is noted (the run loop asks the
    guest to stop its command, then stops qemu); before qemu runs, or a second time,
    they raise at once (KeyboardInterrupt, _Terminated)."""

    def __init__(self):
        self.got: int | None = None
        self.armed = False

    def handler(self, signum, frame):
        if self.armed and self.got is None:
            self.got = signum
            return
        if self.got is None:
            self.got = signum
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise _Terminated()

    @property
    def name(self) -> str:
        return signal.Signals(self.got).name if self.got else ""


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _tail_lines(path: Path, n: int = 40) -> list[str]:
    try:
        data = path.read_bytes()[-65536:]
    except OSError:
        return []
    text = _ANSI.sub("", data.decode("utf-8", "replace").replace("\r", ""))
    return text.splitlines()[-n:]


def _print_tails(progress: Progress, console_log: Path, qemu_log: Path, n_console: int,
                 n_qemu: int) -> None:
    for line in _tail_lines(console_log, n_console):
        progress(f"  console| {line}")
    for line in _tail_lines(qemu_log, n_qemu):
        progress(f"  qemu| {line}")


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""


#: how a VM run ended -> (status, reason) for the run records it left "running"
_END_STATUS = {
    "interrupt": ("interrupted", "the host interrupted the project VM (SIGINT)"),
    "terminate": ("interrupted", "the host terminated the project VM (SIGTERM)"),
    "timeout": ("interrupted", "the project VM was stopped at its timeout"),
    "crash": ("failed", "the project VM died (guest crash) while this run was running"),
    "exit": ("failed", "the VM command exited while this run was still running"),
}


def close_unfinished(roots: Iterable[Path], since: float, end: str,
                     progress: Progress = _quiet) -> list[Path]:
    """Mark the run records a VM command left ``running`` (see :func:`running_results`)
    as :data:`_END_STATUS` says for how the VM ended; returns them."""
    status, reason = _END_STATUS[end]
    done = []
    for path in running_results(roots, since):
        with contextlib.suppress(OSError):
            if mark_unfinished(path, status, reason):
                done.append(path)
                progress(f"vm: {path}: was still 'running': marked {status!r} ({reason})")
    return done


def run(command: Sequence[str] | str, share: Path | str = REPO_ROOT,
        timeout_s: float | None = DEFAULT_TIMEOUT_S, memory_mb: int = 3072, cpus: int = 2,
        progress: Progress | None = _stderr, env: dict | None = None,
        accel: str | None = None, output=None, _probe: bool = False) -> int:
    """Run ``command`` in a fresh project VM; return its exit code.

    ``command`` is an argument list (quoted safely, exec'd) or a bash script body (str).
    It runs as root with cwd /bb (= ``share``, default the checkout), PYTHONPATH=/bb and
    the extra ``env`` variables; its stdout+stderr are streamed to ``output`` (a binary
    file, default our stdout) while it runs. Root fs changes are discarded (snapshot);
    files written under /bb land in ``share`` on the host.

    Boot watchdog (:class:`BootWatch`, :func:`boot_bounds`): a boot whose command has
    not started within the bound is stopped (by PID) and a fresh copy booted; after
    the last attempt RC_BOOT_FAILED (4). Boots are appended to :func:`boot_log_path`.

    Returns the command's exit code, or RC_NO_RESULT (3) if the guest gave none (crash),
    RC_TIMEOUT (124) after ``timeout_s`` seconds. On Ctrl-C or SIGTERM the guest
    command gets SIGINT (through the control directory) and STOP_GRACE_S to finish,
    then qemu is stopped; run records under the share left ``running`` are closed
    (:func:`close_unfinished`), and KeyboardInterrupt / SystemExit(143) is raised.
    """
    progress = progress or _quiet
    if output is None:
        output = sys.stdout.buffer
    make_command_script(command, env)          # validate before booting
    share = Path(share).resolve()
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
    proc = None
    rc = None
    since = None            # epoch s when the first qemu started (for close_unfinished)
    end = None
    sig = _Signals()
    one_at_a_time = contextlib.ExitStack()
    if threading.current_thread() is threading.main_thread():
        one_at_a_time.enter_context(signals.handled(signals.INTERRUPTS, sig.handler))
    try:
        # One project VM per machine: two TCG guests share the host's cores and distort
        # each other's timing (and every measurement with it).
        one_at_a_time.enter_context(_locked(
            cache_dir() / "run.lock", progress,
            "vm: another project VM is running on this machine; waiting for it to end"))
        t0 = time.monotonic()
        deadline = t0 + timeout_s if timeout_s else None
        ctl.mkdir(parents=True)
        tmp = Path(tempfile.mkdtemp(prefix=f"bb-vm-{run_id}-"))
        qenv = dict(os.environ, TMPDIR=str(tmp))   # the snapshot overlay goes there too
        for attempt in range(1, attempts + 1):
            for name in ("started", "booted", "rc", "rc.tmp", "stop"):
                with contextlib.suppress(FileNotFoundError):
                    (ctl / name).unlink()
            # the guest learns how it is emulated (TCG: the engine keeps rates the VM
            # sustains) and which boot this is
            guest_boots = {"attempt": attempt, "failed": [
                {k: b[k] for k in ("attempt", "stage", "outcome")} for b in record["boots"]]}
            (ctl / "cmd").write_text(make_command_script(command, dict(
                env or {}, **{GUEST_ACCEL_ENV: accel,
                              GUEST_BOOTS_ENV: json.dumps(guest_boots)})))
            adir = tmp / f"boot-{attempt}"
            adir.mkdir()
            console_log, out_log, qemu_log = (adir / "console.log", adir / "out.log",
                                              adir / "qemu.log")
            argv = qemu_args(paths, run_id, share, console_log, out_log, accel, memory_mb,
                             cpus, qemu=_tool("qemu-system-x86_64"), append=append)
            progress(f"vm: booting the project VM ({accel}, {cpus} CPU, {memory_mb} MB, "
                     f"kernel {paths.kernel_release or '?'}), run {run_id}, boot "
                     f"{attempt}/{attempts} (the command must start within {bound_s:.0f}s)")
            t_boot = time.monotonic()
            if since is None:
                since = time.time() - 2.0
            with open(qemu_log, "wb") as qlog:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=qlog,
                                        stderr=subprocess.STDOUT, env=qenv,
                                        start_new_session=True)
            sig.armed = True
            watch = BootWatch(bound_s, first_s)
            outcome, end = _watch_boot(proc, watch, t_boot, ctl, console_log, out_log,
                                       qemu_log, output, accel, deadline, sig, grace_s,
                                       progress)
            sig.armed = False
            _stop_process(proc)
            boot = {"attempt": attempt, "outcome": outcome, "stage": watch.stage,
                    "stages": watch.times, "boot_s": watch.times.get("command"),
                    "qemu_pid": proc.pid, "qemu_rc": proc.returncode}
            record["boots"].append(boot)
            if outcome == "timeout":
                end = "timeout"
            if outcome in ("hung", "qemu-exit") and not sig.got:
                progress(f"vm: boot {attempt}/{attempts} failed at stage {watch.stage!r} "
                         f"({end}); qemu (pid {proc.pid}) stopped; last console lines:")
                _print_tails(progress, console_log, qemu_log, 15, 5)
                end = "boot"
                if attempt < attempts:
                    progress("vm: booting a fresh copy of the VM")
                    continue
                progress(f"vm: error: the project VM did not start the command in "
                         f"{attempts} boot(s) (stages reached: "
                         f"{', '.join(b['stage'] for b in record['boots'])}); "
                         f"exit code {RC_BOOT_FAILED}")
                rc = RC_BOOT_FAILED
            break
        wall = time.monotonic() - t0
        retries = len(record["boots"]) - 1
        if record["boots"] and record["boots"][-1]["outcome"] == "started":
            progress(f"vm: boots: {len(record['boots'])} ({retries} retr"
                     f"{'y' if retries == 1 else 'ies'}), the command started "
                     f"{record['boots'][-1]['boot_s']:.1f}s after qemu started")
        if sig.got:
            end = "interrupt" if sig.got == signal.SIGINT else "terminate"
            progress(f"vm: {sig.name}: the VM is stopped ({wall:.1f}s wall)")
            raise KeyboardInterrupt if sig.got == signal.SIGINT else _Terminated()
        if rc is not None:
            return rc
        rc_file = ctl / "rc"
        rc_text = rc_file.read_text().strip() if rc_file.is_file() else ""
        if rc_text.isdigit():
            rc = int(rc_text)
            end = "exit"
            progress(f"vm: guest command exited with {rc} ({wall:.1f}s wall)")
            return rc
        progress(f"vm: the guest gave no exit status ({end}, qemu exit {proc.returncode}, "
                 f"{wall:.1f}s); last console lines:")
        _print_tails(progress, console_log, qemu_log, 40, 10)
        rc = RC_TIMEOUT if end == "timeout" else RC_NO_RESULT
        return rc
    except KeyboardInterrupt:
        end = "terminate" if sig.got == signal.SIGTERM else "interrupt"
        rc = RC_INTERRUPTED
        raise
    except _Terminated:
        end = "terminate"
        rc = RC_TERMINATED
        raise SystemExit(RC_TERMINATED)
    finally:
        if proc is not None and proc.poll() is None:
            progress(f"vm: stopping qemu (pid {proc.pid})")
            _stop_process(proc)
        if since is not None:
            close_unfinished(result_roots(share, command), since,
                             end if end in _END_STATUS else "crash", progress)
            record["end"], record["rc"] = end, rc
            record["wall_s"] = round(time.monotonic() - t0, 1)   # lock held: no waiting
            with contextlib.suppress(OSError, VMError):
                log = boot_log_path()
                log.parent.mkdir(parents=True, exist_ok=True)
                with open(log, "a") as f:
                    f.write(json.dumps(record, default=str) + "\n")
        shutil.rmtree(ctl, ignore_errors=True)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        one_at_a_time.close()


def _watch_boot(proc, watch: BootWatch, t_boot: float, ctl: Path, console_log: Path,
                out_log: Path, qemu_log: Path, output, accel: str, deadline: float | None,
                sig: _Signals, grace_s: float, progress: Progress) -> tuple[str, str | None]:
    """Stream the guest's output while qemu runs; returns (outcome, end): outcome
    "started" (the command started), "hung" or "qemu-exit" (before it started);
    end: None, or why the VM is to be stopped (timeout, interrupt, crash...)."""
    out_f = None
    stop_at = None
    end = None

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
                hung = watch.update(now - t_boot, _read_text(console_log),
                                    (ctl / "started").exists())
                if watch.started:
                    progress(f"vm: guest command started {now - t_boot:.1f}s after boot "
                             f"({watch.summary()})")
                elif hung and not sig.got:
                    return "hung", hung
            if accel == "kvm" and b"KVM internal error" in qemu_log.read_bytes()[-65536:]:
                progress("vm: KVM internal error: this KVM cannot run the guest")
                return ("started" if watch.started else "qemu-exit"), "crash"
            if sig.got and stop_at is None:
                end = "interrupt" if sig.got == signal.SIGINT else "terminate"
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
            watch.update(time.monotonic() - t_boot, _read_text(console_log),
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


def _stop_process(proc: subprocess.Popen) -> None:
    """Stop a process WE started (qemu, a build step), by its PID: SIGTERM, then SIGKILL
    after 10 s."""
    signals.stop_process(proc, grace_s=10.0, group=False)


# ---------------------------------------------------------------------------- CLI

def _parse_env(items: list[str]) -> dict:
    env = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not _ENV_NAME.match(name):
            raise VMError(f"--env expects NAME=VALUE, got {item!r}")
        env[name] = value
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m bufferbloat.vm",
        description="Build and run the project VM (Debian bookworm under qemu).")
    sub = parser.add_subparsers(dest="action", required=True)
    b = sub.add_parser("build", help="build the VM image (if the recipe changed)")
    b.add_argument("--force", action="store_true", help="rebuild even if up to date")
    b.add_argument("-v", "--verbose", action="store_true",
                   help="show every line of debootstrap/apt (always in build.log)")
    r = sub.add_parser("run", help="run a command in a fresh VM: run [OPTIONS] -- CMD ARGS...")
    r.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                   help="seconds before the VM is stopped (default %(default)s; 0: none)")
    r.add_argument("--memory", type=int, default=3072, help="MB (default %(default)s)")
    r.add_argument("--cpus", type=int, default=2, help="default %(default)s")
    r.add_argument("--accel", choices=["tcg", "kvm"], help="default: probe (see probe)")
    r.add_argument("--env", action="append", metavar="NAME=VALUE",
                   help="environment variable for the command (repeatable)")
    r.add_argument("--share", default=str(REPO_ROOT),
                   help="host directory seen as /bb in the guest (default: the checkout)")
    r.add_argument("-c", dest="script", metavar="SCRIPT",
                   help="a bash script to run instead of CMD ARGS")
    r.add_argument("-q", "--quiet", action="store_true", help="no vm: status lines")
    r.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS...")
    sub.add_parser("probe", help="can KVM boot the VM here? (else TCG)")
    args = parser.parse_args(argv)
    try:
        if args.action == "build":
            build_image(force=args.force, progress=print, verbose=args.verbose)
            return 0
        if args.action == "probe":
            ok = probe_kvm(progress=_stderr)
            print("kvm" if ok else "tcg")
            return 0
        command = list(args.command)
        if command and command[0] == "--":
            command = command[1:]
        if args.script is not None and command:
            parser.error("give either -c SCRIPT or -- CMD ARGS, not both")
        if args.script is None and not command:
            parser.error("nothing to run: vm/run -- CMD ARGS...")
        return run(args.script if args.script is not None else command,
                   share=args.share, timeout_s=args.timeout or None,
                   memory_mb=args.memory, cpus=args.cpus, env=_parse_env(args.env),
                   accel=args.accel, progress=_quiet if args.quiet else _stderr)
    except VMError as e:
        print(f"vm: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("vm: interrupted", file=sys.stderr)
        return RC_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
