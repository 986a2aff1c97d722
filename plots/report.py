"""One HTML page for a run, a sweep or a whole results tree, shaped by the studies.

:func:`write_report` writes ``DIR/report.html``: first the health verdict of every run,
then one section per study (a set of runs of one scenario and setting): the study it
reproduces and its expected result, the study's own figures (:mod:`plots.study`), each
with a one-line reading computed from the data ("queueing delay, mean: buffer_pkts=20
98 ms, buffer_pkts=100 380 ms (theory 161-807 ms)"), the headline metrics per sweep
point with theory, the table of key metrics per point (also written beside the page as
``report-tables/SCENARIO.csv`` and ``.md``), the health of its runs and their flags
(:mod:`plots.flags`); folded below it, every metric-vs-parameter plot and each run
(configuration: scenario, params, qdisc, knobs, overrides, machine, kernel, host or VM,
tools; its figures; its metrics table ``<table class="metrics" data-run=...>``).

The figures are files under the runs and the sets' directories (:mod:`plots.render`:
drawn once, in parallel, kept while fresh). The studies' figures are embedded (base64
PNG), the folded ones linked by their relative path, so the page stays small; a one-run
report embeds all of them. No external URL. Each run links its flent data file
(``report-flent/N-SCENARIO.flent.gz`` beside the page, :mod:`bufferbloat.results.flentexport`;
``flent -i FILE -p totals``).

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
import urllib.parse

from bufferbloat.core.atomic import write_text_atomic
from bufferbloat.core.errors import WARNINGS, UsageError, warnings_since
from bufferbloat.net import scaling
from bufferbloat.plots import (
    DEFAULT_RUN_FIGURES,
    FIGURES,
    render,
    scenario_figures,
    set_targets,
    sweep_tables,
    tree_kind,
    warn_missing,
)
from bufferbloat.plots import study as _study
from bufferbloat.plots import sweep as _sweep
from bufferbloat.plots.common import caption, run_label, run_metrics
from bufferbloat.plots.flags import flags
from bufferbloat.results import cost, headline
from bufferbloat.results.flentexport import SUFFIX, export_flent
from bufferbloat.results.health import NOT_MEASURED
from bufferbloat.results.metrics import METRICS_VERSION, format_value
from bufferbloat.results.records import load_run
from bufferbloat.run import identity
from bufferbloat.run.index import read_index
from bufferbloat.run.plan import set_aside
from bufferbloat.scenarios import catalogue

REPORT_FILE = "report.html"
TABLES_DIR = "report-tables"
#: where a report of a plain directory of runs puts its studies' figures (beside it)
FIGURES_DIR_OF_REPORT = "report-figures"
#: where the runs' flent data files go, beside the page
FLENT_DIR = "report-flent"

CSS = """
body{font-family:sans-serif;margin:1.5em;max-width:1200px;color:#222}
h1{font-size:1.5em}h2{font-size:1.25em;border-bottom:1px solid #ccc;margin-top:2em}
h3{font-size:1.05em}
table{border-collapse:collapse;margin:.5em 0;font-size:.85em}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}
td.num{text-align:right}
figure{display:inline-block;margin:.5em;max-width:48%;vertical-align:top}
img{max-width:100%}figcaption{font-size:.85em}
h4{font-size:.95em}section.run{border-left:3px solid #ddd;padding-left:.8em}
.flags{background:#fff3cd;border:1px solid #e0c060;padding:.5em 1em}
.ok{color:#2a7a2a}.muted{color:#777}
details{margin:.5em 0}
.scroll{overflow-x:auto;max-width:100%}
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


def figure_html(fig, alt, reading=None):
    """``<figure>`` with ``fig`` (a Figure, or the path of a PNG file) as an inline
    base64 PNG; ``reading``: a line under it, in bold."""
    if isinstance(fig, str):
        with open(fig, "rb") as f:
            data = f.read()
    else:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=80)
        data = buf.getvalue()
    data = base64.b64encode(data).decode("ascii")
    return (f'<figure><img alt="{esc(alt)}" src="data:image/png;base64,{data}">'
            + _caption(alt, reading) + "</figure>")


def linked_figure_html(path, alt, base):
    """``<figure>`` showing the file ``path`` by its path relative to the page's
    directory ``base`` (the file stays beside the run; the page stays small)."""
    rel = os.path.relpath(path, base).replace(os.sep, "/")
    src = "/".join(urllib.parse.quote(part) for part in rel.split("/"))
    return (f'<figure><img alt="{esc(alt)}" src="{esc(src)}">'
            + _caption(alt, None) + "</figure>")


def _caption(alt, reading):
    text = f"<b>{esc(reading)}</b><br>" if reading else ""
    return f"<figcaption>{text}<span class=muted>{esc(alt)}</span></figcaption>"


def scroll(table_html):
    """A table in its own box that scrolls sideways when it is wider than the page."""
    return f'<div class="scroll">{table_html}</div>'


def _kv_table(pairs, cls="config"):
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in pairs)
    return scroll(f'<table class="{cls}">{rows}</table>')


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
             ("status", (rec.get("status") or "not recorded")
              + (f" ({rec.get('error')})" if rec.get("error") else "")),
             ("started", rec.get("started") or "not recorded"),
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
    scaled = scaling.evidence_lines(rec.get("scaling"), scn.get("family"))
    if scaled:
        pairs.append(("rate scaling", " ".join(line.strip() for line in scaled)))
    for warning in qdisc.get("warnings") or []:
        pairs.append(("qdisc warning", warning))
    return [(k, "" if v is None else v) for k, v in pairs]


def metrics_table(run, rows):
    """The run's metrics as an HTML table (class ``metrics``, ``data-run`` = its dir),
    after a note when they were recomputed because older code had stored them."""
    body = "".join(
        f"<tr><td>{esc(r['scope'])}</td><td>{esc(r['name'])}</td><td>{esc(r['metric'])}</td>"
        f"<td class=num>{esc(format_value(r['value']))}</td><td>{esc(r.get('unit', ''))}</td></tr>"
        for r in rows if r.get("value") is not None)
    note = ""
    if getattr(run, "metrics_recomputed", False):
        note = (f'<p class="muted recomputed">Recomputed from the series by the current code '
                f"(metrics version {METRICS_VERSION}): the stored metrics.json was computed "
                f"by older code (version {esc(run.metrics_version)}) and is not used."
                "</p>")
    return note + scroll(f'<table class="metrics" data-run="{esc(run.dir)}"><tr><th>scope'
                         f"</th><th>name</th><th>metric</th><th>value</th><th>unit</th></tr>"
                         f"{body}</table>")


def _flags_html(items):
    if not items:
        return "<p class=ok>No result contradicts theory beyond the tolerances.</p>"
    return "<div class=flags><ul>" + "".join(f"<li>{esc(x)}</li>" for x in items) + \
        "</ul></div>"


def _verdict(run):
    return (run.record.get("health") or {}).get("verdict", "unknown")


def _verdicts(runs):
    counts = {}
    for run in runs:
        counts[_verdict(run)] = counts.get(_verdict(run), 0) + 1
    return ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))


def _health_lines(run):
    """What a run's health names: its faults (a part began early), then its problems."""
    health = run.record.get("health") or {}
    return health.get("faults", []) + health.get("problems", [])


def _health_html(runs, base):
    """The report's first word: did the emulator keep up in every run?"""
    text = _verdicts(runs)
    bad = [r for r in runs if _verdict(r) in NOT_MEASURED]
    if not bad:
        return f"<p class=ok>Health: {esc(text)}.</p>"
    items = "".join(
        f"<li>{esc(run_label(r))} <span class=muted>({esc(os.path.relpath(r.dir, base))})"
        f"</span>{' (set aside: its point was run again)' if set_aside(r.dir) else ''}: "
        f"{esc('; '.join(_health_lines(r)))}</li>"
        for r in bad)
    return (f"<div class=flags><p><b>Health: {esc(text)}.</b> In a degraded run the "
            "emulator fell behind: it measured the emulator, not the network; in a faulty "
            "run a part began before its due time. Such runs are "
            "shown and marked here, and left out of every mean, table and sweep figure "
            "(set BUFFERBLOAT_INCLUDE_DEGRADED=1 to include them).</p>"
            f"<ul>{items}</ul></div>")


def _steady_html(pts):
    """The runs whose headline series never settled (their health's ``not_steady``):
    judged over their second half, said, never silently averaged as if steady."""
    moving = [(p.run, (p.run.record.get("health") or {}).get("not_steady")) for p in pts]
    moving = [(run, why) for run, why in moving if why]
    if not moving:
        return []
    items = "".join(f"<li>{esc(run_label(run))}: {esc(why)}</li>" for run, why in moving)
    # the full profile's runs are the study's own length: a longer one is not on offer
    longer = ("a longer run (the full profile) would settle them"
              if any(run.record.get("profile") != "full" for run, _ in moving) else
              "they are the study's own length: their second half is what is judged")
    return [f"<div class=flags><p><b>Not at steady state: {len(moving)} of {len(pts)} "
            f"runs.</b> Their controllers were still moving at the run's end; {longer}."
            f"</p><ul>{items}</ul></div>"]


def _sweep_index(run_dir):
    """The sweep index above ``run_dir`` (``SCENARIO/sweep/index.json``), or None."""
    here = os.path.dirname(run_dir)
    for _ in range(6):
        try:
            index = read_index(here)
        except UsageError:          # a corrupt index: the report says nothing of it
            return None
        if index is not None:
            return index
        here = os.path.dirname(here)
    return None


def _precision_html(pts):
    """With ``--precision``: the rule, and the points that stopped at ``--max-reps``
    without reaching it (the sweep index's ``precision``)."""
    index = _sweep_index(pts[0].run.dir)
    judged = (index or {}).get("precision")
    if not judged:
        return []
    labels = {p.run.config_key: run_label(p.run) for p in pts}
    short = [(key, c) for key, c in judged.get("configs", {}).items()
             if c.get("why") == "max-reps" and key in labels]
    text = (f"Precision: {esc(judged.get('rule', ''))}; {len(judged.get('configs', {}))} "
            "point(s) judged")
    if not short:
        return [f"<p class=ok>{text}, every one precise.</p>"]
    items = "".join(f"<li>{esc(labels[key])}: stopped at --max-reps after {c.get('runs')} "
                    "healthy runs without reaching the precision</li>" for key, c in short)
    return [f"<div class=flags><p><b>{text}; {len(short)} stopped at --max-reps.</b></p>"
            f"<ul>{items}</ul></div>"]


def _cost_html(sets):
    """What the runs cost beyond their traffic, per set (:mod:`bufferbloat.results.cost`):
    the point wall time against the traffic, from each run's own record."""
    rows, total = cost.table({scn: [p.run.record for p in pts] for scn, pts in sets.items()})
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cost.fmt_row(r)) + "</tr>"
                   for r in rows + ([total] if len(rows) > 1 else []))
    head = "".join(f"<th>{esc(h)}</th>" for h in cost.HEADER)
    return ("<p class=muted>Each run's wall time (set-up to last write) against its traffic "
            "time, from its result.json (<code>wall_s</code>, <code>duration_s</code>, "
            "<code>phases_s</code>); every attempt that ended ok counts, a degraded one run "
            "again too; the runs that did not (failed, interrupted) are counted apart.</p>" + scroll(f"<table><tr>{head}</tr>{body}</table>"))


def _warnings_html(items):
    """The warnings said while the report was made (records read in part, metrics
    recomputed, series or runs missing), as on stderr; '' when there were none."""
    if not items:
        return ""
    return ('<h2>Warnings</h2><div class="flags" id="warnings"><ul>'
            + "".join(f"<li>warning: {esc(w)}</li>" for w in items) + "</ul></div>")


def _flent_export(run, idx, out):
    """Export the run for flent beside the page; the link's relative path, or None for a
    run flent has no test for (no TCP flow and no probe)."""
    scn = (run.record.get("scenario") or {}).get("name") or "run"
    folder = os.path.join(os.path.dirname(out), FLENT_DIR)
    os.makedirs(folder, exist_ok=True)
    target = os.path.join(folder, f"{idx}-{scn}{SUFFIX}")
    try:
        path = export_flent(run.dir, target)
    except OSError as exc:
        if exc.filename == target:      # its writing failed (a full disk): the report's
            raise                        # failure, not the run's
        return None
    except (UsageError, KeyError, ValueError):  # a run flent cannot take (e.g. no wall
        return None                              # clock recorded)
    return os.path.relpath(path, os.path.dirname(out))


def _run_section(run, idx, rows, warn, figures, base, embed, flent_href=None):
    """A run's section: caption, flags, configuration, figures (``figures``: {name:
    file}, linked relative to ``base``; with ``embed``, a one-run report, they are the
    study's, embedded above), metrics table."""
    label = run_label(run)
    parts = [f'<section class="run" id="run-{idx}"><h3>Run: {esc(label)}'
             f' [{esc(_verdict(run))}]</h3>',
             f"<p class=muted>{esc(caption(run))}</p>", _flags_html(warn),
             "<h4>Configuration</h4>", _kv_table(config_pairs(run))]
    if flent_href:
        parts.append(f'<p>For flent: <a class="flent" href="{esc(flent_href)}">'
                     f"{esc(os.path.basename(flent_href))}</a> "
                     f"(<code>flent -i FILE -p totals -o totals.png</code>)</p>")
    parts.append("<h4>Figures</h4>")
    if embed:       # a one-run report: its figures stand for its study, above
        parts.append("<p class=muted>Shown above.</p>" if figures else
                     "<p class=muted>No series to draw.</p>")
    else:
        parts += [linked_figure_html(path, f"{name}: {label}", base)
                  for name, path in figures.items()]
        if not figures:
            parts.append("<p class=muted>No series to draw.</p>")
    parts += ["<h4>Metrics</h4>", metrics_table(run, rows), "</section>"]
    return "\n".join(parts)


def _sweep_table_html(rows):
    cols = sweep_tables.TABLE_COLUMNS
    head = "".join(f"<th>{esc(c)}</th>" for c in cols)
    cell = sweep_tables.table_cell
    body = "".join("<tr>" + "".join(f"<td>{esc(cell(r.get(c)))}</td>" for c in cols)
                   + "</tr>" for r in rows)
    return scroll(f'<table class="sweep"><tr>{head}</tr>{body}</table>')


def _headline_table_html(points):
    """The set's headline metrics per sweep point (mean ± std over repetitions, theory)."""
    entries, rows = _study.headline_rows(points)
    head = "".join(f"<th>{esc(h)}</th>" for h in
                   ["point", "runs (averaged/all)"] + [e["label"] for e in entries])
    body = "".join("<tr>" + f"<td>{esc(r['point'])}</td><td>{esc(r['reps'])}</td>"
                   + "".join(f"<td class=num>{esc(_study.cell(*v))}</td>" for v in r["values"])
                   + "</tr>" for r in rows)
    expect = "".join(f"<li><b>{esc(e['label'])}</b>: {esc(e['expect'])}</li>"
                     for e in entries)
    return (scroll(f'<table class="headline"><tr>{head}</tr>{body}</table>')
            + f"<details><summary>expected shape of each</summary><ul>{expect}</ul>"
            "</details>")


def _scenario(points):
    return _sweep.scenario_of(points[0].scenario)


def _study_html(name, pts, drawn, base, out, run_parts, flag_lines):
    """A study's section: what it reproduces and expects, its own figures with their
    readings, its headline table, health and flags, then the exhaustive plots and the
    runs behind folds."""
    scn = _scenario(pts)
    keys = _sweep.by_key(pts)
    varied = _sweep.swept_params(pts)
    title = f"{scn.study} ({name})" if scn is not None and scn.study else name
    parts = [f'<section class="study" id="study-{esc(name)}"><h2>{esc(title)}</h2>',
             f"<p class=muted>{len(pts)} runs, {len(keys)} points, "
             f"{esc(_sweep.setting_label(pts))}"
             + (f"; varied: {esc(', '.join(varied))}" if varied else "") + "</p>"]
    if scn is not None and scn.expect:
        parts.append(f"<p><b>Expected:</b> {esc(scn.expect)}</p>")
    health = _verdicts([p.run for p in pts])
    cls = ("flags" if any(v in health for v in NOT_MEASURED) else
           "ok" if all(_verdict(p.run) == "healthy" for p in pts) else "muted")
    parts.append(f"<p class={cls}>Health: {esc(health)}.</p>")
    parts += _steady_html(pts) + _precision_html(pts)
    what = {e["plot"]: e for e in (scn.reproduce if scn else ()) if e.get("plot")}
    figs = []
    for plot, path in drawn["study"].items():
        fn, selectors = _study.plot_entry(plot)
        entry = what.get(plot, {})
        alt = f"{_study.file_name(plot)}: {name}" + (
            f" ({entry['figure']}; {entry['command']})" if entry else "")
        figs.append(figure_html(path, alt, _study.reading(pts, selectors)))
    if not figs and len(keys) == 1 and run_parts:
        # one setting (a single run): its own figures are the study's
        first = run_parts[0]
        figs = [figure_html(path, f"{n}: {run_label(first['run'])}",
                            _study.reading(pts, [e["metric"] for e in
                                                 headline.declared(first["run"], catalogue())][:2])
                            if i == 0 else None)
                for i, (n, path) in enumerate(first["figures"].items())]
    parts += figs
    parts += ["<h3>Headline metrics</h3>", _headline_table_html(pts)]
    table_rows = sweep_tables.table_rows(pts)
    # the sweep table, and a study's own beside it (D's): a CSV and a Markdown file each
    paths = sweep_tables.write_tables(pts, os.path.join(os.path.dirname(out), TABLES_DIR),
                                stem=name)
    rel = lambda p: os.path.relpath(p, os.path.dirname(out))  # noqa: E731
    links = ", ".join(f'<a href="{esc(rel(p))}">{esc(os.path.basename(p))}</a>'
                      for p in paths)
    parts += ["<h3>Table</h3>", _sweep_table_html(table_rows), f"<p>Tables: {links}</p>"]
    parts += [f"<h3>Flags ({len(flag_lines)})</h3>", _flags_html(flag_lines)]
    if drawn["more"]:
        parts.append(f"<details><summary>Every metric against every swept parameter, box "
                     f"plots ({len(drawn['more'])} figures)</summary>")
        parts += [linked_figure_html(path, f"{n}: {name}", base)
                  for n, path in drawn["more"].items()]
        parts.append("</details>")
    parts.append(f"<details><summary>Each run ({len(run_parts)}): configuration, figures, "
                 "metrics</summary>")
    parts += [r["html"] for r in run_parts]
    parts += ["</details>", "</section>"]
    return "\n".join(parts)


def write_report(path, out=None, progress=None):
    """Write the HTML report of ``path`` (a run directory, a sweep directory, a results
    tree with index.json, or any directory holding runs) to ``out`` (default
    ``PATH/report.html``); returns the HTML path. Raises UsageError when ``path`` holds
    no run.

    Per study (a set of runs of one scenario and setting): what it reproduces and
    expects, its own figures each with a one-line reading from the data, its headline
    table, health and flags; then, folded, every metric-vs-parameter plot and each run
    (configuration, figures, metrics). Figures are files drawn once (in parallel; kept
    when fresh: :mod:`plots.render`) under each run's and set's directory; the
    studies' figures are embedded, the folded ones linked (a one-run report embeds
    everything)."""
    mark = len(WARNINGS)
    path = os.path.abspath(str(path))
    if not os.path.isdir(path):
        raise UsageError(f"{path}: not a run, sweep or results directory")
    kind = tree_kind(path)
    out = os.path.abspath(out or os.path.join(path, REPORT_FILE))
    base = os.path.dirname(out)
    say = progress or (lambda text: None)
    if kind == "run":
        points = [_sweep.Point(load_run(path), {}, 1)]
        points[0].rows = run_metrics(points[0].run)
    else:
        points = _sweep.load_points(path)   # UsageError when there is no run
    runs = [p.run for p in points]
    say(f"report: {len(runs)} run(s) in {path}")
    jobs = [(run.dir, None if kind == "run" else
             (scenario_figures(run) or [n for n in DEFAULT_RUN_FIGURES if n in FIGURES]),
             "png", True) for run in runs]
    sets = _sweep.by_scenario(points)
    targets = ({} if kind == "run" else
               {scn: target for scn, _, target in
                set_targets(path, points, None if kind in ("sweep", "results") else
                            os.path.join(base, FIGURES_DIR_OF_REPORT))})
    done_runs, drawn_sets = render.draw(
        jobs, [(pts, targets[scn], scn, "png", True, True) for scn, pts in sets.items()
               if scn in targets], say)
    run_figs = dict(zip((r.dir for r in runs), done_runs))
    for run in runs:
        warn_missing(run, run_figs[run.dir])
    drawn = dict(zip([scn for scn in sets if scn in targets], drawn_sets))
    body, toc, idx = [], [], 0
    for scn, pts in sets.items():
        run_parts, flag_lines = [], []
        for p in pts:
            warn = flags(p.run, p.rows)
            flag_lines += [f"{run_label(p.run)} ({os.path.relpath(p.run.dir, path) or '.'}): "
                           f"{w}" for w in warn]
            run_parts.append({"run": p.run, "figures": run_figs[p.run.dir],
                              "html": _run_section(p.run, idx, p.rows, warn,
                                                   run_figs[p.run.dir], base,
                                                   embed=kind == "run",
                                                   flent_href=_flent_export(p.run, idx, out))})
            idx += 1
        section = _study_html(scn, pts, drawn.get(scn, {"study": {}, "more": {}}), base,
                              out, run_parts, flag_lines)
        if kind == "run":      # one run: its details open
            section = section.replace("<details><summary>Each run", "<details open>"
                                      "<summary>Each run", 1)
        body.append(section)
        first = next(iter(drawn.get(scn, {}).get("study", {})), None)
        line = (_study.reading(pts, _study.plot_entry(first)[1]) if first else
                _study.reading(pts, [e["metric"] for e in headline.declared(pts[0].run, catalogue())][:2]))
        toc.append(f'<li><a href="#study-{esc(scn)}">{esc(scn)}</a> '
                   f'[{esc(_verdicts([p.run for p in pts]))}]: {esc(line)}</li>')
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>bufferbloat report: {esc(os.path.basename(path))}</title>
<style>{CSS}</style>
<script>{_CHECK_SCRIPT}</script>
</head><body>
<h1>bufferbloat report: {esc(path)}</h1>
<p>{esc(kind)}, {len(runs)} run(s), {len(sets)} stud{'y' if len(sets) == 1 else 'ies'};
generated {esc(now)} from the stored results only.</p>
<div id="image-check" data-images="" data-broken="">(figures not checked yet)</div>
{_warnings_html(warnings_since(mark))}
<h2>Health</h2>
{_health_html(runs, path)}
<h2>Studies</h2><ol>{"".join(toc)}</ol>
<p><a href="#cost">What the runs cost</a> (the last section).</p>
{chr(10).join(body)}
<h2 id="cost">Cost</h2>
{_cost_html(sets)}
</body></html>
"""
    say("report: written")
    return write_page(out, page)


def write_page(path, page):
    """Write the HTML text ``page`` to ``path`` whole (:mod:`bufferbloat.core.atomic`: a
    failed write leaves the previous page and no temporary file); returns ``path``."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_text_atomic(path, page)
    return path
