"""iperf3's JSON (``iperf3 -J``, 3.12) read: the streams' labels by their client ports,
and iperf.csv's rows per stream and interval. Checked against the tool's real output
(tests/fixtures/tools/)."""


def iperf3_stream_labels(doc, name):
    """{client TCP source port: label} from a client's iperf3 JSON: ``name`` for a single
    stream, ``name-1..N`` in connection order for several."""
    conns = ((doc or {}).get("start") or {}).get("connected") or []
    if len(conns) == 1:
        return {conns[0]["local_port"]: name}
    return {c["local_port"]: f"{name}-{i}" for i, c in enumerate(conns, 1)}


def iperf3_rows(doc, name, labels, offset_s, port_key="local_port"):
    """iperf.csv rows from one side's iperf3 JSON ``doc``.

    labels: {client port: label} (:func:`iperf3_stream_labels`); port_key: the key of
    ``start.connected`` entries holding the client's port ('local_port' in the client's
    JSON, 'remote_port' in the server's); offset_s: run time of iperf3's time 0. One row
    per stream and interval; with several streams also a row labelled ``name`` per interval
    (their sum; cwnd and RTT empty). Omitted (``-O``) intervals are left out.
    """
    sock_label = {c["socket"]: labels.get(c[port_key])
                  for c in (doc.get("start") or {}).get("connected") or []}
    single = len(sock_label) == 1
    rows = []

    def row(label, rec):
        return {"flow": label, "t_start": round(offset_s + rec["start"], 6),
                "t_end": round(offset_s + rec["end"], 6), "bytes": rec["bytes"],
                "bits_per_second": rec["bits_per_second"],
                "retransmits": rec.get("retransmits", ""),
                "snd_cwnd_bytes": rec.get("snd_cwnd", ""), "rtt_us": rec.get("rtt", "")}

    for iv in doc.get("intervals") or []:
        if iv.get("sum", {}).get("omitted"):
            continue
        for st in iv.get("streams", []):
            label = sock_label.get(st["socket"]) or f"{name}-socket{st['socket']}"
            rows.append(row(label, st))
        if not single and "sum" in iv:
            rows.append(row(name, iv["sum"]))
    return rows
