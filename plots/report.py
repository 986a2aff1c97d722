"""One self-contained HTML page for a run, a sweep or a whole results tree.

:func:`write_report` writes ``DIR/report.html``: figures embedded as base64 PNG (no
external URL, nothing beside it is needed to view it), the flags (:mod:`plots.flags`),
for every set of runs of a scenario the sweep figures and the table of key metrics per
point (also written beside the page as ``report-tables/SCENARIO.csv`` and ``.md``), and
for every run its configuration (scenario, params, qdisc, knobs, overrides, machine,
kernel, host or VM, tools) and its metrics table (``<table class="metrics"
data-run=...>``).

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
from bufferbloat.results import load_run

from . import DEFAULT_RUN_FIGURES, FIGURES, draw_figures, scenario_figures, tree_kind
from . import sweep as _sweep
from .common import caption, run_label, run_metrics
from .flags import flags

REPORT_FILE = "report.html"
TABLES_DIR = "report-tables"

CSS = """
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


def esc(text):
    return html.escape(str(text), quote=True)


def figure_html(fig, alt):
    """``<figure>`` with ``fig`` as an inline base64 PNG."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return (f'<figure><img alt="{esc(alt)}" src="data:image/png;base64,{data}">'
            f"<figcaption class=muted>{esc(alt)}</figcaption></figure>")


def _kv_table(pairs, cls="config"):
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in pairs)
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
        f"<tr><td>{esc(r['scope'])}</td><td>{esc(r['name'])}</td><td>{esc(r['metric'])}</td>"
        f"<td class=num>{esc(format_value(r['value']))}</td><td>{esc(r.get('unit', ''))}</td></tr>"
        for r in rows if r.get("value") is not None)
    return (f'<table class="metrics" data-run="{esc(run.dir)}"><tr><th>scope</th><th>name'
            f"</th><th>metric</th><th>value</th><th>unit</th></tr>{body}</table>")


def _flags_html(items):
    if not items:
        return "<p class=ok>No result contradicts theory beyond the tolerances.</p>"
    return "<div class=flags><ul>" + "".join(f"<li>{esc(x)}</li>" for x in items) + \
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
        return f"<p class=ok>Health: {esc(text)}.</p>"
    items = "".join(
        f"<li>{esc(run_label(r))} <span class=muted>({esc(os.path.relpath(r.dir, base))})"
        f"</span>: {esc('; '.join((r.record.get('health') or {}).get('problems', [])))}</li>"
        for r in bad)
    return (f"<div class=flags><p><b>Health: {esc(text)}.</b> In a degraded run the "
            "emulator fell behind: it measured the emulator, not the network. Such runs are "
            "shown and marked here, and left out of every mean, table and sweep figure "
            "(set BUFFERBLOAT_INCLUDE_DEGRADED=1 to include them).</p>"
            f"<ul>{items}</ul></div>")


def _run_section(run, idx, names):
    rows = run_metrics(run)
    warn = flags(run, rows)
    figs = draw_figures(run, names)
    parts = [f'<section class="run" id="run-{idx}"><h2>Run: {esc(run_label(run))}'
             f' [{esc(_verdict(run))}]</h2>',
             f"<p class=muted>{esc(caption(run))}</p>", _flags_html(warn),
             "<h3>Configuration</h3>", _kv_table(config_pairs(run)),
             "<h3>Figures</h3>"]
    parts += [figure_html(fig, f"{name}: {run_label(run)}") for name, fig in figs.items()]
    if not figs:
        parts.append("<p class=muted>No series to draw.</p>")
    parts += ["<h3>Metrics</h3>", metrics_table(run, rows), "</section>"]
    return "\n".join(parts), warn


def _sweep_table_html(rows):
    cols = _sweep.TABLE_COLUMNS
    head = "".join(f"<th>{esc(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{esc(_sweep._fmt(r.get(c)))}</td>" for c in cols)
                   + "</tr>" for r in rows)
    return f'<table class="sweep"><tr>{head}</tr>{body}</table>'


def write_report(path, out=None, progress=None):
    """Write the HTML report of ``path`` (a run directory, a sweep directory, a results
    tree with index.json, or any directory holding runs) to ``out`` (default
    ``PATH/report.html``); returns the HTML path. Raises UsageError when ``path`` holds
    no run."""
    path = os.path.abspath(str(path))
    if not os.path.isdir(path):
        raise UsageError(f"{path}: not a run, sweep or results directory")
    kind = tree_kind(path)
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
        body.append(f'<section class="sweep" id="sweep-{esc(scn)}"><h2>{esc(scn)}: '
                    f"{len(pts)} runs, {len(keys)} points, "
                    f"{esc(_sweep.setting_label(pts))}"
                    + (f" (varied: {esc(', '.join(_sweep.swept_params(pts)))})"
                       if _sweep.swept_params(pts) else "") + "</h2>")
        rows = _sweep.table_rows(pts)
        csv_path, md_path = _sweep.write_tables(
            pts, os.path.join(os.path.dirname(out), TABLES_DIR), stem=scn)
        rel = lambda p: os.path.relpath(p, os.path.dirname(out))  # noqa: E731
        body.append(_sweep_table_html(rows))
        body.append(f'<p>Tables: <a href="{esc(rel(csv_path))}">CSV</a>, '
                    f'<a href="{esc(rel(md_path))}">Markdown</a></p>')
        if len(pts) > 1:
            body += [figure_html(fig, f"{name}: {scn}") for name, fig in _sweep.draw_all(pts).items()]
        body.append("</section>")

    for i, run in enumerate(runs):
        if progress:
            progress(f"report: run {i + 1}/{len(runs)}")
        if kind == "run":
            names = None
        else:
            names = scenario_figures(run) or [n for n in DEFAULT_RUN_FIGURES if n in FIGURES]
        section, warn = _run_section(run, i, names)
        body.append(section)
        all_flags += [f"{run_label(run)} ({os.path.relpath(run.dir, path) or '.'}): {w}"
                      for w in warn]

    toc = "".join(f'<li><a href="#run-{i}">{esc(run_label(r))}</a> [{esc(_verdict(r))}] '
                  f'<span class=muted>{esc(os.path.relpath(r.dir, path))}</span></li>'
                  for i, r in enumerate(runs))
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>bufferbloat report: {esc(os.path.basename(path))}</title>
<style>{CSS}</style>
<script>{_CHECK_SCRIPT}</script>
</head><body>
<h1>bufferbloat report: {esc(path)}</h1>
<p>{esc(kind)}, {len(runs)} run(s); generated {esc(now)} from the stored results only.</p>
<div id="image-check" data-images="" data-broken="">(figures not checked yet)</div>
<h2>Health</h2>
{_health_html(runs, path)}
<h2>Flags</h2>
{_flags_html(all_flags)}
<h2>Runs</h2><ol>{toc}</ol>
{chr(10).join(body)}
</body></html>
"""
    return write_page(out, page)


def write_page(path, page):
    """Write the HTML text ``page`` to ``path`` (write, then rename); returns ``path``."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(page)
    os.replace(tmp, path)
    return path
