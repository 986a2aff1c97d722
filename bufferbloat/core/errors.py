"""Errors the suite raises on purpose, each mapped to an exit code by the CLI.

A ``UsageError`` (bad parameter, unknown qdisc, missing kernel feature or tool) is always
raised *before* any network state is created, and the command line turns it into exit
code 2 with the message alone (no traceback): the message names the bad value and what is
allowed, or the missing piece and the way out.
"""

import sys

EXIT_USAGE = 2
#: Every run completed, but at least one is degraded: the emulator fell behind
#: (bufferbloat/results/health.py); its numbers are kept, marked, and not averaged in.
EXIT_DEGRADED = 5
#: a run in the project VM whose guest gave no exit status (it crashed)
EXIT_NO_RESULT = 3
#: the project VM did not boot (every boot attempt hung)
EXIT_BOOT_FAILED = 4
#: the project VM's kernel locked up while the command ran (a soft lockup the guest
#: reported for longer than bufferbloat.vm.boot.LOCKUP_S): the VM was stopped
EXIT_LOCKUP = 6
#: a run in the project VM outlived its time limit (as timeout(1))
EXIT_TIMEOUT = 124
#: a command ended by SIGINT (Ctrl-C) and by SIGTERM: 128 + the signal
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
#: the exit codes of a command in the VM that recorded nothing to draw or summarise
EXIT_NOTHING_RECORDED = (EXIT_USAGE, EXIT_NO_RESULT, EXIT_BOOT_FAILED, EXIT_TIMEOUT,
                         EXIT_INTERRUPTED, EXIT_TERMINATED)


class UsageError(Exception):
    """A parameter, option or prerequisite the user can fix. Exit code 2."""

    exit_code = EXIT_USAGE


class ParameterError(UsageError):
    """A parameter value outside what is allowed.

    The message always names the parameter, the value given and what is allowed.
    """

    def __init__(self, name, value, allowed):
        self.name, self.value, self.allowed = name, value, allowed
        super().__init__(f"invalid value for {name}: {value!r} (allowed: {allowed})")


class CommandError(RuntimeError):
    """A tool we ran to build or measure the network failed."""


class MissingFeature(UsageError):
    """A kernel feature or tool this run needs is not on this machine."""

    def __init__(self, missing, hint=None):
        self.missing = list(missing)
        lines = ["this machine lacks what the run needs:"]
        lines += [f"  - {m}" for m in self.missing]
        lines.append(hint or VM_HINT)
        super().__init__("\n".join(lines))


VM_HINT = ("run it inside the project VM, which has every qdisc and module: the same "
           "command without --host (or with --vm) moves there by itself; "
           "`sudo ./run_all.sh --vm` runs the catalogue there")


#: every warning said in this process, in order (a report lists those of its own making)
WARNINGS = []
_SAID = set()


def warn(message):
    """Say a degradation (a record read in part, metrics recomputed, series or runs
    missing): one line on stderr, ``warning: `` first, once per process; kept in
    :data:`WARNINGS` each time it is said."""
    message = " ".join(str(message).split())
    WARNINGS.append(message)
    if message not in _SAID:
        _SAID.add(message)
        print(f"warning: {message}", file=sys.stderr, flush=True)


def warnings_since(mark):
    """The warnings said since ``len(WARNINGS)`` was ``mark``, each once, in order."""
    return list(dict.fromkeys(WARNINGS[mark:]))
