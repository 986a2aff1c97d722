"""What a run leaves and what is read from it, on any machine (no network needed).

==============  ===========================================================================
``records``     the run directory: writer, loader, the record's accessors
``rows``        metric rows and counter helpers the two metric modules share
``metrics``     metrics from the stored series (per flow, ping, qdisc, network)
``flowmetrics`` the studies' flow metrics (study E's k-flow metrics)
``health``      the health verdict: did the emulator keep up
``theory``      closed-form expectations (full-queue RTT, Mathis, goodput ceiling)
``headline``    the headline metrics a scenario declares, with theory
``flentexport`` a run as flent's .flent.gz
``cost``        what runs cost beyond their traffic, from their records (``bufferbloat cost``)
==============  ===========================================================================

Imports ``core`` (and ``net``'s qdisc registry, for theory); knows no engine: results are read back from disk.
"""
