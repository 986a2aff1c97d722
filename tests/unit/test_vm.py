"""Unit tests of the pure parts of bufferbloat.vm (no VM is booted, nothing is built)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bufferbloat.vm import boot, cli, common, control, image, session  # noqa: E402

# ---------------------------------------------------------------------------- cache key

@pytest.fixture
def vm_dir(tmp_path):
    """A copy of the real vm/ recipe files."""
    d = tmp_path / "vm"
    (d / "guest").mkdir(parents=True)
    for name in ("packages.txt", "provision.sh"):
        shutil.copy2(common.VM_DIR / name, d / name)
    shutil.copytree(common.VM_DIR / "guest", d / "guest", dirs_exist_ok=True)
    return d


def test_cache_key_is_stable_and_ignores_timestamps_and_other_files(vm_dir):
    k1 = image.compute_cache_key(vm_dir)
    assert len(k1) == 64 and int(k1, 16) >= 0
    (vm_dir / "provision.sh").touch()                       # mtime only
    (vm_dir / "build").write_text("#!/bin/bash\necho other\n")  # not an input
    (vm_dir / "README").write_text("notes\n")
    assert image.compute_cache_key(vm_dir) == k1


def test_cache_key_changes_with_provision_script(vm_dir):
    k1 = image.compute_cache_key(vm_dir)
    with open(vm_dir / "provision.sh", "a") as f:
        f.write("# a change\n")
    assert image.compute_cache_key(vm_dir) != k1


def test_cache_key_changes_with_a_same_length_edit(vm_dir):
    k1 = image.compute_cache_key(vm_dir)
    unit = vm_dir / "guest" / "bb-run.service"
    text = unit.read_text()
    unit.write_text(text.replace("Type=oneshot", "Type=oneshoT", 1))
    assert len(unit.read_text()) == len(text)
    assert image.compute_cache_key(vm_dir) != k1


def test_cache_key_changes_with_packages_guest_files_and_recipe(vm_dir):
    k1 = image.compute_cache_key(vm_dir)
    assert image.compute_cache_key(vm_dir, recipe=image.RECIPE_VERSION + "x") != k1
    with open(vm_dir / "packages.txt", "a") as f:
        f.write("tcpdump\n")
    k2 = image.compute_cache_key(vm_dir)
    assert k2 != k1
    (vm_dir / "guest" / "extra.conf").write_text("x\n")
    k3 = image.compute_cache_key(vm_dir)
    assert k3 not in (k1, k2)
    # renaming a guest file changes the key even with identical content
    (vm_dir / "guest" / "extra.conf").rename(vm_dir / "guest" / "other.conf")
    assert image.compute_cache_key(vm_dir) != k3


def test_cache_key_of_the_real_recipe_matches_a_copy(vm_dir):
    assert image.compute_cache_key(vm_dir) == image.compute_cache_key()


def test_cache_key_requires_the_recipe_files(vm_dir):
    (vm_dir / "packages.txt").unlink()
    with pytest.raises(common.VMError, match="packages.txt"):
        image.compute_cache_key(vm_dir)


def test_cache_dir_env_override_and_refuses_the_checkout(monkeypatch, tmp_path):
    monkeypatch.delenv(common.CACHE_ENV, raising=False)
    assert common.cache_dir() == Path(common.DEFAULT_CACHE_DIR)
    monkeypatch.setenv(common.CACHE_ENV, str(tmp_path / "c"))
    assert common.cache_dir() == tmp_path / "c"
    monkeypatch.setenv(common.CACHE_ENV, str(common.REPO_ROOT / "cache"))
    with pytest.raises(common.VMError, match="inside the checkout"):
        common.cache_dir()


def test_cached_image_needs_matching_key_and_files(tmp_path):
    import json
    for name in ("image-k.ext4", "vmlinuz-k", "initrd-k"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "image.json").write_text(json.dumps(
        {"key": "abc", "image": "image-k.ext4", "kernel": "vmlinuz-k", "initrd": "initrd-k"}))
    paths = image.cached_image(tmp_path, "abc")
    assert paths and paths.image == tmp_path / "image-k.ext4"
    assert image.cached_image(tmp_path, "other") is None
    (tmp_path / "initrd-k").unlink()
    assert image.cached_image(tmp_path, "abc") is None


def test_cached_image_boots_bb_init_unless_debians_initramfs_is_asked_for(tmp_path,
                                                                        monkeypatch):
    import json
    for name in ("image-k.ext4", "vmlinuz-k", "initrd-k", "initrd-debian-k"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "image.json").write_text(json.dumps(
        {"key": "abc", "image": "image-k.ext4", "kernel": "vmlinuz-k", "initrd": "initrd-k",
         "initrd_debian": "initrd-debian-k"}))
    monkeypatch.delenv("BUFFERBLOAT_VM_INITRD", raising=False)
    assert image.cached_image(tmp_path, "abc").initrd == tmp_path / "initrd-k"
    monkeypatch.setenv("BUFFERBLOAT_VM_INITRD", "debian")
    assert image.cached_image(tmp_path, "abc").initrd == tmp_path / "initrd-debian-k"
    monkeypatch.setenv("BUFFERBLOAT_VM_INITRD", "dracut")
    with pytest.raises(common.VMError, match="BUFFERBLOAT_VM_INITRD"):
        image.cached_image(tmp_path, "abc")


# ---------------------------------------------------------------------------- qemu args

def _paths(tmp_path):
    return image.ImagePaths(key="k" * 64, image=tmp_path / "image.ext4",
                         kernel=tmp_path / "vmlinuz", initrd=tmp_path / "initrd")


def _opt(args, flag):
    return [args[i + 1] for i, a in enumerate(args) if a == flag]


def test_qemu_args_tcg(tmp_path):
    share = tmp_path / "share"
    args = boot.qemu_args(_paths(tmp_path), "run-1", share, tmp_path / "con.log",
                        tmp_path / "out.log", accel="tcg", memory_mb=2048, cpus=3)
    assert _opt(args, "-accel") == ["tcg,thread=multi"]
    assert _opt(args, "-cpu") == ["max"]
    assert _opt(args, "-nic") == ["none"]
    assert _opt(args, "-m") == ["2048"] and _opt(args, "-smp") == ["3"]
    assert "-no-reboot" in args
    (drive,) = _opt(args, "-drive")
    assert drive.split(",") == [f"file={tmp_path / 'image.ext4'}", "if=virtio",
                                "format=raw", "snapshot=on"]
    (virtfs,) = _opt(args, "-virtfs")
    opts = virtfs.split(",")
    assert opts[0] == "local" and f"path={share}" in opts
    assert "mount_tag=bb" in opts and "security_model=none" in opts
    assert _opt(args, "-serial") == [f"file:{tmp_path / 'con.log'}",
                                     f"file:{tmp_path / 'out.log'}"]
    (append,) = _opt(args, "-append")
    words = append.split()
    assert "bb.run=run-1" in words and "console=ttyS0" in words
    # no `quiet`: the console log must show where a hung boot stopped
    assert "root=/dev/vda" in words and "quiet" not in words
    assert _opt(args, "-kernel") == [str(tmp_path / "vmlinuz")]
    assert _opt(args, "-initrd") == [str(tmp_path / "initrd")]


def test_qemu_args_kvm_and_bad_accel(tmp_path):
    args = boot.qemu_args(_paths(tmp_path), "r", tmp_path, "c", "o", accel="kvm")
    assert _opt(args, "-accel") == ["kvm"] and _opt(args, "-cpu") == ["host"]
    assert "tcg,thread=multi" not in args
    with pytest.raises(common.VMError):
        boot.qemu_args(_paths(tmp_path), "r", tmp_path, "c", "o", accel="xen")


def test_qemu_args_escape_commas_in_paths(tmp_path):
    share = tmp_path / "a,b"
    args = boot.qemu_args(_paths(tmp_path), "r", share, "c", "o")
    (virtfs,) = _opt(args, "-virtfs")
    assert f"path={tmp_path}/a,,b," in virtfs


@pytest.mark.parametrize("bad", ["", "../x", "a b", "a;b", "x" * 80, "-x"])
def test_run_id_is_validated(bad):
    with pytest.raises(common.VMError):
        boot.kernel_cmdline(bad)


def test_new_run_ids_are_valid_and_unique():
    ids = {control.new_run_id() for _ in range(50)}
    assert len(ids) == 50
    for i in ids:
        assert control.RUN_ID.match(i)
        boot.kernel_cmdline(i)


# ---------------------------------------------------------------------------- command script

NASTY = ["a b", "it's", '"dq"', "$HOME", "${PATH}", "`id`", "$(echo pwned)", "; echo pwned",
         "*", "", "back\\slash", "new\nline", "-n", "tab\there", "!bang"]


def _run_script(tmp_path, script):
    path = tmp_path / "cmd"
    path.write_text(script)
    return subprocess.run(["/bin/bash", str(path)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=30)


def test_command_list_is_quoted_safely(tmp_path):
    argv = [sys.executable, "-c", "import sys, json; print(json.dumps(sys.argv[1:]))", *NASTY]
    script = control.make_command_script(argv)
    assert script.startswith("#!/bin/bash\n")
    assert "\nexec " in script
    out = _run_script(tmp_path, script)
    assert out.returncode == 0, out.stderr
    import json
    assert json.loads(out.stdout) == NASTY       # nothing expanded, split or executed


def test_command_exit_code_passes_through(tmp_path):
    assert _run_script(tmp_path, control.make_command_script(["sh", "-c", "exit 7"])).returncode == 7
    assert _run_script(tmp_path, control.make_command_script("false\nexit 9")).returncode == 9


def test_env_values_are_quoted_and_names_checked(tmp_path):
    env = {"FOO": "a b $HOME `id` it's \"q\"", "EMPTY": "", "N": 5}
    script = control.make_command_script([sys.executable, "-c",
                                     "import os, json; print(json.dumps([os.environ['FOO'],"
                                     " os.environ['EMPTY'], os.environ['N']]))"], env)
    out = _run_script(tmp_path, script)
    import json
    assert json.loads(out.stdout) == [env["FOO"], "", "5"]
    for bad in ("1X", "A-B", "A B", "X;rm"):
        with pytest.raises(common.VMError):
            control.make_command_script(["true"], {bad: "v"})


def test_empty_commands_are_refused():
    with pytest.raises(common.VMError):
        control.make_command_script([])
    with pytest.raises(common.VMError):
        control.make_command_script("  \n")


# ---------------------------------------------------------------------------- apt sources

DEB822 = """\
Types: deb
# http://snapshot.example.net/archive/debian/20250520T000000Z
URIs: http://mirror.example.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://security.example.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def test_mirror_from_deb822():
    entries = image.parse_apt_sources(DEB822)
    assert [e["uris"] for e in entries] == [["http://mirror.example.org/debian"],
                                           ["http://security.example.org/debian-security"]]
    assert image.pick_mirrors(entries) == ("http://mirror.example.org/debian",
                                        "http://security.example.org/debian-security")


def test_mirror_from_deb822_security_first_disabled_and_deb_src():
    text = """\
Types: deb
URIs: http://security.example.org/debian-security/
Suites: bookworm-security
Components: main

Types: deb-src
URIs: http://src.example.org/debian
Suites: bookworm
Components: main

Types: deb
Enabled: no
URIs: http://disabled.example.org/debian
Suites: bookworm

Types: deb
URIs: https://one.example.org/debian https://two.example.org/debian
Suites: bookworm
Components: main
"""
    assert image.pick_mirrors(image.parse_apt_sources(text)) == (
        "https://one.example.org/debian", "http://security.example.org/debian-security")


def test_mirror_from_one_line_format():
    text = ("# comment\n"
            "deb [arch=amd64 signed-by=/k.gpg] http://mirror.example.org/debian bookworm main\n"
            "deb http://security.example.org/debian-security bookworm-security main\n")
    assert image.pick_mirrors(image.parse_apt_sources(text)) == (
        "http://mirror.example.org/debian", "http://security.example.org/debian-security")


def test_mirror_listing_our_suite_is_preferred():
    text = ("deb http://sid.example.org/debian sid main\n"
            "deb http://bookworm.example.org/debian bookworm main\n")
    assert image.pick_mirrors(image.parse_apt_sources(text))[0] == "http://bookworm.example.org/debian"


def test_mirror_of_another_release_is_still_used():
    text = "Types: deb\nURIs: http://m.example.org/debian\nSuites: trixie trixie-updates\n"
    assert image.pick_mirrors(image.parse_apt_sources(text)) == ("http://m.example.org/debian", None)


def test_no_mirror_is_an_error():
    with pytest.raises(common.VMError):
        image.pick_mirrors(image.parse_apt_sources("# nothing\n"))


def test_guest_sources_and_redaction():
    text = image.guest_sources_list("http://m.example.org/debian", "http://s.example.org/sec")
    assert text.splitlines() == ["deb http://m.example.org/debian bookworm main",
                                 "deb http://m.example.org/debian bookworm-updates main",
                                 "deb http://s.example.org/sec bookworm-security main"]
    redact = image.redactor(["http://m.example.org/debian", "http://s.example.org/sec", None])
    line = "Get:1 http://m.example.org/debian bookworm InRelease; s.example.org too"
    out = redact(line)
    assert "example.org" not in out and out.count("<mirror>") == 2


# ---------------------------------------------------------------------------- misc

def test_missing_tool_names_the_package(monkeypatch):
    with pytest.raises(common.MissingTool, match="apt-get install no-such-package") as e:
        common.check_tools({"bb-no-such-tool-xyz": "no-such-package"})
    assert e.value.exit_code == 2


def test_accel_env_override(monkeypatch):
    monkeypatch.setenv(session.ACCEL_ENV, "tcg")
    assert session.probe_kvm(progress=None) is False
    monkeypatch.setenv(session.ACCEL_ENV, "kvm")
    assert session.probe_kvm(progress=None) is True
    monkeypatch.setenv(session.ACCEL_ENV, "bogus")
    with pytest.raises(common.VMError):
        session.probe_kvm(progress=None)


def test_cli_rejects_empty_run_and_bad_env(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "--"])
    assert e.value.code == 2
    assert cli.main(["run", "--env", "1BAD=x", "--", "true"]) == 1
    assert "NAME=VALUE" in capsys.readouterr().err


def test_every_host_tool_the_vm_needs_is_in_the_host_packages():
    """What the image, its build and the Vagrant box call on the host is installed by
    scripts/install-deps.sh: a fresh machine (2026-11-30) had no sfdisk, and the box's
    acceptance test failed with "missing host tool(s): sfdisk" after 17 minutes."""
    from bufferbloat.vm import box  # noqa: PLC0415
    root = Path(__file__).resolve().parents[2]
    listed = set()
    for line in (root / "scripts" / "host-packages.txt").read_text().splitlines():
        listed.update(line.split("#", 1)[0].split())
    needed = set()
    for tools in (common.REQUIRED_TOOLS, image.BUILD_TOOLS, box.BOX_TOOLS):
        for pkgs in tools.values():
            needed.update(pkgs.split())
    assert needed - listed == set()
