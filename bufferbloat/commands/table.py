"""The ``bufferbloat`` program's commands as data (:data:`COMMANDS`): each one's name, its
line in the program's list of commands, its description and examples, its arguments in
the order its --help shows them, and its handler, named ``module:function`` and imported
only when the command runs. ``bufferbloat.cli.parser`` builds the parser from it.

An argument is :func:`arg` (``add_argument``'s own parameters); a group of options of
which at most one may be given is :func:`one_of`. The options several commands share
(``--out``, ``--quick``, ``--retry-degraded``, ``--host``/``--vm``, ``--cluster``/
``--workers``) are written once, below.
"""

import importlib
from collections import namedtuple

#: a subcommand: ``summary`` in the program's list of commands, ``description`` (one
#: paragraph, filled) and ``examples`` (lines) on its own --help, ``arguments`` (each an
#: :class:`Arg` or a :class:`OneOf`), ``handler`` ("module:function", called with the
#: parsed arguments, returns the exit code)
Command = namedtuple("Command", "name summary description examples arguments handler")
#: an argument: ``add_argument(*flags, **options)``
Arg = namedtuple("Arg", "flags options")
#: mutually exclusive options, and the parser's defaults that go with them
OneOf = namedtuple("OneOf", "args defaults")


def arg(*flags, **options):
    return Arg(flags, options)


def one_of(*args, defaults=None):
    return OneOf(args, defaults or {})


DESCRIPTION = """\
Emulate a bottleneck link with Mininet, run the studies of bufferbloat and active queue
management (FIFO, PIE, CoDel, fq_codel, RED, ...) on it, and read what they recorded:
metrics, figures, HTML reports, comparisons, flent files.

Commands that build networks (run, sweep, run-all) need root and Mininet; they move into
the project VM by themselves when this kernel lacks what a scenario needs. The others
(list, describe, show, plot, report, compare, export) read stored results only."""

EPILOG = """\
examples:
  bufferbloat list                          the scenarios, one line each
  bufferbloat describe a1_fifo              a scenario's study, keys, sweep, figures
  sudo bufferbloat run a1_fifo --quick      one short run, into results/
  bufferbloat report results/a1_fifo/...    one HTML page for a run, sweep or tree
  bufferbloat compare RUN_A RUN_B --html c.html
  bufferbloat COMMAND --help                a command's options

exit codes: 0 done, 1 failed, 2 usage error (nothing was started), 5 done but a run
came out degraded (the emulator fell behind)."""

VERSION_HELP = ("print the version and the code's identity (git commit or installed "
                "distribution), then exit")

# ------------------------------------------------------- arguments several commands share

SCENARIO = arg("scenario", help="the scenario's name (bufferbloat list)")
PATH = arg("path", help="a run, sweep or results directory")
RUN_DIR = arg("run_dir", help="a run directory (the one holding result.json)")


def out(what):
    """--out DIR, the directory ``what`` go under."""
    return arg("--out", default="results", metavar="DIR",
               help=f"the directory {what} go under (default: results, here)")


def overrides(text):
    """--set KEY=VALUE (repeatable), explained by ``text``."""
    return arg("--set", action="append", metavar="KEY=VALUE", help=text)


def traffic_time(text):
    """--time S, explained by ``text``."""
    return arg("--time", type=float, metavar="S", help=text)


def no_figures(text):
    """--no-figures, explained by ``text``."""
    return arg("--no-figures", action="store_true", help=text)


QUICK = arg("--quick", action="store_true",
            help="the scenario's short setting: shorter traffic and its quick sweep "
                 "(a check that everything works, not a study)")
#: --retry-degraded N: reruns of a run that comes out degraded (bufferbloat/run/sweep.py)
RETRY = arg("--retry-degraded", type=int, default=None, metavar="N",
            help="run a point again, up to N times, when the emulator fell behind "
                 "(its run kept, marked degraded; default 1, env "
                 "BUFFERBLOAT_RETRY_DEGRADED; 0 to 10)")
#: --host / --vm: where the networks are built (bufferbloat/run/where.py)
WHERE = one_of(
    arg("--host", dest="where", action="store_const", const="host",
        help="on this machine only: refuse what its kernel lacks"),
    arg("--vm", dest="where", action="store_const", const="vm",
        help="inside the project VM (default: there only when this kernel "
             "lacks what the runs need)"),
    defaults={"where": "auto"})
#: --cluster ADDR / --workers N: the points on Dask workers (docs/guide/cluster.md)
CLUSTER = one_of(
    arg("--cluster", metavar="tcp://HOST:PORT",
        help="send the points to the workers of this Dask scheduler (each "
             "started with `bufferbloat worker`), one point per worker at a time"),
    arg("--workers", type=int, metavar="N",
        help="start a local cluster of N workers on this machine and run the "
             "points on them, N at a time (this kernel must run them)"))

#: --precision P and its companions: repetitions until precise (run/precision.py)
PRECISION = [
    arg("--precision", type=float, metavar="P",
        help="repeat each configuration until every headline metric's confidence "
             "interval is within +-P %% of its mean (healthy runs only; Stein's "
             "two-stage t interval); instead of --repeat"),
    arg("--confidence", type=float, metavar="C",
        help="the intervals' confidence with --precision (default 0.95)"),
    arg("--min-reps", type=int, metavar="N",
        help="runs each configuration starts with under --precision (default 5; "
             "the interval's spread comes from them)"),
    arg("--max-reps", type=int, metavar="N",
        help="at most this many runs a configuration under --precision (default 20; "
             "said in the output and the index when reached)"),
]

# ------------------------------------------------------------------------- the commands

COMMANDS = (
    Command(
        "check", "what this kernel and machine can emulate",
        "Print what this machine can emulate (kernel qdiscs, tools, Mininet, root). "
        "With --scenario, also whether it can run those scenarios: exit 2 when it "
        "cannot (the scenarios' names are checked first).",
        ["bufferbloat check", "bufferbloat check --scenario a1_fifo --quiet",
         "bufferbloat check --scenario all --json"],
        [arg("--scenario", action="append", metavar="NAME",
             help="a scenario to check (repeatable), or 'all' for the catalogue"),
         arg("--json", action="store_true",
             help="print the capabilities as JSON instead of a table"),
         arg("--quiet", action="store_true",
             help="print nothing: the exit code alone says (0 can run, 2 cannot)")],
        "bufferbloat.commands.check:cmd_check"),
    Command(
        "list", "the scenarios, one line each",
        "List every scenario of the catalogue with a one-line description.",
        ["bufferbloat list"],
        [],
        "bufferbloat.commands.catalogue:cmd_list"),
    Command(
        "describe", "a scenario's study, keys, variants, sweep, figures and expected result",
        "Describe a scenario: its study, the keys --set accepts and their defaults, "
        "its variants, its sweep, its figures and the expected result with theory.",
        ["bufferbloat describe a1_fifo", "bufferbloat describe b2_pie_target | less",
         "bufferbloat describe a1_fifo --set link_schedule=2:8,2:2"],
        [SCENARIO, overrides("describe the scenario with a parameter overridden "
                             "(repeatable), e.g. link_trace=FILE")],
        "bufferbloat.commands.describe:cmd_describe"),
    Command(
        "trace", "write a capacity trace (mahimahi format) for link_trace",
        "Write a bottleneck capacity trace in mahimahi's format (one line per "
        "1500-byte delivery opportunity, in ms; it wraps) for --set link_trace=FILE: "
        "constant, steps, a square wave, a seeded random walk, or converted from a "
        "CSV of t_seconds,mbit rows (docs/guide/varying-links.md).",
        ["bufferbloat trace square --seconds 60 --low 2 --high 8 --half-period 2 "
         "-o sq.trace",
         "bufferbloat trace walk --seconds 60 --mbit 6 --seed 7 -o walk.trace",
         "bufferbloat trace steps --steps 5:10,5:1,5:0 -o steps.trace",
         "bufferbloat trace csv --csv rates.csv -o rates.trace"],
        [arg("kind", choices=("constant", "steps", "square", "walk", "csv"),
             help="what the trace is"),
         arg("-o", "--output", required=True, metavar="FILE", help="the trace file"),
         arg("--seconds", type=float, default=60.0, metavar="S",
             help="length, s (constant, square, walk; default 60)"),
         arg("--mbit", type=float, default=6.0, metavar="MBIT",
             help="rate (constant) or mean rate (walk), Mbit/s (default 6)"),
         arg("--low", type=float, default=2.0, metavar="MBIT",
             help="square: the low rate (default 2)"),
         arg("--high", type=float, default=8.0, metavar="MBIT",
             help="square: the high rate (default 8)"),
         arg("--half-period", type=float, default=2.0, metavar="S",
             help="square: how long each rate holds, s (default 2)"),
         arg("--steps", metavar="S:MBIT,...", help="steps: SECONDS:MBIT,... in order"),
         arg("--seed", type=int, default=1, help="walk: the random seed (default 1)"),
         arg("--csv", metavar="FILE", help="csv: rows t_seconds,mbit (the last row's "
             "time ends the trace)")],
        "bufferbloat.commands.trace:cmd_trace"),
    Command(
        "run", "run one scenario",
        "Run one scenario (or --repeat of it): build its network, run its traffic, "
        "sample the queues and flows, and record series, metrics, figures and "
        "report.html under --out.",
        ["sudo bufferbloat run a1_fifo", "sudo bufferbloat run a1_fifo --quick",
         "sudo bufferbloat run a1_fifo --set buffer_pkts=20 --time 30",
         "sudo bufferbloat run a2_pie --set qdisc.target_ms=5 --repeat 3"],
        [SCENARIO,
         overrides("override a parameter (repeatable; qdisc.KEY for the qdisc's own; "
                   "bufferbloat describe SCENARIO lists the keys)"),
         traffic_time("seconds of traffic (default: the scenario's duration)"),
         out("the runs"),
         arg("--repeat", type=int, default=1, metavar="N",
             help="run it N times, each in its own directory (default 1)"),
         QUICK,
         arg("--sample-ms", type=float, default=10.0, metavar="MS",
             help="sampler period, ms (1 to 10000; default 10)"),
         no_figures("end with the summary alone: no figures, no report.html"),
         RETRY, WHERE],
        "bufferbloat.commands.run:cmd_run"),
    Command(
        "sweep", "vary parameters of a scenario (resumable)",
        "Run a scenario at every combination of the values given (the cartesian "
        "product of the --vary lists; default: the scenario's own sweep), each "
        "point --repeat times, then draw the across-runs figures and the report. "
        "Interrupted, it resumes where it stopped when run again with the same "
        "arguments.",
        ["sudo bufferbloat sweep a1_fifo",
         "sudo bufferbloat sweep a1_fifo --vary buffer_pkts=20,100 --repeat 3",
         "sudo bufferbloat sweep a2_pie --vary qdisc=fifo,pie,codel --time 20"],
        [SCENARIO,
         arg("--vary", action="append", metavar="KEY=V1,V2,...",
             help="values of a key (repeatable: cartesian product); default: the "
                  "scenario's own sweep"),
         overrides("override a parameter at every point (repeatable; qdisc.KEY for "
                   "the qdisc's own)"),
         arg("--repeat", type=int, default=None, metavar="N",
             help="repetitions per point (default: the scenario's own)"),
         traffic_time("seconds of traffic per run (default: the scenario's duration)"),
         out("the sweep's runs and index.json"),
         QUICK,
         no_figures("no figures and no report.html at the end"),
         *PRECISION, RETRY, WHERE, CLUSTER],
        "bufferbloat.commands.sweep:cmd_sweep"),
    Command(
        "show", "a run's metrics table",
        "Print a run's status, health and metrics table. Metrics stored by older "
        "code are recomputed from the series (not written); --recompute also "
        "writes them.",
        ["bufferbloat show results/a1_fifo/RUN",
         "bufferbloat show results/a1_fifo/RUN --recompute"],
        [RUN_DIR,
         arg("--recompute", action="store_true",
             help="recompute the metrics from the stored series and write them "
                  "(metrics.csv, metrics.json)")],
        "bufferbloat.commands.show:cmd_show"),
    Command(
        "plot", "redraw the figures of a run, sweep or results tree",
        "Redraw figures from stored results (nothing is rerun): a run's into "
        "RUN/figures/; for a sweep or results tree, each run's and each set's "
        "across-runs figures and tables.",
        ["bufferbloat plot results/a1_fifo/RUN",
         "bufferbloat plot results/sweep-a1_fifo --format svg"],
        [PATH,
         arg("--format", default="png", metavar="FORMAT",
             help="the figures' file format: png (default), svg or pdf")],
        "bufferbloat.commands.figures:cmd_plot"),
    Command(
        "report", "one HTML page for a run, a sweep or results/",
        "Write one self-contained HTML page (report.html in PATH) with the "
        "studies' figures and readings, health, flags against theory, and every "
        "run's configuration, figures and metrics; print its path.",
        ["bufferbloat report results/a1_fifo/RUN", "bufferbloat report results"],
        [PATH],
        "bufferbloat.commands.figures:cmd_report"),
    Command(
        "cost", "what the runs under a directory cost beyond their traffic",
        "Print a Markdown table, per scenario and setting: runs, healthy and "
        "degraded, traffic, point wall time, their ratio, the median time a run "
        "spent beyond its traffic and its costliest phases (from each run's "
        "result.json: duration_s, wall_s, phases_s; docs/design/cost.md).",
        ["bufferbloat cost results"],
        [PATH],
        "bufferbloat.commands.figures:cmd_cost"),
    Command(
        "compare", "runs, sweeps or results trees side by side",
        "Print the headline metrics of runs, sweeps or results trees side by side, "
        "with the differences from the first. With --html, also write a page with "
        "the table and overlay figures (RTT eCDF, queueing delay, goodput).",
        ["bufferbloat compare RUN_FIFO RUN_PIE",
         "bufferbloat compare RUN_FIFO RUN_PIE --html compare.html"],
        [arg("paths", nargs="+", metavar="PATH",
             help="two or more run, sweep or results directories (the first is the "
                  "reference of the differences)"),
         arg("--html", default=None, metavar="FILE",
             help="also write the table and overlay figures as an HTML page to FILE "
                  "(default: write nothing)")],
        "bufferbloat.commands.compare:cmd_compare"),
    Command(
        "export", "a run as a flent data file (--flent)",
        "Write a run in another tool's format. --flent: a .flent.gz that flent "
        "loads and plots (flent -i FILE -p totals).",
        ["bufferbloat export --flent results/b2_pie_target/RUN",
         "bufferbloat export --flent RUN -o /tmp/b2.flent.gz"],
        [arg("--flent", action="store_true", required=True,
             help="flent's .flent.gz (the only format so far)"),
         RUN_DIR,
         arg("-o", "--output", metavar="FILE",
             help="the file to write, ending with .flent.gz (default: "
                  "RUN_DIR/run.flent.gz)")],
        "bufferbloat.commands.export:cmd_export"),
    Command(
        "run-all", "run every scenario",
        "Run the whole catalogue (or --only some scenarios), every point of each "
        "scenario's sweep, with progress and a time estimate; go on past failures; "
        "write OUT/index.json.",
        ["sudo bufferbloat run-all --quick", "sudo bufferbloat run-all --only a1_fifo "
         "--only a2_pie --out /tmp/r"],
        [QUICK,
         out("every scenario's runs and index.json"),
         arg("--only", action="append", metavar="SCENARIO",
             help="run only this scenario (repeatable)"),
         *PRECISION, RETRY, WHERE, CLUSTER],
        "bufferbloat.commands.run_all:cmd_run_all"),
    Command(
        "worker", "a Dask worker that runs a cluster's points",
        "Join a Dask scheduler as a worker that runs sweep and run-all points sent "
        "with --cluster: one point at a time, each in a network namespace of its "
        "own, as root; start one per machine (docs/guide/cluster.md). On start it removes "
        "what a dead worker of the same name left.",
        ["sudo bufferbloat worker tcp://10.0.0.1:8786",
         "sudo bufferbloat worker tcp://10.0.0.1:8786 --name lab-pc-7"],
        [arg("scheduler", metavar="tcp://HOST:PORT",
             help="the Dask scheduler's address (dask-scheduler prints it)"),
         arg("--name", metavar="NAME",
             help="this worker's name (default: the host name); a restarted worker "
                  "of the same name cleans up after its predecessor")],
        "bufferbloat.worker:cmd_worker"),
)


def load(handler):
    """The function ``handler`` ("module:function") names, its module imported now."""
    module, _, function = handler.partition(":")
    return getattr(importlib.import_module(module), function)
