"""The project VM's disk image: built with ``debootstrap`` and ``vm/provision.sh``, cached
under a key of its recipe (:func:`compute_cache_key`), reused while the key matches.

Build (``vm/build``, as root): debootstrap --variant=minbase, then ``vm/provision.sh``
in the chroot (the same script the Vagrantfile uses), the guest unit
``vm/guest/bb-run.service``, then ``mkfs.ext4 -d`` turns the tree into
``image-<key>.ext4`` (no loop mount). Kernel and initrd are copied next to it. The cache
(default ``/var/cache/bufferbloat-vm``, env ``BUFFERBLOAT_VM_CACHE``) is keyed by a hash
of vm/packages.txt, vm/provision.sh, vm/guest/* and :data:`RECIPE_VERSION`;
``image.json`` is written last, atomically, so a half-built image is never used. The
build's apt sources are the host's mirrors, and their names never stay in the image.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Callable, Iterable

from bufferbloat.core import signals
from bufferbloat.core.atomic import write_json_atomic
from bufferbloat.vm import initrd
from bufferbloat.vm.common import (
    CACHE_ENV,
    REQUIRED_TOOLS,
    SYS_PATH,
    VM_DIR,
    BuildError,
    MissingTool,
    Progress,
    VMError,
    cache_dir,
    check_tools,
    locked,
    quiet,
    stop_process,
    tool,
)

#: Bump when the build steps in this file change in a way that changes the image.
RECIPE_VERSION = "5"
SUITE = "bookworm"
IMAGE_SIZE = "4G"
IMAGE_LABEL = "bbroot"
MIN_FREE_BYTES = 6 * 1024**3
#: modules of the initramfs (MODULES=list): what mounting the virtio ext4 root needs
INITRAMFS_MODULES = ("virtio_pci", "virtio_blk", "ext4", "crc32c_generic")
#: units masked in the image (see _Builder._configure)
MASKED_UNITS = ("getty-static.service", "e2scrub_reap.service", "apt-daily.timer",
                "apt-daily-upgrade.timer", "dpkg-db-backup.timer", "e2scrub_all.timer",
                "fstrim.timer")


#: what building the image needs besides running it: a C compiler and a static libc
#: for /init (bufferbloat/vm/initrd.py)
BUILD_TOOLS = {**REQUIRED_TOOLS, "gcc": "gcc libc6-dev"}

BLACKLISTED_MODULES = ("kvm_amd", "kvm_intel", "kvm", "powernow_k8", "pcspkr")


@dataclasses.dataclass(frozen=True)
class ImagePaths:
    key: str
    image: Path
    kernel: Path
    initrd: Path
    kernel_release: str = ""


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


def umount_all(root: Path) -> None:
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


def remove_tree(root: Path) -> None:
    if not root.exists():
        return
    _kill_chroot_procs(root)
    umount_all(root)
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
        umount_all(root)


def _initrd_field() -> str:
    """The image.json field of the initramfs a boot uses: the image's own (bb-init,
    bufferbloat/vm/initrd.py) unless env BUFFERBLOAT_VM_INITRD=debian asks for Debian's,
    kept beside it."""
    return "initrd_debian" if initrd.chosen() == "debian" else "initrd"


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
    which = _initrd_field()
    if not meta.get(which):
        return None
    paths = ImagePaths(key=key, image=cache / meta["image"], kernel=cache / meta["kernel"],
                       initrd=cache / meta[which],
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
             "copy kernel and initrd; bb-init's initramfs",
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
        full_env = {"PATH": SYS_PATH, "LC_ALL": "C", "HOME": "/root", "TERM": "dumb"}
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
            stop_process(proc)          # interrupted: stop what WE started
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
        remove_tree(root)
        for p in self.cache.glob("*.tmp"):
            p.unlink()
        try:
            return self._build(root)
        finally:
            remove_tree(root)           # also after a failure: the log says what broke
            for p in self.cache.glob("*.tmp"):
                p.unlink()

    def _build(self, root: Path) -> ImagePaths:
        self.step(1)
        self.sh([tool("debootstrap"), "--variant=minbase", SUITE, str(root), self.main])
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
        kernel, initrd_debian, release = self._copy_kernel(tag)
        initrd_own = self.cache / f"initrd-{tag}"
        listed = initrd.build(root, release, initrd_own, INITRAMFS_MODULES)
        self.log.write(f"bb-init's initramfs: {initrd_own.stat().st_size} bytes, modules "
                       f"{' '.join(listed)}\n")
        self.step(7)
        image = self.cache / f"image-{tag}.ext4"
        tmp = image.with_name(image.name + ".tmp")
        self.sh([tool("mkfs.ext4"), "-F", "-q", "-L", IMAGE_LABEL,
                 "-E", "lazy_itable_init=0,lazy_journal_init=0",
                 "-d", str(root), str(tmp), IMAGE_SIZE])
        os.replace(tmp, image)
        self.step(8)
        meta = {"key": self.key, "image": image.name, "kernel": kernel.name,
                "initrd": initrd_own.name, "initrd_debian": initrd_debian.name,
                "kernel_release": release,
                "recipe_version": RECIPE_VERSION,
                "built": datetime.datetime.now().isoformat(timespec="seconds"),
                "build_seconds": round(self.elapsed(), 1)}
        write_json_atomic(self.cache / "image.json", meta)
        keep = {image.name, kernel.name, initrd_own.name, initrd_debian.name}
        for p in self.cache.iterdir():
            if p.is_file() and p.name.startswith(("image-", "vmlinuz-", "initrd-")) \
                    and p.name not in keep:
                p.unlink()
        return ImagePaths(self.key, image, kernel, self.cache / meta[_initrd_field()],
                          release)

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
        shutil.copytree(VM_DIR / "guest" / "sch_pi", dest / "sch_pi")   # the PI module
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
        # drop-ins (vm/guest/systemd/<unit>.d/*.conf): Open vSwitch started without
        # ovs-ctl, on a database made here, so that bb-run starts ~8 s sooner under TCG
        for conf in sorted((guest / "systemd").rglob("*.conf")):
            dest = root / "etc/systemd/system" / conf.relative_to(guest / "systemd")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(conf, dest)
            os.chmod(dest, 0o644)
        db = root / "var/lib/openvswitch/conf.db"
        if not db.exists():
            self.chroot("ovsdb-tool", "create", "/var/lib/openvswitch/conf.db",
                        "/usr/share/openvswitch/vswitch.ovsschema")
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
        debian_initrd = boot / f"initrd.img-{release}"
        if not debian_initrd.is_file():
            raise BuildError(f"no initrd {debian_initrd}")
        k_out, i_out = self.cache / f"vmlinuz-{tag}", self.cache / f"initrd-debian-{tag}"
        shutil.copyfile(vmlinuz, k_out)
        shutil.copyfile(debian_initrd, i_out)
        self.log.write(f"kernel {release}\n")
        return k_out, i_out, release


def build_image(force: bool = False, progress: Progress | None = print,
                verbose: bool = False) -> ImagePaths:
    """Build the VM image unless the cached one matches the recipe; return its paths.

    Needs root and debootstrap, qemu-system-x86_64, mkfs.ext4 (MissingTool otherwise).
    """
    progress = progress or quiet
    cache = cache_dir()
    key = compute_cache_key()
    if not force:
        paths = cached_image(cache, key)
        if paths:
            return paths
    check_tools(BUILD_TOOLS)
    if os.geteuid() != 0:
        raise MissingTool("building the VM image needs root: sudo vm/build")
    cache.mkdir(parents=True, exist_ok=True)
    with locked(cache / "build.lock", progress):
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
