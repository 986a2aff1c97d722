"""One self-contained HTML page for a run, a sweep or a whole results tree.

:func:`write_report` writes ``DIR/report.html``: figures embedded as base64 PNG (no
external URL, nothing beside it is needed to view it), the flags (:mod:`plots.flags`),
for every set of runs of a scenario the sweep figures and the table of key metrics per
point (also written beside the page as ``report-tables/SCENARIO.csv`` and ``.md``), and
for every run its configuration (scenario, params, qdisc, knobs, overrides, machine,
kernel, host or VM, tools), its metrics table (``<table class="metrics"
data-run=...>``) and a link to its flent data file (``report-flent/N-SCENARIO.flent.gz``
beside the page, :mod:`bufferbloat.flentexport`; ``flent -i FILE -p totals``).

A small inline script counts, once the page has loaded, the images that failed to
decode and writes the count into ``<div id="image-check" data-images=N data-broken=M>``
(read by the headless-browser test).
"""

import base64
import datetime
import html
import io
import json
import os

from bufferbloat import identity
from bufferbloat.errors import UsageError
from bufferbloat.metrics import format_value
from bufferbloat.results import RESULT_FILE, load_run

from . import FIGURES, draw_figures, scenario_figures
from . import sweep as _sweep
from .common import caption, run_label, run_metrics
from .flags import flags

REPORT_FILE = "report.html"
TABLES_DIR = "report-tables"
FLENT_DIR = "report-flent"
#: figures of each run in a multi-run report when its scenario names none
DEFAULT_RUN_FIGURES = ("cwnd", "rtt", "queue")

_CSS = """
body{font-family:sans-serif;margin:1.5em;max-width:1200px;color:#222}
h1{font-size:1.5em}h2{font-size:1.25em;border-bottom:1px solid #ccc;margin-top:2em}
h3{font-size:1.05em}
table{border-collapse:collapse;margin:.5em 0;font-size:.85em}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}
td.num{text-align:right}
figure{display:inline-block;margin:.5em}img{max-width:100%}
.flags{background:#fff3cd;border:1px solid #e0c060;padding:.5em 1em}
.ok{color:#2a7a2a}.muted{color:#777}
details{margin:.5em 0}
"""

_CHECK_SCRIPT = """
window.addEventListener('load', function () {
  var imgs = document.images, broken = 0;
  for (var i = 0; i < imgs.length; i++) {
    if (!imgs[i].complete || imgs[i].naturalWidth === 0) broken++;
  }
  var el = document.getElementById('image-check');
  el.setAttribute('data-images', String(imgs.length));
  el.setAttribute('data-broken', String(broken));
  el.textContent = imgs.length + ' figures, ' + broken + ' missing';
});
"""


def _e(text):
    return html.escape(str(text), quote=True)


def _img(fig, alt):
    """``<figure>`` with ``fig`` as an inline base64 PNG."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return (f'<figure><img alt="{_e(alt)}" src="data:image/png;base64,{data}">'
            f"<figcaption class=muted>{_e(alt)}</figcaption></figure>")


def _kv_table(pairs, cls="config"):
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in pairs)
    return f'<table class="{cls}">{rows}</table>'


def _json(value):
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else value


def _identity_text(rec):
    """``full profile, 60 s; configuration 3fa2b1c9d0e4, run 91c0..., rep 2``."""
    text = identity.setting_label(identity.setting(rec))
    if rec.get("config_key"):
        text += (f"; configuration {identity.short(rec['config_key'])}, run "
                 f"{identity.short(rec.get('run_key'))}, rep "
                 f"{(rec.get('run_config') or {}).get('rep', '?')}")
    return text


def config_pairs(run):
    """(key, value) pairs describing a run's configuration."""
    rec = run.record
    scn = rec.get("scenario") if isinstance(rec.get("scenario"), dict) else {}
    machine = rec.get("machine") or {}
    qdisc = rec.get("qdisc") or {}
    pairs = [("run directory", run.dir),
             ("scenario", f"{scn.get('name', '?')}: {scn.get('description', '')}"),
             ("status", rec.get("status") + (f" ({rec.get('error')})" if rec.get("error")
                                             else "")),
             ("started", rec.get("started")),
             ("duration (s)", rec.get("duration_s")),
             ("configuration", _identity_text(rec)),
             ("warm-up (s)", rec.get("warmup_s")),
             ("overrides", _json(rec.get("overrides") or {})),
             ("qdisc", f"{qdisc.get('kind', '?')} {_json(qdisc.get('params') or {})}"),
             ("params", _json(run.params)),
             ("knobs", _json(rec.get("knobs") or {})),
             ("base RTT (ms)", rec.get("base_rtt_ms")),
             ("machine", f"{machine.get('hostname', '?')}, "
                         f"{'project VM' if machine.get('in_project_vm') else 'host'}"),
             ("kernel", machine.get("kernel")),
             ("bottleneck device", rec.get("bottleneck_dev")),
             ("tools", "; ".join(f"{k}: {v}" for k, v in (rec.get("tools") or {}).items())),
             ]
    for warning in qdisc.get("warnings") or []:
        pairs.append(("qdisc warning", warning))
    return [(k, "" if v is None else v) for k, v in pairs]


def metrics_table(run, rows):
    """The run's metrics as an HTML table (class ``metrics``, ``data-run`` = its dir)."""
    body = "".join(
        f"<tr><td>{_e(r['scope'])}</td><td>{_e(r['name'])}</td><td>{_e(r['metric'])}</td>"
        f"<td class=num>{_e(format_value(r['value']))}</td><td>{_e(r.get('unit', ''))}</td></tr>"
        for r in rows if r.get("value") is not None)
    return (f'<table class="metrics" data-run="{_e(run.dir)}"><tr><th>scope</th><th>name'
            f"</th><th>metric</th><th>value</th><th>unit</th></tr>{body}</table>")


def _flags_html(items):
    if not items:
        return "<p class=ok>No result contradicts theory beyond the tolerances.</p>"
    return "<div class=flags><ul>" + "".join(f"<li>{_e(x)}</li>" for x in items) + \
        "</ul></div>"


def _verdict(run):
    return (run.record.get("health") or {}).get("verdict", "unknown")


def _health_html(runs, base):
    """The report's first word: did the emulator keep up in every run?"""
    counts = {}
    for run in runs:
        counts[_verdict(run)] = counts.get(_verdict(run), 0) + 1
    text = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    bad = [r for r in runs if _verdict(r) == "degraded"]
    if not bad:
        return f"<p class=ok>Health: {_e(text)}.</p>"
    items = "".join(
        f"<li>{_e(run_label(r))} <span class=muted>({_e(os.path.relpath(r.dir, base))})"
        f"</span>: {_e('; '.join((r.record.get('health') or {}).get('problems', [])))}</li>"
        for r in bad)
    return (f"<div class=flags><p><b>Health: {_e(text)}.</b> In a degraded run the "
            "emulator fell behind: it measured the emulator, not the network. Such runs are "
            "shown and marked here, and left out of every mean, table and sweep figure "
            "(set BUFFERBLOAT_INCLUDE_DEGRADED=1 to include them).</p>"
            f"<ul>{items}</ul></div>")


def _flent_export(run, idx, out):
    """Export the run for flent beside the page; the link's relative path, or None for a
    run flent has no test for (no TCP flow and no probe)."""
    from bufferbloat.flentexport import SUFFIX, export_flent
    scn = (run.record.get("scenario") or {}).get("name") or "run"
    folder = os.path.join(os.path.dirname(out), FLENT_DIR)
    os.makedirs(folder, exist_ok=True)
    try:
        path = export_flent(run.dir, os.path.join(folder, f"{idx}-{scn}{SUFFIX}"))
    except UsageError:
        return None
    return os.path.relpath(path, os.path.dirname(out))


def _run_section(run, idx, names, flent_href=None):
    rows = run_metrics(run)
    warn = flags(run, rows)
    figs = draw_figures(run, names)
    parts = [f'<section class="run" id="run-{idx}"><h2>Run: {_e(run_label(run))}'
             f' [{_e(_verdict(run))}]</h2>',
             f"<p class=muted>{_e(caption(run))}</p>", _flags_html(warn),
             "<h3>Configuration</h3>", _kv_table(config_pairs(run))]
    if flent_href:
        parts.append(f'<p>For flent: <a class="flent" href="{_e(flent_href)}">'
                     f"{_e(os.path.basename(flent_href))}</a> "
                     f"(<code>flent -i FILE -p totals -o totals.png</code>)</p>")
    parts.append("<h3>Figures</h3>")
    parts += [_img(fig, f"{name}: {run_label(run)}") for name, fig in figs.items()]
    if not figs:
        parts.append("<p class=muted>No series to draw.</p>")
    parts += ["<h3>Metrics</h3>", metrics_table(run, rows), "</section>"]
    return "\n".join(parts), warn


def _sweep_table_html(rows):
    cols = _sweep.TABLE_COLUMNS
    head = "".join(f"<th>{_e(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{_e(_sweep._fmt(r.get(c)))}</td>" for c in cols)
                   + "</tr>" for r in rows)
    return f'<table class="sweep"><tr>{head}</tr>{body}</table>'


def _kind(path):
    """``run``, ``sweep`` (an index with ``vary``), ``results`` (another index) or
    ``runs`` (a directory holding runs)."""
    if os.path.isfile(os.path.join(path, RESULT_FILE)):
        return "run"
    index = os.path.join(path, _sweep.INDEX_FILE)
    if os.path.isfile(index):
        try:
            with open(index) as f:
                return "sweep" if "vary" in json.load(f) else "results"
        except ValueError:
            return "results"
    return "runs"


def write_report(path, out=None):
    """Write the HTML report of ``path`` (a run directory, a sweep directory, a results
    tree with index.json, or any directory holding runs) to ``out`` (default
    ``PATH/report.html``); returns the HTML path. Raises UsageError when ``path`` holds
    no run."""
    path = os.path.abspath(str(path))
    if not os.path.isdir(path):
        raise UsageError(f"{path}: not a run, sweep or results directory")
    kind = _kind(path)
    out = out or os.path.join(path, REPORT_FILE)
    if kind == "run":
        runs, groups = [load_run(path)], {}
    else:
        points = _sweep.load_points(path)   # UsageError when there is no run
        runs = [p.run for p in points]
        groups = {scn: pts for scn, pts in _sweep.by_scenario(points).items()}
    body, all_flags = [], []

    for scn, pts in groups.items():
        keys = _sweep.by_key(pts)
        body.append(f'<section class="sweep" id="sweep-{_e(scn)}"><h2>{_e(scn)}: '
                    f"{len(pts)} runs, {len(keys)} points, "
                    f"{_e(_sweep.setting_label(pts))}"
                    + (f" (varied: {_e(', '.join(_sweep.swept_params(pts)))})"
                       if _sweep.swept_params(pts) else "") + "</h2>")
        rows = _sweep.table_rows(pts)
        csv_path, md_path = _sweep.write_tables(
            pts, os.path.join(os.path.dirname(out), TABLES_DIR), stem=scn)
        rel = lambda p: os.path.relpath(p, os.path.dirname(out))  # noqa: E731
        body.append(_sweep_table_html(rows))
        body.append(f'<p>Tables: <a href="{_e(rel(csv_path))}">CSV</a>, '
                    f'<a href="{_e(rel(md_path))}">Markdown</a></p>')
        if len(pts) > 1:
            body += [_img(fig, f"{name}: {scn}") for name, fig in _sweep.draw_all(pts).items()]
        body.append("</section>")

    for i, run in enumerate(runs):
        if kind == "run":
            names = None
        else:
            names = scenario_figures(run) or [n for n in DEFAULT_RUN_FIGURES if n in FIGURES]
        section, warn = _run_section(run, i, names, _flent_export(run, i, out))
        body.append(section)
        all_flags += [f"{run_label(run)} ({os.path.relpath(run.dir, path) or '.'}): {w}"
                      for w in warn]

    toc = "".join(f'<li><a href="#run-{i}">{_e(run_label(r))}</a> [{_e(_verdict(r))}] '
                  f'<span class=muted>{_e(os.path.relpath(r.dir, path))}</span></li>'
                  for i, r in enumerate(runs))
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>bufferbloat report: {_e(os.path.basename(path))}</title>
<style>{_CSS}</style>
<script>{_CHECK_SCRIPT}</script>
</head><body>
<h1>bufferbloat report: {_e(path)}</h1>
<p>{_e(kind)}, {len(runs)} run(s); generated {_e(now)} from the stored results only.</p>
<div id="image-check" data-images="" data-broken="">(figures not checked yet)</div>
<h2>Health</h2>
{_health_html(runs, path)}
<h2>Flags</h2>
{_flags_html(all_flags)}
<h2>Runs</h2><ol>{toc}</ol>
{chr(10).join(body)}
</body></html>
"""
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = f"{out}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(page)
    os.replace(tmp, out)
    return out
