"""How a command ends when something goes wrong: one line on stderr, never a traceback
(unless BUFFERBLOAT_DEBUG=1), and the exit code that says what kind of failure it was
(:func:`exit_code`); and the program's output streams, which drop what goes to a closed
pipe (:class:`DropClosedPipe`)."""

import errno
import os
import sys

from bufferbloat.core.errors import EXIT_USAGE, UsageError
from bufferbloat.core.signals import interrupt_rc, interrupt_within, silence_closed_stream


def exit_code(cmd, call):
    """Run ``call()``, the command ``cmd``, and return its exit code; an error it raises
    is printed as one line and gives 2 (a usage error, a Python module this command
    needs and lacks), 1 (an OSError, anything else) or the code of the interrupting
    signal."""
    try:
        rc = call()
    except UsageError as err:
        print(f"bufferbloat: error: {err}", file=sys.stderr)
        rc = EXIT_USAGE
    except ModuleNotFoundError as err:
        # a library this command needs that this Python lacks (numpy, matplotlib, mininet)
        print(f"bufferbloat: error: {missing_module_text(cmd, err.name)}",
              file=sys.stderr)
        rc = EXIT_USAGE
    except KeyboardInterrupt as exc:
        print("bufferbloat: interrupted", file=sys.stderr)
        rc = interrupt_rc(exc)
    except OSError as err:    # a full disk, a read-only folder, a directory in the way
        print(f"bufferbloat: error: {os_error_text(err)}", file=sys.stderr)
        rc = 1
    except Exception as err:  # noqa: BLE001 - one line, not a traceback (BUFFERBLOAT_DEBUG=1)
        interrupt = interrupt_within(err)
        if interrupt is not None:  # an interrupt Python wrapped in its own error
            print("bufferbloat: interrupted", file=sys.stderr)
            return interrupt_rc(interrupt)
        if os.environ.get("BUFFERBLOAT_DEBUG") == "1":
            raise
        print(f"bufferbloat: error: {cmd} failed: {type(err).__name__}: {err} "
              f"({_where(err)}; BUFFERBLOAT_DEBUG=1 shows the traceback)", file=sys.stderr)
        rc = 1
    return rc


def missing_module_text(cmd, name):
    """What to do when ``cmd`` cannot import the module ``name``: a part of this project
    means a broken install (never an apt package); another library, how to get it."""
    from bufferbloat.core.paths import PACKAGE_DIR, SOURCE_ROOT
    if name and (name == "bufferbloat" or name.startswith("bufferbloat.")):
        where = (f"the checkout {SOURCE_ROOT} is incomplete (git status; git checkout .)"
                 if SOURCE_ROOT else
                 f"the installed package ({PACKAGE_DIR}) is broken: reinstall it "
                 "(pip install --force-reinstall bufferbloat, or pip install . from "
                 "its checkout)")
        return f"{cmd} cannot import {name}, a module of bufferbloat itself: {where}"
    from bufferbloat.net.capabilities import python_hint
    return f"{cmd} needs the Python module {name}, {python_hint(name)}"


def os_error_text(err):
    """One line for an OSError: ``disk full: PATH`` for ENOSPC (and a quota), else
    ``PATH: what the system says``."""
    where = err.filename if err.filename is not None else "?"
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"disk full: {where}"
    text = f"{where}: {err.strerror or err}"
    return text + (f" -> {err.filename2}" if err.filename2 else "")


def _where(err):
    """``file.py:LINE`` of the innermost frame of ``err``'s traceback."""
    import traceback
    frames = traceback.extract_tb(err.__traceback__)
    if not frames:
        return "?"
    return f"{os.path.relpath(frames[-1].filename)}:{frames[-1].lineno}"


class DropClosedPipe:
    """``sys.stdout``/``sys.stderr`` for the program: output to a closed pipe (``| head``,
    a reader gone) is dropped, not fatal. On the first BrokenPipeError the stream's file
    descriptor is pointed at /dev/null (the Python docs' recipe, so that the flush at
    exit cannot fail either) and the command goes on."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            silence_closed_stream(self._stream)
            return len(text)

    def flush(self):
        try:
            self._stream.flush()
        except BrokenPipeError:
            silence_closed_stream(self._stream)

    def __getattr__(self, name):
        return getattr(self._stream, name)
