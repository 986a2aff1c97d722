#!/bin/bash
# Provision the project VM: the one script used by both
#   - the Vagrantfile (shell provisioner, as root in a Debian bookworm box), and
#   - vm/build (bufferbloat/vm/image.py: run as root inside the debootstrap chroot).
# Installs every package listed in packages.txt (found next to this script), enables
# Open vSwitch, loads the kernel modules the experiments use at boot and writes the
# sysctls they need. Idempotent: running it again changes nothing.
# It never writes an apt mirror anywhere: it uses the sources apt already has.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
packages_file=${BB_PACKAGES_FILE:-$here/packages.txt}
if [ ! -f "$packages_file" ] && [ -f /bb/vm/packages.txt ]; then
    packages_file=/bb/vm/packages.txt
fi
if [ ! -f "$packages_file" ]; then
    echo "provision.sh: packages.txt not found next to $0 (set BB_PACKAGES_FILE)" >&2
    exit 2
fi
if [ "$(id -u)" != 0 ]; then
    echo "provision.sh: must run as root" >&2
    exit 2
fi

# In a chroot (vm/build sets BB_IN_CHROOT=1; otherwise compare / with PID 1's root)
# no service may be started: a policy-rc.d forbids it while apt runs.
in_chroot=${BB_IN_CHROOT:-0}

if [ "$in_chroot" != 1 ] && [ -d /proc/1 ] &&
   [ "$(stat -c %d:%i /)" != "$(stat -L -c %d:%i /proc/1/root 2>/dev/null || stat -c %d:%i /)" ]; then
    in_chroot=1
fi
policy=/usr/sbin/policy-rc.d
cleanup() { if [ "$in_chroot" = 1 ] && [ -f "$policy.bb" ]; then rm -f "$policy" "$policy.bb"; fi; }
if [ "$in_chroot" = 1 ] && [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# written by provision.sh while building the image\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    touch "$policy.bb"
fi
trap cleanup EXIT

mapfile -t packages < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$packages_file" | grep -v '^$')
echo "provision.sh: ${#packages[@]} packages from $packages_file"

# Only what is missing is installed: on the project's own Vagrant box (vm/box), which is
# this image already provisioned and has no apt sources, nothing is, and apt is not run.
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "provision.sh: installing ${#missing[@]} missing package(s)"
    export DEBIAN_FRONTEND=noninteractive
    apt_opts=(-y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold
              -o Dpkg::Use-Pty=0 --no-install-recommends)
    apt-get -q update
    apt-get "${apt_opts[@]}" install "${missing[@]}"
else
    echo "provision.sh: every package is installed already"
fi

# Open vSwitch: Mininet's OVSBridge needs ovsdb-server + ovs-vswitchd up at boot.
systemctl enable openvswitch-switch.service

# Kernel modules the experiments use, loaded at boot so that they are listed in
# /proc/sys/net/ipv4/tcp_available_congestion_control and `tc` finds every qdisc.
write_if_changed() {  # path content
    if [ ! -f "$1" ] || [ "$(cat "$1")" != "$2" ]; then
        printf '%s\n' "$2" >"$1"
    fi
}
write_if_changed /etc/modules-load.d/bufferbloat.conf "# written by vm/provision.sh
sch_htb
sch_tbf
sch_netem
sch_pie
sch_red
sch_codel
sch_fq_codel
sch_fq
tcp_bbr
tcp_vegas
openvswitch"

# Sysctls (root namespace; Mininet hosts get their own netns defaults, which the
# engine sets itself, like tcp_allowed_congestion_control).
write_if_changed /etc/sysctl.d/60-bufferbloat.conf "# written by vm/provision.sh
# every TCP flow starts from the same state: no ssthresh/RTT cached from earlier flows
net.ipv4.tcp_no_metrics_save = 1
# a kernel panic reboots (the project VM runs with -no-reboot, so qemu exits)
kernel.panic = 5"

# The project's PI qdisc (vm/guest/sch_pi): built against the headers of every kernel
# installed here (the image has one; `linux-headers-amd64` matches `linux-image-amd64`),
# installed under /lib/modules/VER/extra and indexed by depmod, so that the kernel
# autoloads sch_pi when a qdisc of kind "pi" is asked for.
pi_src=
for d in "$here/sch_pi" "$here/guest/sch_pi" /bb/vm/guest/sch_pi; do
    if [ -f "$d/sch_pi.c" ]; then pi_src=$d; break; fi
done
if [ -z "$pi_src" ]; then
    echo "provision.sh: the PI qdisc source (vm/guest/sch_pi) is missing" >&2
    exit 2
fi
"$pi_src/install.sh"

# Marks the project VM (either build path): results record that they came from it.
write_if_changed /etc/bufferbloat-vm "project VM, provisioned by vm/provision.sh"

if [ "$in_chroot" != 1 ] && [ -d /run/systemd/system ]; then
    systemctl restart systemd-modules-load.service || true
    sysctl -q --system || true
    systemctl start openvswitch-switch.service
fi
echo "provision.sh: done"
