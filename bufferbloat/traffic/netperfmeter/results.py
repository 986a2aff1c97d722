"""What a NetPerfMeter measurement yields once it has ended: its rows (npm.csv,
npm_msg.csv), its summary and its raw outputs, read from the tool's files
(:mod:`.output`), as :class:`RunResults`, a part of
:class:`~bufferbloat.traffic.netperfmeter.run.NetPerfMeterRun`."""

import os
import re

from bufferbloat.core.series import CellRows
from bufferbloat.traffic.netperfmeter.output import (
    flow_scalars,
    message_cells,
    parse_scalars,
    parse_summary_vector,
    tool_error,
    vector_files,
)


class RunResults:
    """The results of a :class:`~bufferbloat.traffic.netperfmeter.run.NetPerfMeterRun`,
    read from its ``out_dir`` (the tool's files, named after ``stem`` and each active
    process's ``actives[k].stem``) and its state once :meth:`stop` has read the outputs
    (``stdout``, ``stderr``, ``passive_out``, the ``sockets`` mapped, the processes'
    launch and measurement times; run time from ``t0`` and ``rmm``)."""

    def _launched(self, g):
        """When process ``g`` launched (monotonic s), else the run's first launch."""
        return g.launched_mono if g.launched_mono is not None else self.launched_mono

    def _read(self, filename):
        try:
            with open(os.path.join(self.out_dir, filename)) as f:
                return f.read()
        except OSError:
            return ""

    def files(self):
        """The names of the tool's output files in ``out_dir`` (every process's)."""
        try:
            return sorted(n for n in os.listdir(self.out_dir) if n.startswith(self.stem))
        except OSError:
            return []

    def scalars(self, node):
        """{flow id: {name: value}} of ``node``'s (active/passive) scalar files."""
        out = {}
        for g in self.actives:
            mine = {f.flow_id for f in g.flows}
            out.update((k, v) for k, v in flow_scalars(parse_scalars(
                self._read(f"{g.stem}-{node}.sca")), node).items() if k in mine)
        return out

    def measurement_start_real(self, group=0):
        """Wall-clock time (s) of a process's measurement start (the first's, or
        ``group``'s): its first statistics event (its scalar file), else its launch."""
        g = self.actives[group]
        text = self._read(f"{g.stem}-active.sca")
        m = re.search(r'"netPerfMeter\.active\.total"\s+"First Statistics Event"\s+(\d+)',
                      text)
        if m and int(m[1]) > 0:
            return int(m[1]) / 1e6
        launched = self._launched(g)
        return None if launched is None else launched + self.rmm

    def _run_time_us(self, abs_us):
        return abs_us / 1e6 - self.rmm - self.t0

    def rows(self):
        """{"npm": interval rows, "npm_msg": message rows as their cells
        (:func:`~.output.message_cells`; :func:`~.output.message_rows` reads them as
        dicts)} (run time, s)."""
        intervals, msgs, names_now = [], CellRows(), self.files()
        for g in self.actives:         # each process's files, for its own flows
            names = {f.flow_id: f.name for f in g.flows}
            for node in ("active", "passive"):
                by_key = {}
                for r in parse_summary_vector(self._read(f"{g.stem}-{node}.vec")):
                    if r["flow_id"] not in names:
                        continue
                    key = (r["flow_id"], r["abs_time_us"])
                    row = by_key.setdefault(key, {
                        "flow": names[r["flow_id"]], "node": node,
                        "t_start": round(self._run_time_us(r["abs_time_us"])
                                         - r["interval_s"], 6),
                        "t_end": round(self._run_time_us(r["abs_time_us"]), 6),
                        "sent_bytes": None, "received_bytes": None, "lost_bytes": None})
                    col = {"Sent": "sent_bytes", "Received": "received_bytes",
                           "Lost": "lost_bytes"}.get(r["action"])
                    if col:
                        row[col] = r["rel_bytes"]
                intervals += by_key.values()
            for (node, flow_id), fname in sorted(vector_files(names_now, g.stem).items()):
                if flow_id not in names:
                    continue
                msgs += message_cells(self._read(fname), names[flow_id], self.rmm, self.t0)
        return {"npm": intervals, "npm_msg": msgs}

    def raw_outputs(self):
        """{filename: text}: the tool's files (vectors, scalars, the active side's status
        output; when ``out_dir`` is the run's raw/ they are there already: their text is
        None, and ``RunWriter.raw`` lists them in the record), the passive side's output,
        the active side's errors."""
        # the tool's files already in the run's raw/ are listed (None), not read and
        # written again over themselves (7 MB a minute at 15 Mbit/s)
        out = {fname: None if not self._own_dir else self._read(fname)
               for fname in self.files()}
        out[f"{self.stem}.passive.txt"] = self.passive_out
        for g in self.actives:
            if g.stderr.strip():
                out[f"{g.stem}.stderr.txt"] = g.stderr
        return out

    def summary(self):
        """One entry per flow (``flows``): name, ids, sockets, the launch of its process
        plus its first "on" (``t_launch``) and its first transmission (``t_start``), run
        time; bytes sent and received by the application, goodput over its reception
        span; and the tool's error. ``processes``: each active process's flows, launch
        and measurement start (run time, s)."""
        starts = [self.measurement_start_real(k) for k in range(len(self.actives))]
        sent = self.scalars("active")
        recv = self.scalars("passive")
        flows = []
        # the processes hold consecutive slices of self.flows: the flows in their order
        for g, start_real in zip(self.actives, starts):
            launched = self._launched(g)
            for f in g.flows:
                tx, rx = (sent, recv) if f.direction == "up" else (recv, sent)
                s, r = tx.get(f.flow_id, {}), rx.get(f.flow_id, {})
                first_tx = s.get("First Transmission") or 0
                entry = {"flow": f.name, "flow_id": f.flow_id, "direction": f.direction,
                         "sender": self.src if f.direction == "up" else self.dst,
                         "cca_requested": f.cca, "rate_mbit": f.rate_mbit,
                         # saturated and, once on, never off (a staggered start is one
                         # "on" instant): means to send all the time
                         "greedy": f.rate_mbit is None and (f.onoff is None
                                                            or len(f.onoff) == 1),
                         "sport": (self.sockets.get(f.flow_id) or (None,))[0],
                         "bytes_sent": s.get("Transmitted Bytes"),
                         "bytes_received": r.get("Received Bytes"),
                         "goodput_mbit": (r.get("Received Bit Rate") or 0) / 1e6 or None,
                         "t_start": round(first_tx / 1e6 - self.rmm - self.t0, 6)
                         if first_tx else None}
                # launched: the active side's process start plus the flow's first "on" (as
                # iperf3's client launch); its first transmission (t_start) follows once the
                # tool has connected its flows (a handshake through the path's queue) and
                # exchanged their configuration over the control connection (the control
                # path: prepare) (recorded, as iperf3's handshake is)
                entry["t_launch"] = (None if launched is None else
                                     round(launched - self.t0 + f.start_s, 6))
                if start_real is not None:
                    entry["first_on_s"] = round(start_real - self.rmm - self.t0 + self.lead_s
                                                + f.start_s, 6)
                flows.append(entry)
        codes = [None if g.proc is None else g.proc.poll() for g in self.actives]
        processes = [
            {"stem": g.stem, "flows": len(g.flows),
             "launched_s": None if g.launched_mono is None else
             round(g.launched_mono - self.t0, 6),
             "measurement_seen_s": None if g.seen_mono is None else
             round(g.seen_mono - self.t0, 6),
             "measurement_start_s": None if start is None else
             round(start - self.rmm - self.t0, 6),
             "returncode": code}
            for g, start, code in zip(self.actives, starts, codes)]
        return {"flows": flows, "port": self.port, "control_path": self.control,
                "runtime_s": self.runtime_s,
                "preconnect_lead_s": self.lead_s,
                "measurement_seen_s": (None if self.measurement_seen_mono is None else
                                       round(self.measurement_seen_mono - self.t0, 6)),
                "processes": processes,
                # the first non-zero code of the processes, else 0 once all ended, else
                # None (one still running, or not started)
                "returncode": next((c for c in codes if c), None if None in codes else 0),
                "error": tool_error(self.stdout, self.stderr)}
