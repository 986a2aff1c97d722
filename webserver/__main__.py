"""``python3 -m bufferbloat.webserver --port P --size BYTES``: serve one page of exactly BYTES bytes.

Every GET (any path) answers 200 with ``size`` bytes of HTML generated in memory at start
(``Content-Length`` exact, no disk). HEAD answers the headers. Request logging is off.
Prints ``READY <host> <port> <size>`` on stdout (flushed) once the socket listens; ends on
SIGTERM/SIGINT. A ThreadingHTTPServer: concurrent fetches do not wait for each other.
"""

import argparse
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_SIZE = 1 << 30


def make_page(size):
    """An HTML-looking page of exactly ``size`` bytes (size >= 1)."""
    head = b"<!DOCTYPE html><html><body><pre>\n"
    tail = b"\n</pre></body></html>\n"
    if size < len(head) + len(tail):
        return (b"x" * size)
    fill = size - len(head) - len(tail)
    line = b"bufferbloat test page 0123456789 abcdefghijklmnopqrstuvwxyz\n"
    body = (line * (fill // len(line) + 1))[:fill]
    return head + body + tail


def make_handler(page):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "bufferbloat-webserver"

        def _headers(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()

        def do_GET(self):  # noqa: N802 (http.server's naming)
            self._headers()
            self.wfile.write(page)

        def do_HEAD(self):  # noqa: N802
            self._headers()

        def log_message(self, *_args):  # quiet
            pass

    return Handler


def _positive_int(lo, hi):
    def conv(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} outside {lo}..{hi}")
        return value
    return conv


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m bufferbloat.webserver", description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=_positive_int(1, 65535), default=8080)
    ap.add_argument("--size", type=_positive_int(1, MAX_SIZE), default=100_000,
                    help="bytes of index.html (exact)")
    ap.add_argument("--bind", default="0.0.0.0")
    args = ap.parse_args(argv)
    page = make_page(args.size)
    server = ThreadingHTTPServer((args.bind, args.port), make_handler(page))
    server.daemon_threads = True

    def _stop(_sig, _frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, _stop)
    print(f"READY {args.bind} {args.port} {len(page)}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
