"""The project VM as a Vagrant box for the libvirt provider (``vm/box``, as root).

Boxes cannot be downloaded everywhere; this one is made from the project's own image
(:mod:`.image`), so that the Vagrant path (the top-level ``Vagrantfile``, env
``BUFFERBLOAT_BOX``) can be tested on any machine that can build the image. The image is
one ext4 file system booted with an outside kernel; a box needs a disk that boots by
itself and a machine Vagrant can log into. So, on a copy:

* a 20 GiB sparse disk: an MBR partition table, the image as partition 1 (grown to fill
  it), GRUB (i386-pc) in the MBR, a grub.cfg that boots the image's kernel with
  ``root=LABEL=bbroot`` and a serial console;
* installed in a chroot from the host's apt mirrors (their names are removed again, as
  in the image): openssh-server, sudo, rsync (Vagrant's synced folder), ifupdown and
  isc-dhcp-client (``eth0`` by DHCP: the provider's management network), GRUB;
* the ``vagrant`` user (password ``vagrant``), passwordless sudo, Vagrant's insecure
  public key in its ``authorized_keys``; root's password locked; a fresh machine id
  and fresh ssh host keys at each first boot;
* ``box.img`` (qcow2), ``metadata.json`` and a ``Vagrantfile``, tarred into
  ``CACHE/box/bufferbloat-vm-<key>.box`` (never in the checkout). The key covers the
  image's key and :data:`BOX_RECIPE_VERSION`: the box is rebuilt when either changes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
import tarfile
import time
from pathlib import Path

from bufferbloat.core.atomic import write_json_atomic
from bufferbloat.vm.common import (
    SYS_PATH,
    BuildError,
    MissingTool,
    Progress,
    cache_dir,
    check_tools,
    locked,
    quiet,
    tool,
)
from bufferbloat.vm.image import (
    IMAGE_LABEL,
    build_image,
    guest_sources_list,
    host_mirrors,
    redactor,
    remove_tree,
    umount_all,
)

#: Bump when the steps below change the box.
BOX_RECIPE_VERSION = "1"
DISK_GIB = 20
#: what the box adds to the image (the image has no network, no sshd, no boot loader)
BOX_PACKAGES = ("openssh-server", "sudo", "rsync", "ifupdown", "isc-dhcp-client",
                "grub-pc-bin", "grub2-common")
BOX_TOOLS = {"sfdisk": "fdisk", "losetup": "mount", "partx": "util-linux", "qemu-img": "qemu-utils",
             "resize2fs": "e2fsprogs", "e2fsck": "e2fsprogs"}
#: Vagrant's well-known insecure public key (the one its boxes ship; Vagrant replaces it
#: by a key of its own at the first `vagrant up`); read from the installed vagrant when
#: there is one
INSECURE_KEY = (
    "ssh-rsa AAAAB3NzaC1yc2EAAAABIwAAAQEA6NF8iallvQVp22WDkTkyrtvp9eWW6A8YVr+kz4TjGYe7gHzIw"
    "+niNltGEFHzD8+v1I2YJ6oXevct1YeS0o9HZyN1Q9qgCgzUFtdOKLv6IedplqoPkcmF0aYet2PkEDo3MlTB"
    "ckFXPITAMzF8dJSIFo9D8HfdOV0IAdx4O7PtixWKn5y2hMNG0zQPyUecp4pzC6kivAIhyfHilFR61RGL+GP"
    "XQ2MWZWFYbAGjyiYJnAmCP3NOTd0jMZEnDkbUvxhMmBYSdETk1rRgm+R4LOzFUGaHqHDLKLX+FIPKcF96hr"
    "ucXzcWyLbIbEgE98OHlnVYCzRdK8jlqm8tehUc9c9WhQ== vagrant insecure public key")
BOX_VAGRANTFILE = """\
# The bufferbloat project VM as a libvirt box (made by vm/box from the project's image).
Vagrant.configure("2") do |config|
  config.vm.provider :libvirt do |libvirt|
    libvirt.disk_bus = "virtio"
    libvirt.nic_model_type = "virtio"
  end
end
"""
GRUB_CFG = """\
# written by vm/box: the project VM's kernel, its root file system found by label
set timeout=0
serial --unit=0 --speed=115200
terminal_input console serial
terminal_output console serial
insmod part_msdos
insmod ext2
search --no-floppy --label {label} --set=root
linux /boot/vmlinuz-{release} root=LABEL={label} ro net.ifnames=0 console=tty0 console=ttyS0,115200
initrd /boot/initrd.img-{release}
boot
"""
INTERFACES = """\
# written by vm/box: the provider's management network, by DHCP
auto lo
iface lo inet loopback

allow-hotplug eth0
iface eth0 inet dhcp
"""
SSH_KEYS_DROPIN = """\
# written by vm/box: each VM made from the box makes its own host keys at first boot
[Service]
ExecStartPre=
ExecStartPre=/usr/bin/ssh-keygen -A
ExecStartPre=/usr/sbin/sshd -t
"""


def box_key(image_key: str) -> str:
    return f"{image_key[:16]}-b{BOX_RECIPE_VERSION}"


def box_dir() -> Path:
    return cache_dir() / "box"


def cached_box(image_key: str) -> Path | None:
    """The box built from the image of ``image_key`` by this recipe, if it is there."""
    try:
        meta = json.loads((box_dir() / "box.json").read_text())
    except (OSError, ValueError):
        return None
    path = box_dir() / meta.get("box", "")
    if meta.get("key") == box_key(image_key) and path.is_file():
        return path
    return None


def insecure_key() -> str:
    for path in sorted(Path("/usr/share/rubygems-integration/all/gems").glob(
            "vagrant-*/keys/vagrant.pub")):
        with contextlib.suppress(OSError):
            text = path.read_text().strip()
            if text.startswith("ssh-"):
                return text
    return INSECURE_KEY


class _BoxBuilder:
    """One box build in ``work``: its steps, its loop device and mounts (always undone)."""

    def __init__(self, work: Path, progress: Progress):
        self.work, self.progress = work, progress
        self.t0 = time.monotonic()
        self.loop: str | None = None
        self.mnt = work / "mnt"
        self.log = open(work / "box.log", "w", buffering=1)
        self.main, self.security = host_mirrors()
        self.redact = redactor([self.main, self.security])

    def sh(self, argv: list[str], env: dict | None = None) -> str:
        self.log.write("$ " + self.redact(" ".join(argv)) + "\n")
        full_env = {"PATH": SYS_PATH, "LC_ALL": "C", "HOME": "/root",
                    "DEBIAN_FRONTEND": "noninteractive"}
        full_env.update(env or {})
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, env=full_env)
        self.log.write(self.redact(proc.stdout + proc.stderr))
        if proc.returncode != 0:
            tail = self.redact((proc.stdout + proc.stderr).strip())[-2000:]
            raise BuildError(f"vm/box: {self.redact(' '.join(argv))} exited with "
                             f"{proc.returncode}; see {self.work / 'box.log'}\n{tail}")
        return proc.stdout

    def chroot(self, *argv: str) -> str:
        return self.sh(["chroot", str(self.mnt), *argv])

    def step(self, msg: str) -> None:
        self.progress(f"vm/box: {msg}  (t+{time.monotonic() - self.t0:.0f}s)")

    def build(self, image, out: Path) -> None:
        raw = self.work / "disk.raw"
        self.step("disk: partition table, the image as partition 1")
        with open(raw, "wb") as f:
            f.truncate(DISK_GIB * 1024**3)
        subprocess.run([tool("sfdisk"), "-q", str(raw)], input="label: dos\nstart=2048, "
                       "type=83, bootable\n", text=True, check=True, capture_output=True)
        self.sh(["dd", f"if={image.image}", f"of={raw}", "bs=4M", "seek=1M",
                 "oflag=seek_bytes", "conv=notrunc,sparse"])
        self.loop = self.sh([tool("losetup"), "--show", "-f", "-P", str(raw)]).strip()
        part = self._partition(self.loop)
        self.sh([tool("e2fsck"), "-f", "-y", part])
        self.sh([tool("resize2fs"), part])
        self.mnt.mkdir(exist_ok=True)
        self.sh(["mount", part, str(self.mnt)])
        try:
            self._customize(image)
            self.step("boot loader (GRUB in the MBR)")
            self.chroot("grub-install", "--target=i386-pc", "--boot-directory=/boot",
                        self.loop)
        finally:
            self.step("unmount, detach")
            umount_all(self.mnt)
            self.detach()
        self.step("qcow2 (qemu-img convert)")
        qcow = self.work / "box.img"
        self.sh([tool("qemu-img"), "convert", "-O", "qcow2", str(raw), str(qcow)])
        raw.unlink()
        (self.work / "metadata.json").write_text(json.dumps(
            {"provider": "libvirt", "format": "qcow2", "virtual_size": DISK_GIB}) + "\n")
        (self.work / "Vagrantfile").write_text(BOX_VAGRANTFILE)
        self.step(f"tar {out.name}")
        tmp = out.with_name(out.name + ".tmp")
        with tarfile.open(tmp, "w") as tar:
            for name in ("metadata.json", "Vagrantfile", "box.img"):
                tar.add(self.work / name, arcname=name)
        os.replace(tmp, out)

    def _partition(self, loop: str) -> str:
        """The loop device's partition 1 (without udev, e.g. in a container, the kernel
        may not scan the table at ``losetup -P``: ``partx -a`` asks it, and the node is
        made from sysfs if devtmpfs did not)."""
        part = f"{loop}p1"
        sysfs = Path("/sys/class/block") / Path(part).name / "dev"
        for attempt in range(50):
            if os.path.exists(part):
                return part
            if attempt == 5:
                subprocess.run([tool("partx"), "-a", loop], capture_output=True)
            if attempt == 20 and sysfs.is_file():
                major, minor = sysfs.read_text().split(":")
                os.mknod(part, 0o600 | stat.S_IFBLK, os.makedev(int(major), int(minor)))
            time.sleep(0.1)
        raise BuildError(f"vm/box: no partition device {part} after losetup -P and partx")

    def detach(self) -> None:
        """The loop device, its partition and any node made for it: gone."""
        if self.loop:
            subprocess.run([tool("partx"), "-d", self.loop], capture_output=True)
            subprocess.run([tool("losetup"), "-d", self.loop], capture_output=True)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.loop}p1")
            self.loop = None

    def _customize(self, image) -> None:
        root = self.mnt
        for fstype, src, rel in (("proc", "proc", "proc"), ("sysfs", "sysfs", "sys"),
                                 (None, "/dev", "dev")):
            opts = ["--rbind"] if fstype is None else ["-t", fstype]
            self.sh(["mount", *opts, src, str(root / rel)])
        self.step("packages: " + " ".join(BOX_PACKAGES))
        sources = root / "etc/apt/sources.list"
        sources.write_text(guest_sources_list(self.main, self.security))
        resolv = root / "etc/resolv.conf"
        resolv.unlink(missing_ok=True)
        shutil.copyfile("/etc/resolv.conf", resolv)
        policy = root / "usr/sbin/policy-rc.d"
        policy.write_text("#!/bin/sh\n# vm/box: no service starts in the chroot\nexit 101\n")
        policy.chmod(0o755)
        try:
            self.chroot("apt-get", "-q", "update")
            self.chroot("apt-get", "-y", "-q", "--no-install-recommends",
                        "-o", "Dpkg::Options::=--force-confold", "install", *BOX_PACKAGES)
            self.chroot("apt-get", "clean")
        finally:
            policy.unlink()
            sources.unlink()
            for p in (root / "var/lib/apt/lists").glob("*"):
                if p.is_file():
                    p.unlink()
        self.step("the vagrant user, sshd, network, fstab, grub.cfg")
        self.chroot("useradd", "--create-home", "--shell", "/bin/bash", "--user-group",
                    "vagrant")
        subprocess.run(["chroot", str(root), "chpasswd"], input="vagrant:vagrant\n",
                       text=True, check=True, env={"PATH": SYS_PATH})
        self.chroot("passwd", "-l", "root")
        sudoers = root / "etc/sudoers.d/vagrant"
        sudoers.write_text("vagrant ALL=(ALL) NOPASSWD: ALL\nDefaults:vagrant !requiretty\n")
        sudoers.chmod(0o440)
        ssh = root / "home/vagrant/.ssh"
        ssh.mkdir(mode=0o700, exist_ok=True)
        (ssh / "authorized_keys").write_text(insecure_key() + "\n")
        (ssh / "authorized_keys").chmod(0o600)
        self.chroot("chown", "-R", "vagrant:vagrant", "/home/vagrant/.ssh")
        (root / "etc/ssh/sshd_config.d").mkdir(exist_ok=True)
        (root / "etc/ssh/sshd_config.d/vagrant.conf").write_text(
            "# written by vm/box\nUseDNS no\n")
        dropin = root / "etc/systemd/system/ssh.service.d"
        dropin.mkdir(parents=True, exist_ok=True)
        (dropin / "host-keys.conf").write_text(SSH_KEYS_DROPIN)
        for key in (root / "etc/ssh").glob("ssh_host_*"):
            key.unlink()
        (root / "etc/network/interfaces").write_text(INTERFACES)
        resolv.unlink()
        resolv.write_text("")               # dhclient fills it
        (root / "etc/machine-id").write_text("")  # systemd makes one at first boot
        (root / "etc/fstab").write_text(
            "# written by vm/box\n"
            f"LABEL={IMAGE_LABEL} / ext4 rw,noatime,errors=remount-ro 0 1\n")
        grub = root / "boot/grub"
        grub.mkdir(parents=True, exist_ok=True)
        (grub / "grub.cfg").write_text(GRUB_CFG.format(label=IMAGE_LABEL,
                                                       release=image.kernel_release))


def build_box(force: bool = False, progress: Progress | None = print) -> Path:
    """Build the Vagrant box from the project image (built first if needed); return the
    path of the ``.box`` file. Reuses the cached box while the image and recipe match."""
    progress = progress or quiet
    image = build_image(progress=progress)
    if not force:
        cached = cached_box(image.key)
        if cached:
            return cached
    check_tools(BOX_TOOLS)
    if os.geteuid() != 0:
        raise MissingTool("building the box needs root (loop device, chroot): sudo vm/box")
    out_dir = box_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    with locked(out_dir / "box.lock", progress, "vm/box: waiting for another box build"):
        if not force and cached_box(image.key):
            return cached_box(image.key)
        work = out_dir / "build"
        remove_tree(work)
        work.mkdir()
        name = f"bufferbloat-vm-{box_key(image.key)}.box"
        builder = _BoxBuilder(work, progress)
        try:
            builder.build(image, out_dir / name)
        finally:
            builder.log.close()
            builder.detach()
        shutil.copyfile(work / "box.log", out_dir / "box.log")
        remove_tree(work)
        seconds = round(time.monotonic() - builder.t0, 1)
        write_json_atomic(out_dir / "box.json", {"key": box_key(image.key), "box": name,
                                                 "build_seconds": seconds})
        for p in out_dir.glob("bufferbloat-vm-*.box"):
            if p.name != name:
                p.unlink()
        size = (out_dir / name).stat().st_size
        progress(f"vm/box: {out_dir / name} ({size / 1024**3:.2f} GiB) in {seconds:.0f}s")
        return out_dir / name
