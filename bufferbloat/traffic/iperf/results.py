"""What an iperf3 flow yields once it has ended, read from its JSON (:mod:`.output`) and
its own clock: :class:`Iperf3Results`, a part of
:class:`~bufferbloat.traffic.iperf.flow.Iperf3Flow`."""

from bufferbloat.traffic.iperf.output import iperf3_rows, iperf3_stream_labels


class Iperf3Results:
    """The results of an :class:`~bufferbloat.traffic.iperf.flow.Iperf3Flow`: goodput,
    labels, rows, raw outputs and summary, from the client's and the server's JSON
    (``result``, ``server_result``, ``client_raw``, ``server_raw``, read once the flow
    has ended) and the moments the flow noted (``launched_real``, ``established_mono``,
    ``exit_mono``, ``killed_mono``; run time from ``t0`` and ``rmm``)."""

    @property
    def goodput_mbit(self):
        """Receiver-side goodput over the flow (after ``omit_s``), Mbit/s."""
        return self.result["end"]["sum_received"]["bits_per_second"] / 1e6

    def flow_labels(self):
        """{(client host, client TCP source port): label} of every stream; with
        direction 'down' the sending socket is the server's, whose *destination* port is
        that client port."""
        return {(self.src, port): label
                for port, label in iperf3_stream_labels(self.result, self.name).items()}

    def sender_doc(self):
        """The JSON of the sending side: the client's ('up') or the server's ('down'),
        whose intervals carry cwnd, RTT and retransmits; None if unavailable."""
        if self.direction == "down" and self.server_result and \
                self.server_result.get("intervals"):
            return self.server_result
        return self.result

    def time_zero_mono(self):
        """Monotonic time of iperf3's interval time 0 (see the class docstring).

        A client ended by :meth:`stop` closes its last interval when the signal arrives:
        time zero = that moment - the last interval's end (exact to milliseconds).
        Otherwise the latest of: the JSON's whole-second start stamp, the client's
        launch, the moment all its connections were established (iperf3 starts its
        clock one round trip later: on an idle path microseconds, behind a full queue
        up to that queue's delay); never later than its exit - the last interval's end.
        """
        res = self.result or {}
        ts = (res.get("start", {}).get("timestamp") or {}).get("timesecs")
        lo = max(float(ts or 0), self.launched_real or 0) - self.rmm
        if self.established_mono is not None:
            lo = max(lo, self.established_mono)
        ends = [iv["sum"]["end"] for iv in res.get("intervals") or [] if "sum" in iv]
        if not ends:
            return lo
        if self.killed_mono is not None and (self.exit_mono is None
                                             or self.killed_mono <= self.exit_mono):
            return self.killed_mono - ends[-1]
        if self.exit_mono is not None:
            return min(lo, self.exit_mono - ends[-1])
        return lo

    def rows(self):
        """iperf.csv rows of the sending side (bytes sent per interval)."""
        doc = self.sender_doc()
        if not doc or self.launched_real is None:
            return []
        labels = iperf3_stream_labels(self.result, self.name)
        by_port = None
        if doc is not self.result:  # server JSON: its remote_port is the client's port
            by_port = "remote_port"
        return iperf3_rows(doc, self.name, labels, self.time_zero_mono() - self.t0,
                           port_key=by_port or "local_port")

    def raw_outputs(self):
        """{NAME.client.json, NAME.server.json}: iperf3's outputs as printed."""
        return {f"{self.name}.client.json": self.client_raw,
                f"{self.name}.server.json": self.server_raw}

    def summary(self):
        """Headline numbers: bytes sent and received, goodput (None if the receiver's
        total is missing, e.g. after :meth:`stop`), retransmits, CCAs used, ``error`` (a
        flow ended by :meth:`stop` reads 'interrupt - the client has terminated'),
        ``stopped``."""
        end = (self.result or {}).get("end", {})
        sent, recv = end.get("sum_sent", {}), end.get("sum_received", {})
        sender_end = (self.sender_doc() or {}).get("end") or {}  # the server's for 'down'
        t_zero = self.time_zero_mono() - self.t0 if self.launched_real else None
        return {"flow": self.name, "src": self.src, "dst": self.dst,
                "direction": self.direction, "sender": self.src if self.direction == "up"
                else self.dst, "port": self.port, "parallel": self.parallel,
                "cca_requested": self.cca, "sender_cca": (sender_end.get("sender_tcp_congestion")
                                                          or end.get("sender_tcp_congestion")),
                "receiver_cca": end.get("receiver_tcp_congestion"),
                "t_start": t_zero, "duration_s": self.duration_s,
                # when the client was launched (s since t0): iperf3's time zero comes a
                # few round trips later (its control exchange), behind a full queue
                # seconds later, which is physics, not lateness
                "t_launch": (self.run_time(self.launched_real)
                             if self.launched_real is not None else None),
                "bytes_sent": sent.get("bytes"), "bytes_received": recv.get("bytes"),
                # a client stopped early gets no receiver totals from the server
                "goodput_mbit": recv["bits_per_second"] / 1e6 if recv.get("bytes") else None,
                "retransmits": sent.get("retransmits"), "error": self.error,
                "stopped": self._stopped, "udp": self.udp,
                # a TCP flow without a rate cap means to send all the time (health's
                # sender check judges whether it did)
                "greedy": not self.udp and not self.rate_mbit,
                "udp_lost_pct": recv.get("lost_percent") if self.udp else None,
                "udp_jitter_ms": recv.get("jitter_ms") if self.udp else None,
                "streams": sorted(iperf3_stream_labels(self.result, self.name).values())}
