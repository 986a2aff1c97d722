"""The course VM as a student starts it, for real: `vagrant validate`, `vagrant up
--provider=libvirt` with the project's own box (vm/box; boxes cannot be downloaded
here), provisioning included, one quick point inside through the README's wrapper
(`vm/vagrant-run --quick -- --only a2_pie`), its result.json and report.html back in the
checkout on the host, `vagrant destroy -f`, and no libvirt domain, volume or network
left behind.

Boots a VM under TCG (libvirt's qemu driver; env BUFFERBLOAT_LIBVIRT_DRIVER=kvm where KVM
works): about 15 minutes on 2 cores, hence the acceptance tier. Needs root, vagrant,
vagrant-libvirt and libvirt (scripts/host-packages.txt); on a machine without systemd,
where nothing starts libvirtd, the test starts virtlogd and libvirtd itself and ends
them afterwards, by PID. The checkout is copied (its files as git lists them) to a
temporary directory, so that the run's results never mix with this checkout's; Vagrant's
home is temporary too. The box's volume, which vagrant-libvirt keeps in the pool as its
cache of the box, is deleted at the end (by name: only the one this test uploaded)."""
import glob
import os
import shutil
import subprocess
import time

import pytest

from bufferbloat.core.errors import EXIT_DEGRADED

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
POOL = "default"

pytestmark = pytest.mark.acceptance


def _run(argv, cwd=None, env=None, timeout=600):
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    print(f"$ {' '.join(argv)}  ({time.monotonic() - t0:.0f} s, exit {proc.returncode})")
    print(proc.stdout[-6000:], proc.stderr[-4000:])
    return proc


def _virsh(*args):
    return subprocess.run(["virsh", "-c", "qemu:///system", *args], capture_output=True,
                          text=True, timeout=60)


def _listings():
    """(domains, volumes of the default pool, networks): sets of names."""
    doms = _virsh("list", "--all", "--name")
    nets = _virsh("net-list", "--all", "--name")
    assert doms.returncode == 0 and nets.returncode == 0, doms.stderr + nets.stderr
    vols = _virsh("vol-list", POOL)
    names = set()
    if vols.returncode == 0:         # no pool yet: vagrant-libvirt defines it
        names = {ln.split()[0] for ln in vols.stdout.splitlines()[2:] if ln.strip()}
    return ({d for d in doms.stdout.split() if d}, names,
            {n for n in nets.stdout.split() if n})


def _daemon(name):
    """A libvirt daemon started in the foreground, in its own session (its PID ours)."""
    exe = shutil.which(name) or os.path.join("/usr/sbin", name)
    assert os.path.exists(exe), f"{name} is not installed: scripts/install-deps.sh"
    return subprocess.Popen([exe], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


@pytest.fixture
def libvirt():
    """A libvirtd that answers: the machine's own, or, where none runs (no systemd),
    virtlogd and libvirtd started here and ended afterwards by their PIDs."""
    started = []
    if _virsh("uri").returncode != 0:
        if not subprocess.run(["pgrep", "-x", "virtlogd"], capture_output=True).stdout:
            started.append(_daemon("virtlogd"))
        started.append(_daemon("libvirtd"))
        deadline = time.monotonic() + 60
        while _virsh("uri").returncode != 0 and time.monotonic() < deadline:
            assert all(p.poll() is None for p in started), "libvirt's daemons exited"
            time.sleep(0.5)
    uri = _virsh("uri")
    assert uri.returncode == 0, f"libvirtd does not answer: {uri.stderr}"
    yield
    for proc in reversed(started):
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture
def checkout(tmp_path):
    """A copy of this checkout's files (tracked and new, not ignored)."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    dest = tmp_path / "checkout"
    for rel in filter(None, files):
        src = os.path.join(ROOT, rel)
        if os.path.isfile(src):
            os.makedirs(dest / os.path.dirname(rel), exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


@pytest.fixture
def tools():
    for tool in ("vagrant", "virsh"):
        assert shutil.which(tool), f"{tool} is not installed: scripts/install-deps.sh"
    assert os.geteuid() == 0, "needs root (vm/box, libvirt's system instance)"


def _says(proc):
    """An assert's message: the command, its exit and its output's tails (a test
    record keeps the message, not the printed output: a failure of 2026-11-30 03:44,
    exit 2 in 1.1 s, left no cause)."""
    # one line, its cause first: the record keeps an assert's first 300 characters
    return (f"exit {proc.returncode}, stderr ends {proc.stderr[-200:]!r} "
            f"({os.path.basename(str(proc.args[0]))}); stdout ends {proc.stdout[-500:]!r}")


def test_vagrant_up_runs_a_point_and_brings_its_results_back(tools, libvirt, checkout,
                                                             tmp_path):
    before = _listings()
    t0 = time.monotonic()
    box = _run([os.path.join(ROOT, "vm", "box")], cwd=ROOT, timeout=1800)
    assert box.returncode == 0, _says(box)
    box_path = box.stdout.strip().splitlines()[-1]
    assert box_path.endswith(".box") and os.path.isfile(box_path)
    box_name = os.path.basename(box_path)[:-len(".box")]
    env = dict(os.environ, BUFFERBLOAT_BOX=box_path, VAGRANT_HOME=str(tmp_path / "vhome"),
               VAGRANT_CHECKPOINT_DISABLE="1", VAGRANT_DEFAULT_PROVIDER="libvirt",
               BUFFERBLOAT_LIBVIRT_DRIVER=os.environ.get("BUFFERBLOAT_LIBVIRT_DRIVER",
                                                         "qemu"))
    env.pop("VAGRANT_CWD", None)
    times = {"box": time.monotonic() - t0}
    try:
        validate = _run(["vagrant", "validate"], cwd=checkout, env=env)
        assert validate.returncode == 0, _says(validate)
        t = time.monotonic()
        up = _run(["vagrant", "up", "--provider=libvirt"], cwd=checkout, env=env,
                  timeout=2400)
        times["up"] = time.monotonic() - t
        assert up.returncode == 0, _says(up)
        assert "vm/provision.sh" in up.stdout and "provision.sh: done" in up.stdout
        t = time.monotonic()
        run = _run([str(checkout / "vm" / "vagrant-run"), "--quick", "--", "--only",
                    "a2_pie"], cwd=checkout, env=env, timeout=3600)
        times["run"] = time.monotonic() - t
        # a complete run: 0, or EXIT_DEGRADED when the emulator fell behind under TCG
        assert run.returncode in (0, EXIT_DEGRADED), _says(run)
        results = glob.glob(str(checkout / "results" / "a2_pie" / "**" / "result.json"),
                            recursive=True)
        assert results, "no results/a2_pie/.../result.json came back to the host"
        assert (checkout / "results" / "report.html").is_file()
        print("on the host:", *results, checkout / "results" / "report.html", sep="\n  ")
    finally:
        t = time.monotonic()
        destroy = _run(["vagrant", "destroy", "-f"], cwd=checkout, env=env)
        times["destroy"] = time.monotonic() - t
        doms, vols, nets = _listings()
        for vol in vols - before[1]:
            if vol.startswith(box_name):            # the box's copy in the pool
                _virsh("vol-delete", "--pool", POOL, vol)
        print("times (s):", {k: round(v) for k, v in times.items()})
    assert destroy.returncode == 0, _says(destroy)
    after = _listings()
    assert after[0] == before[0], f"domains left: {after[0] - before[0]}"
    assert after[1] <= before[1], f"volumes left: {after[1] - before[1]}"
    assert after[2] == before[2], f"networks left: {after[2] - before[2]}"
