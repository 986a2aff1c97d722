"""Where a sweep's points run: one after another here (:class:`SerialExecutor`, the
default), or on Dask workers (:class:`bufferbloat.run.cluster.DaskExecutor`).

The sweep runner (:func:`bufferbloat.run.sweep.run_points`) plans every point (its
configuration, key, directory, whether it is already recorded) and hands the ones to run
to an executor as :class:`Job` s, at most :meth:`room` at a time; it records each as the
executor returns it (:meth:`next_done`: the job and its
:class:`~bufferbloat.run.watch.Outcome`). The executor decides where and how: the serial
one calls the run in this process under the stall watchdog, again while it comes out
degraded; the Dask one sends the job's ``spec`` to a worker, which runs it in its own
network namespace and sends the run directory back.
"""

import time


class Job:
    """One point to run: what the runner records (``entry``, ``path``, ``key``) and what
    an executor needs to run it (``go``: a callable for this process; ``spec``: the
    same as data, for a worker; ``limit``: the stall limit, s; ``retries``: reruns of
    a degraded run; ``set_aside``: moves a degraded attempt out of ``path``; ``run``:
    the point's :class:`~bufferbloat.run.resolved.ResolvedRun`)."""

    def __init__(self, pos, label, entry, path, key, go, spec, limit, retries,
                 set_aside, duration_s, run=None):
        self.pos, self.label, self.entry, self.path, self.key = pos, label, entry, path, key
        self.go, self.spec, self.limit, self.retries = go, spec, limit, retries
        self.set_aside, self.duration_s = set_aside, duration_s
        self.started = time.monotonic()
        self.attempt = 0
        self.run = run           # what a worker's kernel must have comes from it


class SerialExecutor:
    """Today's behaviour: one point at a time, in this process (its network on this
    kernel, or in the VM this process runs in)."""

    name = "serial"

    def __init__(self, run_one, log=print):
        self.run_one, self.log = run_one, log      # watch.run_one: watchdog, reruns
        self.queue = []

    def room(self):
        """How many more jobs may be submitted now."""
        return 0 if self.queue else 1

    def busy(self):
        return len(self.queue)

    def submit(self, job):
        self.queue.append(job)

    def next_done(self):
        """Run the queued job; (job, Outcome)."""
        job = self.queue.pop(0)
        try:
            outcome = self.run_one(job.go, job.label, job.limit, job.retries,
                                   log=self.log, set_aside=job.set_aside)
        except BaseException:
            self.queue.insert(0, job)       # still ours: the runner marks it interrupted
            raise
        return job, outcome

    def stop(self):
        """The jobs that did not finish (after an interrupt)."""
        jobs, self.queue = self.queue, []
        return jobs

    def describe(self):
        return "serial (one point at a time, here)"

    def close(self):
        pass
