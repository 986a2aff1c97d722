"""``python3 -m bufferbloat.vm build | run | probe | box`` (``vm/build``, ``vm/run``,
``vm/box``)."""

from __future__ import annotations

import argparse
import sys

from bufferbloat.core.errors import EXIT_INTERRUPTED
from bufferbloat.vm.box import build_box
from bufferbloat.vm.common import REPO_ROOT, VMError, quiet, stderr
from bufferbloat.vm.control import ENV_NAME
from bufferbloat.vm.image import build_image
from bufferbloat.vm.session import DEFAULT_TIMEOUT_S, probe_kvm, run


def _parse_env(items: list[str]) -> dict:
    env = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not ENV_NAME.match(name):
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
    r.add_argument("--share", default=str(REPO_ROOT or "."),
                   help="host directory seen as /bb in the guest (default: the checkout)")
    r.add_argument("-c", dest="script", metavar="SCRIPT",
                   help="a bash script to run instead of CMD ARGS")
    r.add_argument("-q", "--quiet", action="store_true", help="no vm: status lines")
    r.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS...")
    sub.add_parser("probe", help="can KVM boot the VM here? (else TCG)")
    x = sub.add_parser("box", help="the image as a Vagrant box for libvirt (prints its path)")
    x.add_argument("--force", action="store_true", help="rebuild even if up to date")
    args = parser.parse_args(argv)
    try:
        if args.action == "build":
            build_image(force=args.force, progress=print, verbose=args.verbose)
            return 0
        if args.action == "box":
            print(build_box(force=args.force, progress=stderr))
            return 0
        if args.action == "probe":
            ok = probe_kvm(progress=stderr)
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
                   accel=args.accel, progress=quiet if args.quiet else stderr)
    except VMError as e:
        print(f"vm: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("vm: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
