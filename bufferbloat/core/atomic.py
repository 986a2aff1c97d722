"""Files written whole: a reader sees the old content or the new one, never half of one
(standard library only: the sampler process and the VM's host side use it too).

:func:`write_text_atomic` serializes nothing itself: the text is written to a temporary
file in the same directory, fsynced, renamed over the path (``os.replace`` is atomic on
POSIX), and the rename made durable (the directory fsynced). :func:`write_json_atomic`
serializes first, so that a serialization error leaves the old file as it was.
A write that fails (a full disk, a read-only folder, a directory in the way) removes its
temporary file and raises an OSError naming ``path`` itself (``err.filename``).
"""

import json
import os
import tempfile


def write_text_atomic(path, text, mode=0o644):
    """Write ``text`` (str or bytes) to ``path`` atomically; the file gets ``mode``
    (results are for everyone to read: mkstemp would make it 0600)."""
    path = os.fspath(path)
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                                   dir=directory)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, path) from None
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):    # the path the caller asked for, not the temporary
            raise OSError(exc.errno, exc.strerror, path) from None
        raise
    try:  # make the rename itself durable
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def write_json_atomic(path, data, allow_nan=False):
    """Write ``data`` as indented JSON (one trailing newline; objects JSON does not know
    as their ``str``) to ``path`` atomically. NaN/inf raise ValueError unless
    ``allow_nan`` (then written as JSON's non-standard NaN/Infinity)."""
    text = json.dumps(data, indent=1, default=str, allow_nan=allow_nan)
    write_text_atomic(path, text + "\n")
