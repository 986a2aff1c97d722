"""bufferbloat/vm/initrd.py: the project VM's own initramfs (bb-init and the root disk's
modules, in a cpio newc archive)."""
import os
import shutil
import stat
import subprocess

import pytest

from bufferbloat.vm import initrd
from bufferbloat.vm.common import VMError

#: the lines of the image's modules.dep (Debian's 6.1.0-56-amd64) that the root disk's
#: modules and their dependencies take, plus an unrelated one
MODULES_DEP = """\
kernel/fs/mbcache.ko:
kernel/fs/ext4/ext4.ko: kernel/lib/crc16.ko kernel/fs/mbcache.ko kernel/fs/jbd2/jbd2.ko
kernel/fs/jbd2/jbd2.ko:
kernel/crypto/crc32c_generic.ko:
kernel/lib/crc16.ko:
kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio_ring.ko:
kernel/drivers/virtio/virtio_pci_modern_dev.ko:
kernel/drivers/virtio/virtio_pci_legacy_dev.ko:
kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_legacy_dev.ko \
kernel/drivers/virtio/virtio_pci_modern_dev.ko kernel/drivers/virtio/virtio.ko \
kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/block/virtio_blk.ko: kernel/drivers/virtio/virtio.ko \
kernel/drivers/virtio/virtio_ring.ko
kernel/net/9p/9pnet_virtio.ko: kernel/net/9p/9pnet.ko kernel/drivers/virtio/virtio.ko \
kernel/drivers/virtio/virtio_ring.ko
""".replace("\\\n", "")

WANTED = ("virtio_pci", "virtio_blk", "ext4", "crc32c_generic")


def _parse_newc(data):
    """[(name, mode, rdevmajor, rdevminor, payload)] of a newc archive, read by the
    format's own rules (110-byte header, name and data padded to 4)."""
    out, pos = [], 0
    while True:
        head = data[pos:pos + 110]
        assert head[:6] == b"070701", head[:6]
        f = [int(head[6 + 8 * i:14 + 8 * i], 16) for i in range(13)]
        mode, size, rmaj, rmin, namesize = f[1], f[6], f[9], f[10], f[11]
        name = data[pos + 110:pos + 110 + namesize - 1].decode()
        pos += 110 + namesize
        pos += (4 - pos % 4) % 4
        payload = data[pos:pos + size]
        pos += size
        pos += (4 - pos % 4) % 4
        if name == "TRAILER!!!":
            assert len(data) % 4 == 0
            return out
        out.append((name, mode, rmaj, rmin, payload))


def test_the_modules_load_dependencies_first_each_once():
    order = initrd.module_order(MODULES_DEP, WANTED)
    names = [os.path.basename(p) for p in order]
    assert len(names) == len(set(names)) == 11
    assert "9pnet_virtio.ko" not in names          # only what the root disk needs
    deps = initrd.parse_modules_dep(MODULES_DEP)
    for i, path in enumerate(order):
        for dep in deps[initrd._name(path)][1]:
            assert order.index(dep) < i, (dep, path)


def test_a_module_built_in_needs_no_loading_and_an_unknown_one_is_an_error():
    dep = MODULES_DEP.replace("kernel/crypto/crc32c_generic.ko:\n", "")
    order = initrd.module_order(dep, WANTED, builtin="kernel/crypto/crc32c_generic.ko\n")
    assert not any("crc32c" in p for p in order)
    with pytest.raises(VMError, match="crc32c_generic is neither"):
        initrd.module_order(dep, WANTED)


def test_a_cycle_in_modules_dep_is_named():
    with pytest.raises(VMError, match="cycle"):
        initrd.module_order("a.ko: b.ko\nb.ko: a.ko\n", ["a"])


def test_the_archive_is_newc_with_a_console_node_and_an_executable_init():
    data = initrd.newc([("dev", "dir", None), ("dev/console", "char", (5, 1)),
                        ("init", "file", b"\x7fELF..."), ("m/x.ko", "file", b"abc")])
    got = {name: (mode, rmaj, rmin, payload) for name, mode, rmaj, rmin, payload
           in _parse_newc(data)}
    assert stat.S_ISDIR(got["dev"][0])
    assert stat.S_ISCHR(got["dev/console"][0]) and got["dev/console"][1:3] == (5, 1)
    assert stat.S_ISREG(got["init"][0]) and got["init"][0] & 0o111
    assert got["init"][3] == b"\x7fELF..." and got["m/x.ko"][3] == b"abc"
    assert not got["m/x.ko"][0] & 0o111
    with pytest.raises(ValueError):
        initrd.newc([("x", "fifo", None)])


def test_the_initramfs_choice_is_validated():
    assert initrd.chosen({}) == "bb-init"
    assert initrd.chosen({initrd.ENV: "debian"}) == "debian"
    with pytest.raises(VMError, match="bb-init, debian") as err:
        initrd.chosen({initrd.ENV: "busybox"})
    assert err.value.exit_code == 2


@pytest.mark.skipif(shutil.which("gcc") is None,
                    reason="no gcc on this machine: scripts/install-deps.sh installs it")
def test_bb_init_compiles_static_and_the_whole_archive_is_built(tmp_path):
    """The real source, compiled as the image build does; then the archive from a
    made-up /lib/modules tree: /init, the modules in order, the list bb-init reads."""
    init = initrd.compile_init(tmp_path / "bb-init")
    blob = init.read_bytes()
    assert blob[:4] == b"\x7fELF"
    # static: no PT_INTERP (3) among its program headers (ELF64, little-endian)
    phoff = int.from_bytes(blob[32:40], "little")
    phentsize, phnum = (int.from_bytes(blob[54:56], "little"),
                        int.from_bytes(blob[56:58], "little"))
    types = [int.from_bytes(blob[phoff + i * phentsize:phoff + i * phentsize + 4], "little")
             for i in range(phnum)]
    assert types and 3 not in types, types
    # not PID 1: it refuses before touching anything (it would mount over /dev)
    res = subprocess.run([str(init)], capture_output=True, text=True, timeout=10)
    assert res.returncode == 2 and "not PID 1" in res.stderr
    root = tmp_path / "rootfs"
    moddir = root / "lib/modules/6.1.0-56-amd64"
    for line in MODULES_DEP.splitlines():
        path = moddir / line.split(":")[0]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"module " + path.name.encode())
    (moddir / "modules.dep").write_text(MODULES_DEP)
    out = tmp_path / "initrd"
    listed = initrd.build(root, "6.1.0-56-amd64", out, WANTED)
    entries = {e[0]: e for e in _parse_newc(out.read_bytes())}
    assert entries["init"][4] == blob
    order = entries[initrd.MODULES_LIST][4].decode().split("\n")[1:-1]
    assert order == listed and len(order) == 11
    for path in order:
        assert entries[path.lstrip("/")][4].startswith(b"module ")
    with pytest.raises(VMError, match="no modules.dep"):
        initrd.build(root, "5.10.0-1-amd64", out, WANTED)
