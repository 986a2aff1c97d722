"""The project VM's initramfs: one static program (vm/guest/bb-init.c) and the modules
the root disk needs, in an uncompressed cpio ("newc") archive.

Debian's initramfs-tools took ~5 s under TCG between the kernel's ``Run /init`` and
systemd (udev's coldplug and settle, shell scripts) for what the VM needs: load the
virtio and ext4 modules, wait for /dev/vda, mount it, switch to it. bb-init does those
steps and nothing else. The image keeps Debian's initramfs beside it:
``BUFFERBLOAT_VM_INITRD=debian`` boots that one (:func:`chosen`), e.g. to compare or
should bb-init ever fail (it says so on the console, and the boot ends at once).

Pure Python but for the compiler: the module order comes from the image's
``modules.dep`` (:func:`module_order`), the archive is written here (:func:`newc`).
"""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
from pathlib import Path

from .common import VM_DIR, VMError

#: env: which initramfs a boot uses: "bb-init" (default) or "debian"
ENV = "BUFFERBLOAT_VM_INITRD"
CHOICES = ("bb-init", "debian")
#: the source of /init (in vm/guest/, so that it is part of the image's key; an
#: installed package has it as package data, beside the other files of vm/)
SOURCE = Path(VM_DIR) / "guest" / "bb-init.c"
#: where bb-init reads the modules to load, in order (one path a line)
MODULES_LIST = "bb-init.modules"


class BadChoice(VMError):
    """An unknown ``BUFFERBLOAT_VM_INITRD``: bad input, exit code 2, before any boot."""

    exit_code = 2


def chosen(environ=None) -> str:
    """The initramfs a boot uses (env ``BUFFERBLOAT_VM_INITRD``), validated."""
    value = (environ if environ is not None else os.environ).get(ENV, "") or CHOICES[0]
    if value not in CHOICES:
        raise BadChoice(f"{ENV}={value!r}: valid values are {', '.join(CHOICES)}")
    return value


def parse_modules_dep(text: str) -> dict[str, tuple[str, list[str]]]:
    """{module name: (its path, [its dependencies' paths])} from ``modules.dep``
    ("kernel/fs/ext4/ext4.ko: kernel/lib/crc16.ko ..."); names as modprobe's, "-" read
    as "_"."""
    out = {}
    for line in text.splitlines():
        if ":" not in line:
            continue
        path, deps = line.split(":", 1)
        path = path.strip()
        out[_name(path)] = (path, deps.split())
    return out


def _name(path: str) -> str:
    base = os.path.basename(path)
    for ext in (".ko", ".ko.xz", ".ko.zst", ".ko.gz"):
        if base.endswith(ext):
            base = base[: -len(ext)]
            break
    return base.replace("-", "_")


def module_order(modules_dep: str, wanted, builtin: str = "") -> list[str]:
    """The paths of ``wanted`` modules and everything they depend on, each once,
    dependencies first (the order bb-init loads them). A module built into the kernel
    (``modules.builtin``) needs no loading; one found in neither is an error."""
    deps = parse_modules_dep(modules_dep)
    built_in = {_name(p) for p in builtin.split()}
    order: list[str] = []
    seen: set[str] = set()

    def visit(name: str, stack: tuple) -> None:
        if name in seen:
            return
        if name in stack:
            raise VMError(f"modules.dep has a cycle through {name}")
        if name not in deps:
            if name in built_in:
                seen.add(name)
                return
            raise VMError(f"module {name} is neither in modules.dep nor built in")
        path, needs = deps[name]
        # modules.dep lists a module's dependencies deepest last: load from the end
        for dep in reversed(needs):
            visit(_name(dep), stack + (name,))
        seen.add(name)
        order.append(path)

    for name in wanted:
        visit(name.replace("-", "_"), ())
    return order


def _header(name: str, mode: int, size: int, ino: int, rdev=(0, 0), nlink=1) -> bytes:
    fields = [ino, mode, 0, 0, nlink, 0, size, 0, 0, rdev[0], rdev[1], len(name) + 1, 0]
    return ("070701" + "".join(f"{v:08x}" for v in fields)).encode() + name.encode() + b"\0"


def _pad(n: int) -> bytes:
    return b"\0" * ((4 - n % 4) % 4)


def newc(entries) -> bytes:
    """A cpio "newc" archive (what the kernel unpacks as an initramfs) of ``entries``:
    (name, kind, payload) with kind "dir", "file" (payload: bytes, mode 0755 when the
    name is "init", else 0644) or "char" (payload: (major, minor)); names relative."""
    out = bytearray()
    for ino, (name, kind, payload) in enumerate(entries, start=1):
        data = b""
        rdev = (0, 0)
        if kind == "dir":
            mode = stat.S_IFDIR | 0o755
        elif kind == "file":
            mode = stat.S_IFREG | (0o755 if name == "init" else 0o644)
            data = payload
        elif kind == "char":
            mode = stat.S_IFCHR | 0o600
            rdev = payload
        else:
            raise ValueError(f"unknown cpio entry kind {kind!r}")
        head = _header(name, mode, len(data), ino, rdev, 2 if kind == "dir" else 1)
        out += head + _pad(len(head)) + data + _pad(len(data))
    trailer = _header("TRAILER!!!", 0, 0, 0)
    out += trailer + _pad(len(trailer))
    out += _pad(len(out))
    return bytes(out)


def compile_init(out: Path, cc: str = "gcc") -> Path:
    """bb-init, compiled static from vm/guest/bb-init.c into ``out``."""
    res = subprocess.run([cc, "-static", "-O2", "-Wall", "-s", "-o", str(out), str(SOURCE)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise VMError(f"compiling {SOURCE.name} failed: {res.stderr.strip()[-2000:]}")
    return out


def build(rootfs: Path, release: str, out: Path, wanted, cc: str = "gcc") -> list[str]:
    """Write the initramfs of ``release``'s kernel in ``rootfs`` to ``out``: /init
    (bb-init), the modules ``wanted`` and their dependencies from the image's own
    /lib/modules, the list bb-init loads them from, /dev/console. Returns the list."""
    moddir = Path(rootfs) / "lib" / "modules" / release
    try:
        dep_text = (moddir / "modules.dep").read_text()
    except OSError as exc:
        raise VMError(f"no modules.dep for kernel {release} in the image: {exc}") from exc
    builtin_path = moddir / "modules.builtin"
    builtin = builtin_path.read_text() if builtin_path.is_file() else ""
    order = module_order(dep_text, wanted, builtin)
    with tempfile.TemporaryDirectory(prefix="bb-init-") as tmp:
        init = compile_init(Path(tmp) / "bb-init", cc).read_bytes()
    entries = [("dev", "dir", None), ("dev/console", "char", (5, 1)), ("proc", "dir", None),
               ("root", "dir", None), ("m", "dir", None)]
    listed = []
    for i, rel in enumerate(order):
        name = f"m/{i:02d}-{os.path.basename(rel)}"
        entries.append((name, "file", (moddir / rel).read_bytes()))
        listed.append("/" + name)
    entries.append((MODULES_LIST, "file",
                    ("# loaded in this order by /init (vm/guest/bb-init.c)\n"
                     + "".join(p + "\n" for p in listed)).encode()))
    entries.append(("init", "file", init))
    tmp_out = out.with_name(out.name + ".tmp")
    tmp_out.write_bytes(newc(entries))
    os.replace(tmp_out, out)
    return listed
