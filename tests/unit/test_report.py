"""The HTML report, opened in headless Chromium: it loads with no missing image and shows
every run's configuration and metrics table, for a run, a sweep and a results tree.

The page's inline script counts, after the load event, the images whose naturalWidth is
0 and writes the count into ``#image-check``; Chromium's ``--dump-dom`` prints the DOM
after the scripts ran (``--virtual-time-budget`` lets the load complete first).
"""
import gzip
import json
import os
import re
import shutil
import subprocess
import urllib.parse

import pytest

from bufferbloat.core.errors import UsageError
from bufferbloat.plots.report import FLENT_DIR, REPORT_FILE, TABLES_DIR, write_report

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   "fixtures", "runs")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def needs_chromium(test):
    """The report test needs Debian's chromium (scripts/host-packages.txt installs it):
    without it the test fails, it does not skip."""
    def wrapper(*args, **kwargs):
        assert CHROMIUM, ("chromium is not installed: run scripts/install-deps.sh "
                          "(scripts/host-packages.txt lists it)")
        return test(*args, **kwargs)
    import functools
    return functools.wraps(test)(wrapper)


def browse(html_path, profile_dir):
    """The DOM of ``html_path`` after Chromium loaded it and ran its scripts."""
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={profile_dir}", "--virtual-time-budget=10000", "--dump-dom",
         "file://" + os.path.abspath(html_path)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "</html>" in proc.stdout, proc.stderr[-2000:]
    return proc.stdout


def image_check(dom):
    m = re.search(r'<div id="image-check" data-images="(\d*)" data-broken="(\d*)"', dom)
    assert m, "image-check element missing from the DOM"
    assert m.group(1), "the page's load script did not run"
    return int(m.group(1)), int(m.group(2))


def metric_tables(dom):
    return re.findall(r'<table class="metrics" data-run="([^"]+)">', dom)


def check_page(html_path, tmp_path, runs):
    """Common checks: images all decoded, one metrics table per run (non-empty), one
    configuration table per run, no external URL."""
    with open(html_path) as f:
        source = f.read()
    assert not re.search(r'(src|href)="(https?:)?//', source), "external URL in the report"
    dom = browse(html_path, tmp_path / "chromium-profile")
    n_images, broken = image_check(dom)
    assert broken == 0
    assert n_images == source.count("<img ") > 0
    tables = metric_tables(dom)
    assert sorted(tables) == sorted(runs)
    for run_dir in runs:
        table = dom.split(f'data-run="{run_dir}">', 1)[1].split("</table>", 1)[0]
        assert table.count("<tr>") > 5, f"empty metrics table for {run_dir}"
    assert dom.count('<table class="config">') == len(runs)
    return dom


def copy_fixture(name, dest):
    shutil.copytree(os.path.join(FIX, name), dest)
    return str(dest)


@needs_chromium
def test_report_of_one_run(tmp_path):
    d = copy_fixture("a2_pie", tmp_path / "a2_pie")
    html = write_report(d)
    assert html == os.path.join(d, REPORT_FILE)
    dom = check_page(html, tmp_path, [d])
    # the configuration of the run: qdisc, params, machine, kernel, host or VM
    assert "pie {" in dom and "target_ms" in dom and "project VM" in dom
    assert "6.1.0" in dom                                  # the VM's kernel
    assert "pie tupdate 15 ms becomes 16 ms" in dom      # the qdisc's warning
    # every figure of the run (scenario's first), each with an alt text naming it
    alts = re.findall(r'<img alt="([^"]+)"', dom)
    assert [a.split(":")[0] for a in alts][:5] == ["cwnd", "rtt", "queue", "qdelay", "web"]


@needs_chromium
def test_report_of_a_sweep(tmp_path):
    d = copy_fixture("sweep_fifo_buffer", tmp_path / "sweep")
    html = write_report(d)
    runs = [os.path.join(d, p, f"rep-{r}") for p in ("buffer_pkts=20", "buffer_pkts=100")
            for r in (1, 2)]
    dom = check_page(html, tmp_path, runs)
    sweep_table = dom.split('<table class="sweep">', 1)[1].split("</table>", 1)[0]
    assert sweep_table.count("<tr>") == 3                 # header + 2 points
    assert "buffer_pkts=20" in sweep_table and "buffer_pkts=100" in sweep_table
    for ext in ("csv", "md"):
        assert os.path.isfile(os.path.join(d, TABLES_DIR, f"a1_fifo.{ext}"))
        assert f'href="{TABLES_DIR}/a1_fifo.{ext}"' in dom
    assert "rtt_mean_ms-vs-buffer_pkts: a1_fifo" in dom


@needs_chromium
def test_report_of_a_study_d_sweep_links_both_tables(tmp_path):
    """Study D writes its own table beside the sweep's (plots.study_d): the report links
    the four files (a report over D's runs once failed on them, the first run-all of the
    catalogue to include D)."""
    d = copy_fixture("sweep_d1_quick", tmp_path / "sweep")
    html = write_report(d)
    runs = sorted(str(p.parent) for p in (tmp_path / "sweep").rglob("result.json"))
    dom = check_page(html, tmp_path, runs)
    for stem in ("d1_cca_paths", "d1_cca_paths-study-d"):
        for ext in ("csv", "md"):
            path = os.path.join(d, TABLES_DIR, f"{stem}.{ext}")
            assert os.path.getsize(path) > 0
            assert f'href="{TABLES_DIR}/{stem}.{ext}"' in dom
    with open(os.path.join(d, TABLES_DIR, "d1_cca_paths-study-d.csv")) as f:
        rows = f.read().splitlines()
    assert len(rows) == 3 and {"reno", "cubic"} <= {c for r in rows[1:] for c in r.split(",")}
    # what the two runs cost, from their records: the table at the page's end
    recs = [json.load(open(os.path.join(r, "result.json"))) for r in runs]
    traffic = sum(r["duration_s"] for r in recs)
    wall = sum(r["wall_s"] for r in recs)
    table = dom.split('<h2 id="cost">Cost</h2>', 1)[1].split("</table>", 1)[0]
    cells = re.findall(r"<td>([^<]*)</td>", table)
    assert cells[:7] == ["d1_cca_paths", "2", "2", "0", f"{traffic:,.0f} s",
                         f"{wall:,.0f} s", f"{wall / traffic:.2f}"]


@needs_chromium
def test_report_of_a_results_tree(tmp_path):
    """OUT/index.json as run-all writes it, with run_dir paths of another machine."""
    out = tmp_path / "results"
    copy_fixture("sweep_fifo_buffer", out / "a1_fifo" / "sweep")
    os.remove(out / "a1_fifo" / "sweep" / "index.json")
    copy_fixture("a2_pie", out / "a2_pie" / "20261121-200040-430")
    copy_fixture("b2_rrul", out / "b2_pie_target" / "20261121-200105-583")
    copy_fixture("a3_fifo_3flows", out / "a3_pie_flows" / "20261121-200010-22467")
    copy_fixture("c1_red_2flows", out / "c1_red_vs_pie" / "20261121-202041-440")
    done = []
    for run_dir in sorted(str(p.parent) for p in out.rglob("result.json")):
        rel = os.path.relpath(run_dir, out)
        done.append({"scenario": rel.split("/")[0], "overrides": {}, "rep": 1,
                     "run_dir": "/elsewhere/results/" + rel, "status": "ok"})
    (out / "index.json").write_text(json.dumps({"catalogue": ["a1_fifo"], "points": 8,
                                                "done": done}))
    html = write_report(str(out))
    runs = [os.path.join(str(out), e["run_dir"][len("/elsewhere/results/"):]) for e in done]
    assert len(runs) == 8
    dom = check_page(html, tmp_path, runs)
    # RRUL figures, the flags section, a table per scenario
    assert "totals: b2_pie_target" in dom
    assert dom.count('<table class="sweep">') == 5
    assert "Jain's index" in dom                  # the 3-flow run's flag
    # every run links its flent data file, written beside the page
    links = re.findall(r'<a class="flent" href="([^"]+)"', dom)
    assert len(links) == len(runs)
    for href in links:
        assert href.startswith(FLENT_DIR + "/") and href.endswith(".flent.gz")
        with gzip.open(out / href, "rt") as f:
            data = json.load(f)
        assert data["version"] == 4 and data["raw_values"]
        assert data["metadata"]["NAME"] in ("tcp_nup", "rrul_be_nflows")


def test_report_refuses_what_is_not_a_result(tmp_path):
    with pytest.raises(UsageError):
        write_report(str(tmp_path / "nothing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no run"):
        write_report(str(tmp_path / "empty"))


@needs_chromium
def test_the_image_check_sees_a_broken_image(tmp_path):
    """The check itself: a report with one undecodable image counts it."""
    d = copy_fixture("a1_fifo", tmp_path / "a1_fifo")
    html = write_report(d)
    with open(html) as f:
        source = f.read()
    with open(html, "w") as f:
        f.write(source.replace("</body>", '<img alt="broken" src="data:image/png;base64,'
                                          'AAAA"></body>'))
    n_images, broken = image_check(browse(html, tmp_path / "chromium-profile"))
    assert broken == 1 and n_images == source.count("<img ") + 1


@needs_chromium
def test_report_of_a_qdisc_sweep_compares_them(tmp_path):
    d = copy_fixture("sweep_qdiscs", tmp_path / "sweep")
    html = write_report(d)
    runs = [os.path.join(d, f"qdisc={q}", "rep-1") for q in ("fifo", "pie", "codel",
                                                             "fq_codel")]
    dom = check_page(html, tmp_path, runs)
    assert "compare-qdiscs: a1_fifo" in dom
    assert "aqm_delay_p50_ms-vs-qdisc: a1_fifo" in dom
    # each run's flags (from its stored metrics) are shown, whole: FIFO's buffer not
    # filled, CoDel's and FQ-CoDel's delay above a target shorter than one frame; PIE
    # has none
    from bufferbloat.plots.flags import flags
    from bufferbloat.results.metrics import run_rows
    from bufferbloat.results.records import load_run
    shown = {}
    for run_dir in runs:
        run = load_run(run_dir)
        shown[run.params["qdisc"]] = flags(run, run_rows(run))
    assert shown["pie"] == []
    assert any(f.startswith("FIFO RTT") for f in shown["fifo"])
    assert [f.split(" p50")[0] for f in shown["codel"]] == ["CODEL queueing delay"]
    assert [f.split(" p50")[0] for f in shown["fq_codel"]] == ["FQ_CODEL queueing delay"]
    for q, texts in shown.items():
        for text in texts:
            assert text in dom, (q, text)


def _results_tree(tmp_path):
    """run-all's tree of the fixtures: a sweep of a1_fifo, a qdisc sweep, and single runs
    of a2, b2 and c1 (index.json with run_dir paths of another machine)."""
    out = tmp_path / "results"
    copy_fixture("sweep_fifo_buffer", out / "a1_fifo" / "sweep")
    os.remove(out / "a1_fifo" / "sweep" / "index.json")
    copy_fixture("a2_pie", out / "a2_pie" / "sweep" / "default" / "rep-1")
    copy_fixture("b2_rrul", out / "b2_pie_target" / "sweep" / "default" / "rep-1")
    copy_fixture("c1_red_2flows", out / "c1_red_vs_pie" / "sweep" / "default" / "rep-1")
    done = [{"scenario": os.path.relpath(p.parent, out).split("/")[0],
             "overrides": json.loads(p.read_text()).get("overrides") or {},
             "rep": 1, "run_dir": "/elsewhere/results/" + os.path.relpath(p.parent, out),
             "status": "ok"} for p in sorted(out.rglob("result.json"))]
    (out / "index.json").write_text(json.dumps({"catalogue": [], "points": len(done),
                                                "done": done}))
    return out


def artefact_dir(tmp_path):
    """Where a test keeps what a person may want to look at (env
    BUFFERBLOAT_TEST_ARTEFACTS, else the test's temporary directory)."""
    where = os.environ.get("BUFFERBLOAT_TEST_ARTEFACTS") or str(tmp_path / "artefacts")
    os.makedirs(where, exist_ok=True)
    return where


@needs_chromium
def test_the_report_is_shaped_by_the_studies_and_every_figure_shows(tmp_path):
    """Opened in headless Chromium: the page loads, every figure decodes (embedded or a
    file beside the runs), each study shows its own figures with a reading first, its
    headline table, health and flags, and folds the exhaustive plots and the runs; a
    screenshot of the page is kept."""
    out = _results_tree(tmp_path)
    html = write_report(str(out))
    with open(html) as f:
        source = f.read()
    runs = sorted(str(p.parent) for p in out.rglob("result.json"))
    dom = check_page(html, tmp_path, runs)
    studies = re.findall(r'<section class="study" id="study-([^"]+)">', dom)
    assert studies == ["a1_fifo", "a2_pie", "b2_pie_target", "c1_red_vs_pie"]
    a1 = dom.split('id="study-a1_fifo">', 1)[1].split("</section>\n", 1)[0]
    # the study's own figures come first, each with its reading (bold caption)
    first_fold = a1.index("<details")
    assert a1.index("timeseries: a1_fifo") < first_fold
    assert a1.index("fetch: a1_fifo") < first_fold
    readings = re.findall(r"<figcaption><b>([^<]+)</b>", a1[:first_fold])
    assert len(readings) == 2 and "buffer_pkts=20" in readings[0]
    assert '<table class="headline">' in a1 and "Health:" in a1 and "Flags (" in a1
    assert "<summary>Every metric against every swept parameter" in a1
    assert "<summary>Each run (4)" in a1
    # the folded figures are files beside the runs, linked, not embedded
    linked = re.findall(r'<img alt="[^"]*" src="(?!data:)([^"]+)"', source)
    assert linked and all(os.path.isfile(os.path.join(out, urllib.parse.unquote(p)))
                          for p in linked)
    assert os.path.isfile(out / "a1_fifo" / "sweep" / "figures" / "a1_fifo-timeseries.png")
    # a single run's own figures stand for its study (a2: no sweep)
    a2 = dom.split('id="study-a2_pie">', 1)[1].split("</section>\n", 1)[0]
    assert a2.index("<figure>") < a2.index("<details")
    shot = os.path.join(artefact_dir(tmp_path), "report-results-tree.png")
    proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                           f"--user-data-dir={tmp_path / 'shot-profile'}",
                           "--window-size=1280,3000", "--virtual-time-budget=10000",
                           f"--screenshot={shot}", "file://" + html],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with open(shot, "rb") as f:
        assert f.read(4) == b"\x89PNG"
    assert os.path.getsize(shot) > 50_000
    print(f"screenshot: {shot}")


def test_the_reading_is_the_data(tmp_path):
    from bufferbloat.plots import study, sweep
    from bufferbloat.results import headline
    pts = sweep.load_points(os.path.join(FIX, "sweep_fifo_buffer"))
    text = study.reading(pts, ["link:qdelay_mean_ms"])
    for key, reps in sweep.by_key(pts).items():
        mean = sum(headline.select(p.rows, "link:qdelay_mean_ms") for p in reps) / len(reps)
        assert f"{key} {headline.fmt(mean, 'ms')}" in text
    assert "(theory " in text


def test_a_reading_over_many_points_gives_the_range_and_its_ends(monkeypatch):
    from bufferbloat.plots import study, sweep
    from bufferbloat.results import headline
    pts = sweep.load_points(os.path.join(FIX, "sweep_fifo_buffer"))
    means = {key: sum(headline.select(p.rows, "link:qdelay_mean_ms") for p in reps) / len(reps)
             for key, reps in sweep.by_key(pts).items()}
    assert len(means) >= 2
    monkeypatch.setattr(study, "READING_LISTS_AT_MOST", len(means) - 1)
    text = study.reading(pts, ["link:qdelay_mean_ms"])
    lo, hi = min(means, key=means.get), max(means, key=means.get)
    assert (f"{headline.fmt(means[lo])}-{headline.fmt(means[hi], 'ms')} over {len(means)} "
            f"configurations (lowest {lo}; highest {hi})") in text
    assert "(theory " in text
    monkeypatch.setattr(study, "READING_LISTS_AT_MOST", len(means))     # listed again
    assert all(f"{key} " in study.reading(pts, ["link:qdelay_mean_ms"]) for key in means)


def test_a_second_report_reuses_the_figures_it_drew(tmp_path):
    d = copy_fixture("sweep_fifo_buffer", tmp_path / "sweep")
    write_report(d)
    figures = sorted(str(p) for p in (tmp_path / "sweep").rglob("*.png"))
    before = {p: os.path.getmtime(p) for p in figures}
    write_report(d)
    assert {p: os.path.getmtime(p) for p in figures} == before
    # new data (a run recomputed) draws that run's figures again
    run = os.path.join(d, "buffer_pkts=20", "rep-1")
    os.utime(os.path.join(run, "result.json"))
    write_report(d)
    again = [p for p in figures if os.path.getmtime(p) != before[p]]
    assert again and any(p.startswith(run) for p in again)


def test_unsettled_full_profile_runs_are_not_told_to_run_longer(tmp_path):
    """The full profile's runs are the study's own length: the report does not offer
    them "a longer run (the full profile)" (C's 60 points, 2026-11-29)."""
    d = copy_fixture("sweep_fifo_buffer", tmp_path / "sweep")
    path = os.path.join(d, "buffer_pkts=20", "rep-1", "result.json")
    rec = json.load(open(path))
    rec["profile"] = "full"
    rec.setdefault("health", {})["not_steady"] = "not at steady state: aqm_prob moving"
    json.dump(rec, open(path, "w"))
    page = open(write_report(d)).read()
    assert "Not at steady state: 1 of" in page and "aqm_prob moving" in page
    assert "(the full profile) would settle" not in page
    assert "the study's own length" in page


def test_the_report_names_unsettled_runs_and_points_short_of_the_precision(tmp_path):
    """A run whose series never settled and a point stopped at --max-reps are said in
    their study's section, by name (never averaged in as if steady or precise)."""
    d = copy_fixture("sweep_fifo_buffer", tmp_path / "sweep")
    for point in ("buffer_pkts=20", "buffer_pkts=100"):   # keys as a sweep records them
        for rep in (1, 2):
            path = os.path.join(d, point, f"rep-{rep}", "result.json")
            rec = json.load(open(path))
            rec["config_key"] = f"key-{point}"
            if (point, rep) == ("buffer_pkts=20", 2):
                rec.setdefault("health", {})["not_steady"] = (
                    "not at steady state: queue delay still moving")
            json.dump(rec, open(path, "w"))
    key, other = "key-buffer_pkts=20", {"config_key": "key-buffer_pkts=100"}
    index_path = os.path.join(d, "index.json")
    index = json.load(open(index_path))
    index["precision"] = {"rule": "+-10% at 95% confidence, 2-3 runs", "configs": {
        key: {"why": "max-reps", "runs": 3, "metrics": {}},
        other["config_key"]: {"why": "precise", "runs": 2, "metrics": {}}}}
    json.dump(index, open(index_path, "w"))
    page = open(write_report(d)).read()
    assert "Not at steady state: 1 of 4 runs." in page
    assert "queue delay still moving" in page
    assert "2 point(s) judged; 1 stopped at --max-reps." in page
    short = page.split("1 stopped at --max-reps.", 1)[1].split("</ul>", 1)[0]
    assert "buffer_pkts=20" in short and "buffer_pkts=100" not in short


def test_a_report_without_precision_or_unsettled_runs_says_neither(tmp_path):
    d = copy_fixture("sweep_fifo_buffer", tmp_path / "sweep")
    page = open(write_report(d)).read()
    assert "Not at steady state" not in page and "Precision:" not in page
