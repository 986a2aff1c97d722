#!/usr/bin/python3
"""Each acceptance band's measured spread and false-fail rate, from the records of every
run of the test command kept on this machine (docs/design/testing.md).

run_tests.sh writes one record per phase (tests/record.py) and keeps a copy in the
archive (env ``BUFFERBLOAT_TEST_ARCHIVE``, default /var/lib/bufferbloat/test-records):
the records of CI's clean clones and of every engineer's run accumulate there. A band
is what a test reports with ``tests.retries.observe(name, value, lo, hi)``; each healthy
attempt is one sample.

For each band (test, name), printed as a Markdown table (``--markdown``) or text:

* n, mean, standard deviation, min, max, the bounds;
* the margin: the distance from the mean to the nearer bound in standard deviations;
* ``p``, the chance that one attempt misses. From the samples' mean and sd, the
  normal model's *predictive* tail: the next value is mean + sd sqrt(1 + 1/n) t(n - 1)
  (Student's t, which carries the uncertainty of a mean and sd estimated from n
  samples), summed beyond both bounds; never below the misses' observed share;
* ``free``: what the samples show without the normal model, the misses' one-sided 95 %
  upper bound (Clopper-Pearson; with no miss in n, ``1 - 0.05 ** (1 / n)``, about
  3/n): ten clean samples alone show no better than 0.26, and only ~3,000 would show
  0.001; it is stated beside ``p``, not used to judge;
* the sequential rule's false-fail rate ``p (1 - (1 - p)^2)`` (tests/retries.py);
* calibrated: n >= 10 (the issue's rule) and that rate below 1 in 1,000. ``p`` is at
  least the misses' share, so a band with a miss among its samples is calibrated only
  when that share alone keeps the rule's rate below 1 in 1,000: one miss takes 45
  samples (p = 1/45: 9.8e-4), two take ~64; it reads "yes (1 missed)". (Until
  2026-11-30 any miss kept a band uncalibrated, whatever its n: a rule made for bands
  of ~10 samples, where one miss means p >= 0.1.)

Each sample is judged against the bound it was recorded with (a bound computed from its
own run varies), except that a side the newest record leaves open is no side of the
band (the test made it a contract, asserted apart: a FIFO's 100-packet ceiling), and a
bound changed in the code with its reason (``RESTATED``) judges every sample.

The samples are also kept with the code, in bench/band-samples.jsonl (an archive does
not outlive its machine: 2026-11-30's 46 records were lost with theirs): ``--keep``
adds each record not kept yet, trimmed to its bands' values (bench/calibrate_bands.sh
does after each phase); a record counts once whether kept, archived or both. Records
whose values were lost are kept as per-band summaries (n, mean, sd, min, max, bounds:
``--seed-markdown`` reads them from a table this script printed, to its 4 significant
digits), pooled exactly with the values; a band whose bound varied from run to run is
modelled gap by gap, which a summary cannot give, so it is not seeded. With no record
path given, the kept file is read with the archive (``--kept`` names another).

A band that its test's newest passing record does not state is retired (renamed or
removed in the code): it is neither shown nor wanting samples.

Entries that are not a test's (made up by the record's own unit tests before
``tests.record.kept_apart``, e.g. "obs") are skipped: a band belongs to a pytest node.

``--wanting host|vm`` prints instead the tests of that phase that still have a band with
fewer than ``--min-n`` samples, as one pytest ``-k`` expression (exit 3 when none does;
exit 4 when no sample of that phase is known at all: the caller runs the whole phase),
so that a calibration run repeats only them (bench/calibrate_bands.sh):

    ./run_tests.sh --acceptance --vm -- -k "$(bench/band_spreads.py --wanting vm)"

Usage: bench/band_spreads.py [RECORD_OR_DIR ...] [--min-n 10] [--kept FILE]
           [--markdown | --wanting PHASE | --keep | --seed-markdown TABLE --source TEXT]
"""
import argparse
import glob
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
from bufferbloat.core.uncertainty import t_cdf  # noqa: E402 - stdlib Student's t
from tests import record  # noqa: E402 - the records' format, the suite's rule
from tests.retries import CONFIRM, false_fail_rate, within  # noqa: E402,F401

ARCHIVE_ENV = "BUFFERBLOAT_TEST_ARCHIVE"
ARCHIVE_DEFAULT = "/var/lib/bufferbloat/test-records"
TARGET = 1e-3


def binom_upper(k, n, conf=0.95):
    """Clopper-Pearson upper bound of a rate seen k times in n (bisection on the
    binomial tail: the largest p with P(X <= k) >= 1 - conf)."""
    if n == 0:
        return 1.0
    if k >= n:
        return 1.0

    def cdf(p):
        return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k + 1))
    lo, hi = k / n, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if cdf(mid) > 1 - conf:
            lo = mid
        else:
            hi = mid
    return lo


def record_files(paths):
    """The record files named by ``paths`` (files or directories, default: the archive
    and this checkout's .scratch/test-records), each once by its file name."""
    if not paths:
        paths = [os.environ.get(ARCHIVE_ENV, ARCHIVE_DEFAULT),
                 os.path.join(ROOT, ".scratch", "test-records")]
    seen = {}
    for p in paths:
        files = sorted(glob.glob(os.path.join(p, "*.json"))) if os.path.isdir(p) else [p]
        for f in files:
            seen.setdefault(os.path.basename(f), f)
    return [seen[k] for k in sorted(seen)]


def records_by_name(files, kept=()):
    """{record name: record}: the kept records (:func:`read_kept`) and the record files,
    each once by its name (a file replaces the kept line of the same name)."""
    datas = {line["record"]: line for line in kept if "record" in line}
    for f in files:
        data = record.read(f)
        if data is not None:
            datas[os.path.basename(f)] = data
    return datas


def samples(files, kept=()):
    """{(test, band name): {"values": [...], "lo", "hi", "unit", "records", "phases"}}:
    ``phases``, the record phases (host, vm) that ran the test. ``kept``: the lines of
    the kept samples (:func:`read_kept`): a kept record counts once, as its file would
    (a file of the same name replaces it); a summary seeds its band (``"seed"``)."""
    datas = records_by_name(files, kept)
    seeds = [line["summary"] for line in kept if "summary" in line]
    out = {}
    newest = {}       # test: the band names of its newest passing record
    for name in sorted(datas):
        data = datas[name]
        for test, e in (data.get("tests") or {}).items():
            if "::" not in test:
                continue        # not a pytest node: a unit test's made-up entry
            if e.get("outcome", "passed") == "passed":
                newest[test.split("::", 1)[-1]] = {v["name"] for v in e.get("values") or []}
            for v in e.get("values") or []:
                if v.get("value") is None:
                    continue
                b = out.setdefault((test.split("::", 1)[-1], v["name"]), _empty(v))
                b["values"].append(float(v["value"]))
                b["los"].append(v.get("lo"))
                b["his"].append(v.get("hi"))
                b["records"].add(name)
                b["phases"].add(data.get("phase") or "?")
    for sd in seeds:
        b = out.setdefault((sd["test"], sd["band"]), _empty(sd))
        b["seed"] = sd
        b["phases"].add(sd["phase"])
    # a band its test's newest passing record no longer states is retired (renamed or
    # removed in the code): it neither shows nor wants samples
    return {k: b for k, b in out.items() if k[0] not in newest or k[1] in newest[k[0]]}


def _empty(v):
    return {"values": [], "los": [], "his": [], "lo": v.get("lo"), "hi": v.get("hi"),
            "unit": v.get("unit", ""), "records": set(), "phases": set()}


def count(b):
    """The band's samples: its values and its seed's."""
    return len(b["values"]) + (b["seed"]["n"] if b.get("seed") else 0)


def wanting(bands, phase, min_n):
    """The test functions (parameters dropped: ``-k`` selects a function's every case)
    that ran in ``phase`` and have a band with fewer than ``min_n`` samples, sorted."""
    return sorted({test.split("[", 1)[0] for (test, _), b in bands.items()
                   if phase in b["phases"] and count(b) < min_n})


def predictive_tail(d, sd, n):
    """P(the next sample lands more than ``d`` beyond the mean, on one side), under the
    normal model with mean and sd estimated from ``n`` samples: Student's t with n - 1
    degrees of freedom, scaled by sd sqrt(1 + 1/n)."""
    if n < 2 or not sd or sd <= 0:
        return 0.0 if d > 0 else 1.0
    return t_cdf(-d / (sd * math.sqrt(1.0 + 1.0 / n)), n - 1)


def _mean_sd(xs):
    n = len(xs)
    mean = sum(xs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else float("nan")
    return mean, sd


#: bounds changed in the code since samples were recorded under the old one, each with
#: its reason: every sample is judged against the bound the test now has (a bound a test
#: computes from its own run varies from record to record and is judged per run)
RESTATED = {
    ("test_e_aqms_at_ten_flows_keep_the_link_busy_and_act[red]", "utilization"): {
        "lo": (0.75, "79219ee: RED's floor from theory, a synchronized Reno sawtooth at "
                     "scaled thresholds (tests/vm/test_families_vm.py E_UTIL_FLOOR)")},
    ("test_parallel_flows_are_labelled_and_sampled", "Jain's index of 4 FIFO flows"): {
        "lo": (0.5, "a drop-tail FIFO locks a flow out for seconds over 8 s (RFC 7567 "
                    "2.2): the floor is two of four flows holding the link "
                    "(tests/host/test_engine_host.py JAIN_FLOOR)")},
    ("test_e_ten_flows_keep_the_link_busy_and_the_fifo_near_full",
     "FIFO queueing delay p50"): {
        "lo": (0.3 * 100 * 1514 * 8 / 80e3,
               "theory's 0.44 of a full queue less a third for the 10 ms sampling of a "
               "~50 ms, 25-packet sawtooth (tests/vm/test_families_vm.py E_FIFO_FLOOR)")},
    ("test_a_ten_flows_raise_the_fetch_time",
     "fetch time's rise over half the drop rate's rise x 1 s"): {
        "lo": (0.5, "the mean of 24-43 fetches' binomial 1-3 s penalties: a quarter of "
                    "theory's p x 1 s (tests/vm/test_families_vm.py A_FETCH_RISE_FLOOR)")},
}
RESTATED[("test_a_prepared_udp_stream_sends_at_its_schedules_time",
          "prepared UDP stream's first packet after its due time")] = {
    "hi": (0.05, "two wake-ups (the schedule's thread, then the sender), not the sender's "
                 "own clock: 0.6-27 ms in 15 gate runs on a loaded 2-core host "
                 "(tests/host/test_traffic_host.py PREPARED_SLACK_S)")}
# a scheduled process never starts early: the first probe's floor is a contract, asserted
# apart from the band (tests/host/test_traffic_host.py), not a spread's edge
RESTATED[("test_rrul_and_schedule", "the scheduled ping's first probe")] = {
    "lo": (None, "never early: a contract the test asserts apart (a probe before 1 s "
                 "fails it whatever the machine), not an edge of the spread")}
# netem delivers nothing before its delay: the least one-way delay's floor is a contract
for _test in ("test_netperfmeter_through_the_pipeline_in_the_vm",
              "test_netperfmeter_through_the_pipeline_or_refused_without_sctp"):
    RESTATED[(_test, "messages' one-way delay, minimum")] = {
        "lo": (None, "netem's delay is a floor no correct run crosses: a contract, "
                     "asserted apart (tests/host/test_netperfmeter_host.py)")}
# contracts made of sides no correct run can cross, and bounds restated from theory with
# their spreads (2026-11-30; each test's comment says why)
RESTATED[("test_e_k_equal_flows_under_fq_codel_share_equally",
          "entropy fairness over ln k, 5 flows")] = {
    "hi": (None, "entropy is at most ln k by its definition: a contract, asserted apart")}
RESTATED[("test_irtt_probes_idle_then_behind_the_queue",
          "loaded RTT, irtt - ping, median of pairs sent within 25 ms")] = {
    side: (sign * 15.0, "a probe beside the queue reads >= 20 ms below ping; the tools' "
                        "offset is -2..6 ms (tests/host/test_irtt_host.py "
                        "PAIRED_TOLERANCE_MS)") for side, sign in (("lo", -1), ("hi", 1))}
RESTATED[("test_udp_streams_under_and_over_the_bottleneck", "first packet sent, after t0")] = {
    "lo": (None, "nothing starts early: a contract, asserted apart")}
RESTATED[("test_d_on_off_window_carries_over_idle_only_without_slow_start_after_idle[1]",
          "cwnd at the second burst over the initial window, ssai 1")] = {
    "hi": (2.5, "a restarted window reads 1 or 2 (one doubling by the sample): halfway "
                "to the carried-over floor 3")}
RESTATED[("test_b_average_latency_grows_with_the_pie_target",
          "RRUL ping mean over idle, target 20")] = {
    "lo": (0.75 * 20, "fq_codel serves the sparse ping ahead of the downloads' queue: the "
                      "floor is 0.75x PIE's 20 ms alone (tests/vm/test_families_vm.py)")}
for _rate, _ping, _dur in ((1.5, 0.1, 120), (10, 0.05, 30)):
    RESTATED[(f"test_full_fifo_rtt_and_goodput[{_rate}-{_ping}-{_dur}]",
              f"goodput, {_rate} Mbit/s")] = {
        "lo": (0.915 * _rate, "the headers' 95.6 % less ~5 s of RTO recovery in 120 s "
                              "(tests/host/test_fifo_fidelity.py GOODPUT_FLOOR)")}
# D's bulk paths: floors from theory, ceilings made contracts (2026-11-30; the test's doc
# in tests/vm/test_netperfmeter_vm.py, D_QUEUE_FLOOR and D_GOODPUT_FLOOR)
for _path, _rate, _base, _pkts in (("cellular", 5.0, 60.0, 600), ("dsl", 3.0, 40.0, 64)):
    _test = f"test_d_bulk_cubic_fills_the_path_and_its_fifo[{_path}-{_rate}-{_base}-{_pkts}]"
    _full = _pkts * 1514 * 8 / (_rate * 1e3)
    RESTATED[(_test, f"ping RTT p50, {_path}")] = {
        "lo": (_base + 0.1 * _full, "HyStart's exit sets how full the queue gets in 15 s: "
                                    "a tenth of the FIFO at the median"),
        "hi": (None, "a full queue is a contract, asserted apart")}
    RESTATED[(_test, f"goodput, {_path}")] = {
        "lo": (0.7 * _rate, "headers, slow start and an RTO with the queue drained"),
        "hi": (None, "the link's rate is a contract, asserted apart")}


def bounds(b, key=None):
    """Each sample's (lo, hi) as the band is judged now: a side the newest sample has no
    bound on is no longer the band's (the test made it a contract, asserted apart); a
    bound restated in the code (:data:`RESTATED`) replaces the recorded one. A seed's
    bounds come first (it is older than every kept record)."""
    n = len(b["values"])
    seed = b.get("seed")
    los = ([seed["lo"]] if seed else []) + list(b.get("los") or [b["lo"]] * n)
    his = ([seed["hi"]] if seed else []) + list(b.get("his") or [b["hi"]] * n)
    for side, xs in (("lo", los), ("hi", his)):
        if xs and xs[-1] is None:
            xs[:] = [None] * len(xs)
        if side in RESTATED.get(key, {}):
            xs[:] = [RESTATED[key][side][0]] * len(xs)
    return los, his


def pool(parts):
    """(n, mean, sd) of samples given as parts, each (n, mean, sd): the exact pooled
    mean and sample standard deviation (sd nan with fewer than 2)."""
    parts = [(k, m, s) for k, m, s in parts if k]
    n = sum(k for k, _, _ in parts)
    if not n:
        return 0, float("nan"), float("nan")
    mean = sum(k * m for k, m, _ in parts) / n
    ss = sum((k - 1) * s * s if k > 1 else 0.0 for k, _, s in parts) \
        + sum(k * (m - mean) ** 2 for k, m, _ in parts)
    return n, mean, (math.sqrt(ss / (n - 1)) if n > 1 else float("nan"))


def _side_gaps(b, key=None):
    """Each side's gaps, a sample's distance inside its own bound (x - lo, hi - x), over
    the samples that have that bound, as (n, mean, sd): a band whose bound is computed
    from its run (a stopped sender's window, ICMP's own excess) is judged against the
    bound it had. A seed (a summary: its bounds fixed) adds its n, mean and sd."""
    xs = b["values"]
    los, his = bounds(b, key)
    seed = b.get("seed")
    k = 1 if seed else 0
    sides = []
    for sign, bs_ in ((1, los), (-1, his)):
        parts = []
        if seed and bs_[0] is not None:
            parts.append((seed["n"], sign * (seed["mean"] - bs_[0]), seed["sd"]))
        g = [sign * (x - v) for x, v in zip(xs, bs_[k:]) if v is not None]
        if g:
            parts.append((len(g),) + _mean_sd(g))
        if parts:
            sides.append(pool(parts))
    return sides, los, his


def spread(b, key=None):
    """The band's statistics (see the module's doc). With fixed bounds the gaps' sd is
    the values' and their mean the mean's distance to the bound; with bounds that vary
    from run to run, each side's gap is modelled instead of the value. ``key`` (test,
    name) finds a restated bound. A seed's samples count with the values: pooled mean
    and sd, its min and max, its misses (judged from its min and max against the bounds
    as judged now: none when both are within, else at least the misses it had, >= 1)."""
    xs = b["values"]
    seed = b.get("seed")
    sides, los, his = _side_gaps(b, key)
    k = 1 if seed else 0
    misses = sum(1 for x, lo, hi in zip(xs, los[k:], his[k:]) if not within(x, lo, hi))
    parts = [(len(xs),) + _mean_sd(xs)] if xs else []
    lows, highs = list(xs), list(xs)
    if seed:
        parts.insert(0, (seed["n"], seed["mean"], seed["sd"]))
        lows.append(seed["min"])
        highs.append(seed["max"])
        if not (within(seed["min"], los[0], his[0]) and within(seed["max"], los[0], his[0])):
            misses += max(1, seed.get("misses", 0))
    n, mean, sd = pool(parts)
    margin = min((m / s if s and s > 0 else float("inf")) for _, m, s in sides) \
        if sides else float("inf")
    if n < 2:
        p_model = 1.0          # one sample: no spread, no claim
    else:
        # a side only one sample had a bound on makes no claim
        p_model = min(1.0, sum(predictive_tail(m, s, g) if g > 1 else 1.0
                               for g, m, s in sides))
    p = max(p_model, misses / n)
    ff = false_fail_rate(p)
    return {"n": n, "mean": mean, "sd": sd, "min": min(lows), "max": max(highs),
            "misses": misses, "margin_sd": margin, "p_model": p_model, "p": p,
            "p_free": binom_upper(misses, n), "false_fail": ff}


def calibrated(s, min_n):
    """"yes" (with its misses, when it had any), or why not (the module's doc)."""
    missed = f"{s['misses']} missed" if s["misses"] else ""
    if s["n"] < min_n:
        return f"no (n < {min_n})"
    if s["false_fail"] >= TARGET:
        return f"no ({missed})" if missed else "no (rate above 1/1000)"
    return f"yes ({missed})" if missed else "yes"


def _fmt(x):
    if x is None:
        return "-"
    if isinstance(x, float) and (math.isinf(x) or math.isnan(x)):
        return "-" if math.isnan(x) else "inf"
    return f"{x:.4g}"


def _bound(b, side, key=None):
    """A side's bound as judged now (:func:`bounds`), or its range when it varies from
    run to run."""
    vals = [v for v in bounds(b, key)[0 if side == "lo" else 1] if v is not None]
    if not vals:
        return "-"
    lo, hi = min(vals), max(vals)
    # (a seed's bounds are as printed, to 4 significant digits: equal at that precision)
    return _fmt(lo) if _fmt(lo) == _fmt(hi) \
        else f"[{_fmt(lo)}, {_fmt(hi)}]"


def table(bands, min_n, markdown):
    head = ["test", "band", "n", "mean", "sd", "min", "max", "bounds", "margin (sd)",
            "p per attempt", "false-fail", "free (95 %)", "calibrated"]
    rows = []
    for (test, name), b in sorted(bands.items()):
        s = spread(b, (test, name))
        shown = f"{_bound(b, 'lo', (test, name))} .. {_bound(b, 'hi', (test, name))} " \
            f"{b['unit']}".strip()
        if (test, name) in RESTATED:
            shown += " (restated)"
        rows.append([test, name, str(s["n"]), _fmt(s["mean"]), _fmt(s["sd"]),
                     _fmt(s["min"]), _fmt(s["max"]), shown, _fmt(s["margin_sd"]),
                     _fmt(s["p"]), _fmt(s["false_fail"]), _fmt(s["p_free"]),
                     calibrated(s, min_n)])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
    else:
        lines = ["  ".join(head)] + ["  ".join(r) for r in rows]
    done = sum(1 for r in rows if r[-1].startswith("yes"))
    lines.append(f"{len(rows)} bands, {done} calibrated (n >= {min_n}, false-fail < "
                 f"{TARGET:g} by the normal model and by the misses' share)")
    return lines


def degraded_counts(files, kept=()):
    """{family: [degraded runs, runs]} summed over the records' ``degraded_by_family``
    (every phase of every tier: each run of a family test counts once per attempt), a
    kept record once (its file, if here too, replaces it), a summary's counts added."""
    fams = [d.get("degraded_by_family") or {}
            for d in records_by_name(files, kept).values()]
    fams += [line["families"] for line in kept if "families" in line]
    out = {}
    for by in fams:
        for fam, c in by.items():
            k = out.setdefault(fam, [0, 0])
            k[0] += int(c.get("degraded", 0))
            k[1] += int(c.get("runs", 0))
    return out


#: the samples kept with the code: one line per record (its bands' values), and the
#: summaries of records whose values were lost (a machine's archive does not outlive it)
KEPT = os.path.join(ROOT, "bench", "band-samples.jsonl")
#: what of a record is kept: enough to judge its bands and count its degraded runs
KEPT_FIELDS = ("phase", "tier", "started", "machine", "kernel", "cpus",
               "degraded_by_family")


def read_kept(path):
    """The kept lines (JSON objects), [] when there is no such file."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def kept_line(name, data):
    """A record trimmed to what the bands need: each test's values, nothing else of it."""
    line = {"record": name}
    line.update({k: data[k] for k in KEPT_FIELDS if k in data})
    line["tests"] = {t: {"values": e["values"], "outcome": e.get("outcome")}
                     for t, e in sorted(data["tests"].items())
                     if "::" in t and e.get("values")}
    return line


def keep(files, path):
    """Add each record file not yet kept to ``path`` (rewritten whole, sorted: records
    by name, which starts with the time it ran, summaries first). Returns how many
    were added."""
    lines = read_kept(path)
    have = {line["record"] for line in lines if "record" in line}
    added = []
    for f in files:
        name = os.path.basename(f)
        if name in have:
            continue
        data = record.read(f)
        if data is None or not data.get("tests"):
            continue
        line = kept_line(name, data)
        if line["tests"]:           # a record with no band's value keeps nothing
            have.add(name)
            added.append(line)
    if not added:
        return 0
    rest = [line for line in lines if "record" not in line]
    recs = sorted([line for line in lines if "record" in line] + added,
                  key=lambda line: line["record"])
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        for line in rest + recs:
            f.write(json.dumps(line, sort_keys=True, separators=(",", ":")) + "\n")
    os.replace(tmp, path)
    return len(added)


def _num(cell):
    return None if cell.strip() == "-" else float(cell)


def summaries_from_markdown(text, source, phase_of):
    """Seeds from a table this script printed (``--markdown``): one summary line per
    band whose bounds were fixed (a band with bounds that vary from run to run is
    modelled gap by gap, which a summary cannot give: it starts again), and one line
    of the degraded counts. ``phase_of(test)``: the phase that runs the test. The
    numbers are as printed, to 4 significant digits."""
    out, fams = [], {}
    for row in text.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 13 and cells[0].startswith("test") and cells[2].isdigit():
            test, band, n, mean, sd, lo_, hi_, shown, calib = (
                cells[0], cells[1], int(cells[2]), cells[3], cells[4], cells[5], cells[6],
                cells[7], cells[12])
            if "[" in shown or n < 1:
                continue
            shown = shown.replace("(restated)", "").strip()
            lo_s, rest = shown.split(" .. ", 1)
            hi_s, _, unit = rest.partition(" ")
            missed = calib.split("(", 1)[-1].split(" missed")[0]
            out.append({"summary": {
                "test": test, "band": band, "phase": phase_of(test), "n": n,
                "mean": float(mean), "sd": 0.0 if n < 2 else float(sd),
                "min": float(lo_), "max": float(hi_),
                "lo": _num(lo_s), "hi": _num(hi_s), "unit": unit.strip(),
                "misses": int(missed) if missed.isdigit() else 0, "source": source}})
        parts = row.split()
        if len(parts) == 7 and parts[1].isdigit() and parts[2].isdigit() \
                and parts[6] in ("yes", "NO"):
            fams[parts[0]] = {"degraded": int(parts[1]), "runs": int(parts[2])}
    if fams:
        out.append({"families": fams, "source": source})
    return out


def phase_of_test(test):
    """The phase whose test files define ``test``'s function: tests/vm runs in the VM."""
    func = test.split("[", 1)[0]
    for path in glob.glob(os.path.join(ROOT, "tests", "vm", "*.py")):
        with open(path) as f:
            if f"def {func}(" in f.read():
                return "vm"
    return "host"


def family_table(counts):
    """Each family's degraded share across the records against the rate the acceptance
    tier's binomial test uses (tests/retries.py DEGRADED_RATE)."""
    from tests.retries import DEGRADED_RATE  # noqa: PLC0415
    lines = ["family  degraded  runs  share  95 % upper  rate in use  rate covers the share"]
    for fam in sorted(counts):
        k, n = counts[fam]
        rate = DEGRADED_RATE.get(fam, DEGRADED_RATE["other"])
        share = k / n if n else float("nan")
        lines.append(f"{fam}  {k}  {n}  {_fmt(share)}  {_fmt(binom_upper(k, n))}  "
                     f"{rate:g}  {'yes' if n and rate >= share else 'NO'}")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", help="records or directories of records "
                    f"(default: ${ARCHIVE_ENV} or {ARCHIVE_DEFAULT}, and .scratch/test-records)")
    ap.add_argument("--min-n", type=int, default=10)
    ap.add_argument("--kept", metavar="FILE",
                    help="the kept samples read with the records (default: "
                    "bench/band-samples.jsonl when no record path is given, else none)")
    how = ap.add_mutually_exclusive_group()
    how.add_argument("--markdown", action="store_true")
    how.add_argument("--wanting", choices=("host", "vm"),
                     help="print the -k expression of this phase's tests with a band "
                     "under --min-n samples (exit 3 when there is none, 4 when the "
                     "phase has no sample at all)")
    how.add_argument("--keep", action="store_true",
                     help="add the records not kept yet to the kept samples and stop")
    how.add_argument("--seed-markdown", metavar="TABLE",
                     help="add summaries of the bands in a table this script printed "
                     "(--markdown) to the kept samples, from --source, and stop")
    ap.add_argument("--source", help="where --seed-markdown's table came from (required)")
    a = ap.parse_args(argv)
    if a.min_n < 2:
        ap.error("--min-n must be at least 2")
    for p in a.paths + ([a.seed_markdown] if a.seed_markdown else []):
        if not os.path.exists(p):
            ap.error(f"no such record, directory or table: {p}")
    if a.seed_markdown and not a.source:
        ap.error("--seed-markdown needs --source (e.g. 'bands.md at <commit>')")
    kept_path = a.kept or (KEPT if not a.paths else None)
    files = record_files(a.paths)
    if a.keep or a.seed_markdown:
        path = kept_path or KEPT
        if a.keep:
            print(f"{keep(files, path)} record(s) added to {path}")
            return 0
        with open(a.seed_markdown) as f:
            seeds = summaries_from_markdown(f.read(), a.source, phase_of_test)
        lines = read_kept(path)
        if any(line.get("source") == a.source or
               line.get("summary", {}).get("source") == a.source for line in lines):
            ap.error(f"summaries from {a.source!r} are kept already")
        with open(path, "a") as f:
            for line in seeds:
                f.write(json.dumps(line, sort_keys=True, separators=(",", ":")) + "\n")
        print(f"{len(seeds)} summaries from {a.source} added to {path}")
        return 0
    kept = read_kept(kept_path) if kept_path else []
    bands = samples(files, kept)
    if a.wanting:
        if not any(a.wanting in b["phases"] for b in bands.values()):
            return 4  # no sample of this phase at all: which tests have bands is unknown
        names = wanting(bands, a.wanting, a.min_n)
        if not names:
            return 3
        print(" or ".join(names))
        return 0
    n_kept = sum(1 for line in kept if "record" in line)
    n_seeds = sum(1 for line in kept if "summary" in line)
    print(f"{len(files)} record files, {n_kept} kept records, {n_seeds} bands seeded from "
          f"summaries; {len(bands)} bands with values")
    for line in table(bands, a.min_n, a.markdown):
        print(line)
    print("degraded runs per family (the acceptance tier's binomial test):")
    for line in family_table(degraded_counts(files, kept)):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
