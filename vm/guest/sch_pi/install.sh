#!/bin/bash
# Build sch_pi against the headers of every kernel under $BB_MODULES_ROOT (default
# /lib/modules), install it as VER/extra/sch_pi.ko and run depmod, so that the kernel
# autoloads it for a qdisc of kind "pi". Called by vm/provision.sh (image build, Vagrant).
# Exit 3 with a message naming the missing piece when a kernel has no headers, the module
# does not compile, or it comes out for another kernel than the one it is installed for.
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=${BB_MODULES_ROOT:-/lib/modules}
built=0
for moddir in "$root"/*/; do
    moddir=${moddir%/}
    kver=$(basename "$moddir")
    [ -f "$moddir/modules.order" ] || continue      # leftovers of a removed kernel
    if [ ! -d "$moddir/build" ]; then
        echo "sch_pi: kernel $kver has no headers ($moddir/build is missing): install" \
             "linux-headers-$kver (linux-image-amd64 and linux-headers-amd64 must be the" \
             "same version) to build sch_pi for it" >&2
        exit 3
    fi
    # already built from these very sources for this kernel (a box provisioned again)
    stamp=$(cat "$src/sch_pi.c" "$src/Makefile" | sha256sum | cut -d' ' -f1)
    if [ -f "$moddir/extra/sch_pi.ko" ] && [ -f "$moddir/extra/sch_pi.sha256" ] &&
       [ "$(cat "$moddir/extra/sch_pi.sha256")" = "$stamp" ]; then
        echo "sch_pi: up to date for kernel $kver"
        built=$((built + 1))
        continue
    fi
    work=$(mktemp -d)
    cp "$src/sch_pi.c" "$src/Makefile" "$work/"
    if ! make -s -C "$moddir/build" M="$work" modules >"$work/build.log" 2>&1; then
        cat "$work/build.log" >&2
        echo "sch_pi: does not build against the headers of kernel $kver" >&2
        rm -rf "$work"
        exit 3
    fi
    magic=$(modinfo -F vermagic "$work/sch_pi.ko" | cut -d' ' -f1)
    if [ "$magic" != "$kver" ]; then
        echo "sch_pi: built for kernel $magic, not $kver: its headers and the kernel" \
             "do not match" >&2
        rm -rf "$work"
        exit 3
    fi
    install -D -m 0644 "$work/sch_pi.ko" "$moddir/extra/sch_pi.ko"
    echo "$stamp" >"$moddir/extra/sch_pi.sha256"
    if [ "$root" = /lib/modules ]; then depmod -a "$kver"
    else depmod -b "${root%/lib/modules}" -a "$kver"; fi
    rm -rf "$work"
    echo "sch_pi: built and installed for kernel $kver"
    built=$((built + 1))
done
if [ "$built" = 0 ]; then
    echo "sch_pi: no kernel under $root to build it for (install linux-image-amd64)" >&2
    exit 3
fi
