"""The compiled queue sampler's decoding (bb-qdisc-sampler --parse) against nlstats on
every captured RTM_GETQDISC answer in tests/fixtures/netlink/: the CSV rows it prints are
byte for byte those that sampler_rows.qdisc_row + csv.writer make from nlstats' decoding
(fq_codel with its per-flow classes merged, as QdiscReader.read does), and its ``t``
column is Python's repr(round(t, 6)) for times from microseconds to days."""
import csv
import glob
import io
import json
import os
import random
import subprocess

import pytest

from bufferbloat.core.series import SERIES_COLUMNS
from bufferbloat.measure import compiled, qdisc_helper, sampler, sampler_rows
from bufferbloat.net import qdiscs
from tests.conftest import FIXTURES

NL = os.path.join(FIXTURES, "netlink")
DUMPS = sorted(os.path.basename(p)[:-len(".bin")]
               for p in glob.glob(os.path.join(NL, "*.qdisc*.bin")))
TIMES = [0.0, 1.5, 0.01, 12.3456789, 1e-05, 0.00012345, 123456.7, 3.0000004, 86400.0000015]


@pytest.fixture(scope="module")
def binary():
    path, why = compiled.qdisc_helper_binary()
    if path is None:
        pytest.skip(f"bb-qdisc-sampler unavailable: {why}")
    return path


def _python_rows(case, dump, times):
    meta = json.load(open(os.path.join(NL, f"{case}.meta.json")))
    with open(os.path.join(NL, f"{dump}.bin"), "rb") as f:
        qs = qdiscs.parse_qdisc_dump(f.read(), meta["ifindex"])
    classes = None
    cls = os.path.join(NL, dump.replace(".qdisc", ".class") + ".bin")
    if os.path.exists(cls):
        with open(cls, "rb") as f:
            classes = qdiscs.parse_class_dump(f.read(), meta["ifindex"])
    qs = qdiscs.finish_qdiscs(qs, classes)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for t in times:
        w.writerows(sampler_rows.qdisc_row(round(t, 6), meta["dev"], q) for q in qs)
    args = ["--parse", os.path.join(NL, f"{dump}.bin"), "--ifindex", str(meta["ifindex"]),
            "--dev", meta["dev"]]
    if os.path.exists(cls):
        args += ["--class", cls]
    return buf.getvalue(), args, qs


@pytest.mark.parametrize("dump", DUMPS)
def test_c_parse_matches_nlstats(binary, dump):
    case = dump.split(".")[0]
    want, args, qs = _python_rows(case, dump, TIMES)
    for t in TIMES:
        args += ["--t", repr(t)]
    got = subprocess.run([binary] + args, capture_output=True, text=True, check=True).stdout
    assert got == want
    assert got.count("\n") == len(TIMES) * len(qs) > 0
    if case.startswith("vm_"):  # the AQM's own columns are filled in
        leaf = next(r for r in csv.reader(io.StringIO(got)) if r[3] == "1:1")
        cols = dict(zip(SERIES_COLUMNS["qdisc"], leaf))
        assert cols["marks"] != "" and cols["early_drops"] != ""
        assert (cols["delay_us"] != "") == (case != "vm_red")


def test_c_time_column_is_python_repr_of_round6(binary):
    rnd = random.Random(10)
    times = [rnd.uniform(0, 10) ** rnd.choice((1, 3, 6)) for _ in range(600)]
    times += [rnd.random() * 10 ** -rnd.randint(0, 9) for _ in range(400)]
    dump = "host_htb_pfifo.qdisc"
    _want, args, qs = _python_rows("host_htb_pfifo", dump, ())
    for t in times:
        args += ["--t", repr(t)]
    out = subprocess.run([binary] + args, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    got = [line.split(",", 1)[0] for line in out[::len(qs)]]
    assert got == [repr(round(t, 6)) for t in times]


def test_binary_is_not_tracked():
    out = subprocess.run(["git", "ls-files", os.path.relpath(compiled.CSAMPLER_BIN,
                                                               sampler.ROOT)],
                         cwd=sampler.ROOT, capture_output=True, text=True).stdout
    assert out.strip() == ""


def test_no_compiler_no_binary_falls_back_with_a_reason(monkeypatch, tmp_path):
    monkeypatch.setattr(compiled, "CSAMPLER_BIN", str(tmp_path / "bb-qdisc-sampler"))
    monkeypatch.setattr(compiled.shutil, "which", lambda name: None)
    path, why = compiled.qdisc_helper_binary()
    assert path is None and "not built" in why and "no make/gcc" in why
    (tmp_path / "bb-qdisc-sampler").write_text("")
    os.utime(tmp_path / "bb-qdisc-sampler", (1, 1))  # older than its source
    path, why = compiled.qdisc_helper_binary()
    assert path is None and "older than its source" in why
    monkeypatch.setenv(compiled.QDISC_SAMPLER_ENV, "c")
    with pytest.raises(RuntimeError, match="BUFFERBLOAT_QDISC_SAMPLER=c"):
        qdisc_helper.start_qdisc_helper({}, str(tmp_path))
    monkeypatch.setenv(compiled.QDISC_SAMPLER_ENV, "auto")
    assert qdisc_helper.start_qdisc_helper({}, str(tmp_path))[0] is None


def test_a_header_newer_than_the_binary_makes_it_stale(monkeypatch, tmp_path):
    """bb_tick.h is shared by the sampler and the capacity replay: a binary older than
    it is rebuilt (here: no compiler, so it says it is stale), as for its own source."""
    src = tmp_path / "csampler"
    src.mkdir()
    for name in ("bb_qdisc_sampler.c", "Makefile", "bb_tick.h"):
        (src / name).write_text("")
        os.utime(src / name, (100, 100))
    binary = tmp_path / "bb-qdisc-sampler"
    binary.write_text("")
    os.utime(binary, (200, 200))
    monkeypatch.setattr(compiled, "CSAMPLER_DIR", str(src))
    monkeypatch.setattr(compiled.shutil, "which", lambda name: None)
    assert compiled.compiled_helper(str(binary), "bb_qdisc_sampler.c")[0] == str(binary)
    os.utime(src / "bb_tick.h", (300, 300))
    path, why = compiled.compiled_helper(str(binary), "bb_qdisc_sampler.c")
    assert path is None and "older than its source" in why
