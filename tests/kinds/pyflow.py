"""A traffic kind defined outside the engine: ``pyflow``, one TCP bulk transfer made by
two Python one-liners (a server on ``dst`` that counts what it receives, a client on
``src`` that sends for the part's length and prints its source port and byte count).

Registering it is importing this module; the engine then builds, prepares, starts,
watches, waits for, stops and collects it through the TrafficPart interface alone:
its rows become ``series/pyflow.csv``, its outputs ``raw/NAME.*.txt``, its summary an
entry of ``traffic_results`` (with ``t_start``/``t_launch``/``scheduled_s``, read by the
health verdict), its socket is sampled into tcp.csv and labelled with its name.
"""

import subprocess
import sys
import tempfile
import time

from bufferbloat.core.params import Param
from bufferbloat.core.signals import stop_process
from bufferbloat.traffic.base import (
    Timed,
    TrafficPart,
    exit_problem,
    register,
    wait_listening,
)

SERVER = ("import socket,sys\n"
          "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
          "s.bind(('0.0.0.0', int(sys.argv[1]))); s.listen(1); c, _ = s.accept(); n = 0\n"
          "while True:\n"
          "    b = c.recv(65536)\n"
          "    if not b: break\n"
          "    n += len(b)\n"
          "print('RECEIVED', n, flush=True)\n")
CLIENT = ("import socket,sys,time\n"
          "c=socket.create_connection((sys.argv[1], int(sys.argv[2])))\n"
          "print('SPORT', c.getsockname()[1], flush=True)\n"
          "end = time.monotonic() + float(sys.argv[3]); n = 0; buf = b'x' * 65536\n"
          "while time.monotonic() < end:\n"
          "    n += c.send(buf)\n"
          "c.close(); print('SENT', n, flush=True)\n")


def _value(text, key):
    for line in text.splitlines():
        if line.startswith(key + " "):
            return int(line.split()[1])
    return None


class PyFlow(Timed):
    """The tool: server and client processes of one transfer."""

    def __init__(self, net, src, dst, port, duration_s, *, name, t0, realtime_minus_monotonic):
        self.net, self.src, self.dst, self.port = net, src, dst, port
        self.duration_s, self.name = duration_s, name
        self._init_clock(t0, realtime_minus_monotonic)
        self.server = self.client = None
        self.launched_mono = None
        self.out = {"server": "", "client": ""}

    def prepare(self):
        self._sout = tempfile.TemporaryFile(mode="w+")
        self.server = self.net.popen(self.dst, [sys.executable, "-c", SERVER, self.port],
                                     stdout=self._sout, stderr=subprocess.STDOUT)
        wait_listening(self.net, self.dst, self.port)

    def start(self):
        self._cout = tempfile.TemporaryFile(mode="w+")
        self.launched_mono = time.monotonic()
        self.client = self.net.popen(self.src, [sys.executable, "-c", CLIENT,
                                                self.net.ip(self.dst), self.port,
                                                self.duration_s],
                                     stdout=self._cout, stderr=subprocess.STDOUT)
        return self

    def wait(self, timeout_s=None):
        if self.client is not None:
            self.client.wait(timeout=timeout_s)
        self.stop()

    def stop(self):
        for role, proc, f in (("client", self.client, getattr(self, "_cout", None)),
                              ("server", self.server, getattr(self, "_sout", None))):
            if proc is None or f is None or f.closed:
                continue
            if role == "server":
                try:
                    proc.wait(timeout=3)     # it ends once the client closed
                except subprocess.TimeoutExpired:
                    pass
            stop_process(proc)
            f.seek(0)
            self.out[role] = f.read()
            f.close()

    def raw_outputs(self):
        return {f"{self.name}.{role}.txt": text for role, text in self.out.items()}

    def summary(self):
        t = None if self.launched_mono is None else self.launched_mono - self.t0
        return {"flow": self.name, "src": self.src, "dst": self.dst, "port": self.port,
                "t_start": t, "t_launch": t,
                "sport": _value(self.out["client"], "SPORT"),
                "bytes_sent": _value(self.out["client"], "SENT"),
                "bytes_received": _value(self.out["server"], "RECEIVED")}


@register("pyflow")
class PyFlowPart(TrafficPart):
    """One Python TCP transfer ``src`` -> ``dst`` from the part's start to its stop."""

    params = (Param("src", str, None, "the sending host"),
              Param("dst", str, None, "the receiving host"))

    def tools(self):
        self.flow = PyFlow(self.ctx.net, self.spec["src"], self.spec["dst"],
                           self.ctx.ports("tcp"), self.stop_s - self.start_s,
                           name=self.name, **self.ctx.clock)
        return [(self.flow, self.start_s, None)]

    def prepare(self):
        self.flow.prepare()

    def tool_problem(self, tool):
        running = tool.client is not None and tool.client.poll() is None
        return (exit_problem(f"pyflow server of {tool.name}", tool.server,
                             expect_running=running)
                or exit_problem(f"pyflow client of {tool.name}", tool.client))

    def rows(self):
        s = self.flow.summary()
        if s["bytes_sent"] is None:
            return {}
        return {"pyflow": [{"flow": self.name, "t_launch": round(s["t_launch"], 6),
                            "bytes_sent": s["bytes_sent"],
                            "bytes_received": s["bytes_received"]}]}

    def sampled_flows(self):
        return [{"host": self.flow.src, "dports": [self.flow.port], "label": self.name}]
