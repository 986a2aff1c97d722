"""NetPerfMeter's output parsed: the summary and per-flow vector files, the scalar files
and the active side's status output (plain text, as the tool writes it into the run's
raw/ directory; the formats are described in :mod:`bufferbloat.traffic.netperfmeter`).
Each parser is checked against the tool's real output (tests/fixtures/tools/netperfmeter/).
"""

import re

from bufferbloat.core.series import SERIES_COLUMNS, CellRows, float_cell

#: npm.csv: per flow, node (active/passive) and interval of that node's summary vector.
COLUMNS = tuple(SERIES_COLUMNS["npm"])
#: npm_msg.csv: one row per message a flow's receiver got (times in run time, s).
MSG_COLUMNS = tuple(SERIES_COLUMNS["npm_msg"])
#: the tool's line when its measurement starts (after it connected every flow)
MEASUREMENT_STARTED = re.compile(r"^Starting measurement \.\.\..*okay", re.M)


def _fields(line):
    """Whitespace-separated fields of a vector line; quoted strings kept whole."""
    return [a if a else b for a, b in re.findall(r'"([^"]*)"|(\S+)', line)]


def parse_summary_vector(text):
    """A node's summary vector -> [{abs_time_us, rel_time_s, interval_s, flow_id,
    description, action, abs_bytes, abs_packets, abs_frames, rel_bytes, rel_packets,
    rel_frames}] (``flow_id`` -1 is the node's total; ``action`` Sent, Received or Lost).
    The first line is the header; each data line starts with its line number."""
    out = []
    for line in text.splitlines()[1:]:
        f = _fields(line)
        if len(f) < 14:
            continue
        out.append({"abs_time_us": int(f[1]), "rel_time_s": float(f[2]),
                    "interval_s": float(f[3]), "flow_id": int(f[4]), "description": f[5],
                    "action": f[7], "abs_bytes": int(f[8]), "abs_packets": int(f[9]),
                    "abs_frames": int(f[10]), "rel_bytes": int(f[11]),
                    "rel_packets": int(f[12]), "rel_frames": int(f[13])})
    return out


def parse_flow_vector(text):
    """A flow's vector (one line per received message) -> [{abs_time_us, rel_time_s,
    seq, abs_bytes, rel_bytes, delay_ms, delay_diff_ms, jitter_ms}]."""
    out = []
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 13:
            continue
        out.append({"abs_time_us": int(f[1]), "rel_time_s": float(f[2]), "seq": int(f[3]),
                    "abs_bytes": int(f[4]), "rel_bytes": int(f[7]),
                    "delay_ms": float(f[10]), "delay_diff_ms": float(f[11]),
                    "jitter_ms": float(f[12])})
    return out


def message_cells(text, flow, rmm, t0):
    """A flow's vector -> npm_msg.csv's rows (:class:`CellRows`: flow, seq, t_sent,
    t_recv, size_bytes, abs_bytes as their cells) in one pass: t_recv = the wall-clock
    receive stamp (us) / 1e6 - ``rmm`` - ``t0`` (run time, s), t_sent = t_recv - the
    message's one-way delay, both rounded to the microsecond. The same values, bit for
    bit, as :func:`parse_flow_vector`'s rows converted and formatted cell by cell
    (tests/unit/test_netperfmeter.py), at half the cost: 74,478 messages of a 60 s
    15 Mbit/s flow, 0.8 -> 0.4 s on the host, ~8 -> ~4 s under TCG."""
    out = CellRows()
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 13:
            continue
        t_recv = int(f[1]) / 1e6 - rmm - t0
        out.append((flow, str(int(f[3])), float_cell(round(t_recv - float(f[10]) / 1e3, 6)),
                    float_cell(round(t_recv, 6)), str(int(f[7])), str(int(f[4]))))
    return out


def message_rows(cells):
    """:func:`message_cells`' rows read back as dicts (seq and sizes int, times float)."""
    return [{"flow": c[0], "seq": int(c[1]), "t_sent": float(c[2]), "t_recv": float(c[3]),
             "size_bytes": int(c[4]), "abs_bytes": int(c[5])} for c in cells]


def parse_scalars(text):
    """A scalar file -> {object: {name: value}} (``scalar "OBJ" "NAME" VALUE`` lines;
    e.g. {"netPerfMeter.active.flow[1]": {"Transmitted Bytes": 123.0, ...}})."""
    out = {}
    for line in text.splitlines():
        m = re.match(r'\s*scalar\s+"([^"]*)"\s+"([^"]*)"\s+(\S+)', line)
        if m:
            out.setdefault(m[1], {})[m[2]] = float(m[3])
    return out


def flow_scalars(scalars, node):
    """{flow id: {name: value}} of one node's ``netPerfMeter.NODE.flow[ID]`` objects."""
    out = {}
    for obj, values in scalars.items():
        m = re.fullmatch(rf"netPerfMeter\.{node}\.flow\[(\d+)\]", obj)
        if m:
            out[int(m[1])] = values
    return out


def parse_connections(text):
    """{flow id: socket descriptor} from the active side's status output
    (``Flow #N: connecting TCP socket to ... okay <sd=FD>``)."""
    out = {}
    for m in re.finditer(r"Flow #(\d+): connecting .*?<sd=(\d+)>", text):
        out[int(m[1])] = int(m[2])
    return out


def vector_files(names, pattern_stem):
    """{(node, flow id): filename} of the per-flow vector files among ``names``
    (``STEM-NODE-XXXXXXXX-YYYY.vec``, flow id and stream id in hex)."""
    out = {}
    rx = re.compile(re.escape(pattern_stem) + r"-(active|passive)-([0-9a-f]{8})-([0-9a-f]{4})"
                    r"\.vec$")
    for name in names:
        m = rx.match(name)
        if m:
            out[(m[1], int(m[2], 16))] = name
    return out


def tool_error(stdout, stderr):
    """The first ``ERROR: ...`` line the tool printed, or None."""
    for line in (stderr + "\n" + stdout).splitlines():
        if line.strip().startswith("ERROR"):
            return line.strip()[:500]
    return None
