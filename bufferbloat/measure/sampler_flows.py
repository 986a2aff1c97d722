"""The TCP flows the sampler process reads, per sender namespace (:class:`FlowGroup`):
which sockets are flows of interest, which are control connections (the rule in
:mod:`bufferbloat.measure.sampler`'s docstring), and the label of each one's rows."""

import math
import socket

from bufferbloat.measure.sampler_rows import tcp_row
from bufferbloat.netlink import nlstats


class FlowGroup:
    """The flows of one sender namespace: one sock_diag socket, one read per tick, and the
    control-connection rule (:mod:`bufferbloat.measure.sampler`'s docstring)."""

    def __init__(self, specs, filter, min_bytes_acked, hold_s, discover_s):
        self.host = specs[0]["host"]
        self.dports = {p for f in specs for p in f["dports"]}
        self.sports = {p for f in specs for p in f["sports"]}
        self.labels = {}
        # the label of a spec, by the port it matched sockets with
        self.by_dport, self.by_sport = {}, {}
        for f in specs:
            self.labels.update(f["labels"])
            if f.get("label"):
                self.by_dport.update(dict.fromkeys(f["dports"], f["label"]))
                self.by_sport.update(dict.fromkeys(f["sports"], f["label"]))
        # a server's sockets (flows given by source port: iperf3 -R's senders) belong to
        # its listener's family: iperf3 listens on a dual-stack IPv6 socket, so they are
        # AF_INET6 (an IPv4-mapped peer) and an IPv4-only dump never sees them
        families = (socket.AF_INET, socket.AF_INET6) if self.sports else (socket.AF_INET,)
        self.reader = nlstats.TcpReader(specs[0]["pid"], self.dports, self.sports, filter,
                                        families=families, discover_s=discover_s)
        self.min_bytes, self.hold_s = min_bytes_acked, hold_s
        # ports whose every socket is a data flow (no control connection shares them):
        # written from their first sample, however little they carried yet
        self.all_data = {("d", p) for f in specs if f.get("no_control") for p in f["dports"]}
        self.all_data |= {("s", p) for f in specs if f.get("no_control") for p in f["sports"]}
        self.data = set()      # cookies of sockets that are flows of interest
        self.ignored = set()   # cookies taken for control connections
        self.pending = {}      # cookie -> (first t, [rows]) of undecided sockets

    def sample(self, t, now, out):
        for s in self.reader.read(now):
            if s["info"] is None:
                continue
            c = s["cookie"]
            row = tcp_row(t, self.label(s["sport"], s["dport"]), self.host, s)
            if c in self.data:
                out.append(row)
            elif (s["info"]["bytes_acked"] is None  # kernel < 4.1 can't tell: keep it
                  or s["info"]["bytes_acked"] >= self.min_bytes
                  or self.stream_port(s["sport"])
                  or ("d", s["dport"]) in self.all_data or ("s", s["sport"]) in self.all_data):
                self.data.add(c)
                self.ignored.discard(c)
                held = self.pending.pop(c, None)
                if held:
                    out.extend(held[1])
                out.append(row)
            elif c not in self.ignored:
                held = self.pending.setdefault(c, (t, []))
                held[1].append(row)
        for c in [c for c, (t1, _) in self.pending.items() if t - t1 > self.hold_s]:
            self.ignored.add(c)
            del self.pending[c]

    def stream_port(self, sport):
        """Whether ``sport`` is a stream's own client port (iperf3 ``--cport``): its
        socket is a data flow, however little it carries (one of 10 behind PIE at
        1.5 Mbit/s once acked under 64 KiB in 30 s, and was left out of tcp.csv and the
        fairness). Not a listening port given in ``sports``: a server's control
        connection has that source port too."""
        return sport not in self.sports and str(sport) in self.labels

    def label(self, sport, dport):
        """The label of a socket's rows (see
        :class:`~bufferbloat.measure.sampler.Sampler`)."""
        return (self.labels.get(str(sport)) or self.by_sport.get(sport)
                or self.by_dport.get(dport) or f"{self.host}:{sport}")

    def horizon(self):
        """Rows at or after this time may still be joined by held rows."""
        return min((t1 for t1, _ in self.pending.values()), default=math.inf)
