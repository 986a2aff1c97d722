"""What a run leaves and what is read from it, on any machine (no network needed).

===================  ======================================================================
``records``          the run directory loaded: ``Run`` and the record's accessors,
                     ``load_run``, finding runs in a tree
``records_layout``   the run directory's layout: file names, statuses, ``ResultsError``
``records_writer``   the run directory written: ``RunWriter``, ``SeriesWriter``
``records_csv``      the series files' CSV: a cell written, a file read back
``rows``             metric rows and counter helpers the metric modules share
``metrics``          a run's metrics: the traffic's window, ``compute_metrics``, stored rows
``metrics_flows``    flow and network scopes (iperf, tcp_info; goodput per direction)
``metrics_queue``    link scope: the bottleneck's queues (qdisc.csv)
``metrics_latency``  ping, irtt, udp and web
``flowmetrics``      the studies' flow metrics (study E's k-flow metrics)
``health``           the health verdict: did the emulator keep up
``health_series``    the checks the series answer (work conservation, senders, ...)
``health_record``    the checks the record answers (sampler, start times, idle RTT, ...)
``theory``           closed-form expectations (full-queue RTT, Mathis, goodput ceiling)
``headline``         the headline metrics a scenario declares, with theory
``flentexport``      a run as flent's .flent.gz
``cost``             what runs cost beyond their traffic, from their records
                     (``bufferbloat cost``)
===================  ======================================================================

Imports ``core`` (and ``net``'s qdisc registry, for theory); knows no engine: results are read back from disk.
"""
