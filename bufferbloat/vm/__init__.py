"""The project VM's host side: build a Debian bookworm disk image and run commands in it
under qemu (``vm/build``, ``vm/run``; ``python3 -m bufferbloat.vm``).

The host kernel lacks sch_netem, sch_pie, openvswitch, tcp_vegas... (see docs/design/platform.md), so
experiments that need them run in a small VM: Debian bookworm with the stock 6.1 kernel,
Mininet and Open vSwitch, built with ``debootstrap`` (no Vagrant needed) and booted with
``qemu-system-x86_64`` (TCG unless a probe shows that KVM can boot it). The repository's
``vm/`` holds what goes into the guest (``packages.txt``, ``provision.sh``, ``guest/``)
and the two entry scripts; this package holds the rest:

* :mod:`.image`: the image, its build and its cache key;
* :mod:`.boot`: qemu's command line, the boot stages and the boot watchdog;
* :mod:`.control`: the host <-> guest protocol (the control directory, the command
  script) and the run records a guest leaves ``running``;
* :mod:`.session`: one run (:func:`bufferbloat.vm.session.run`): boots, output,
  interrupts, exit code, the boots recorded; the KVM probe;
* :mod:`.watch`: one boot watched: the guest's output streamed, the watchdog's
  verdicts, a stop passed on to the guest;
* :mod:`.common`: paths, cache, errors, host tools, locks, stopping a process;
* :mod:`.cli`: the command line.

Run protocol, one control directory per run (:mod:`.control`):

* the host picks a run id (``[A-Za-z0-9_.-]``), creates ``SHARE/.vm-run/<id>/`` and
  writes ``cmd`` there: a bash script (``export`` lines for the env vars given, then
  ``exec`` of the shlex-quoted argument list, or a script body given as a string);
* qemu boots with ``bb.run=<id>`` on the kernel command line, the share exported over
  virtio-9p with mount tag ``bb``, the disk with ``snapshot=on`` (every run starts from
  the pristine image), no network, ttyS0 -> console log, ttyS1 -> output log;
* in the guest, bb-run.service mounts the share at ``/bb``, writes ``booted``, then
  ``started``, runs ``cmd`` as root with cwd ``/bb`` and ``PYTHONPATH=/bb`` in its own
  process group, its stdout+stderr going to ttyS1 (which the host streams live), writes
  its exit status to ``rc`` (write-then-rename), and powers the VM off; it prints
  ``bb-run: stage <name>`` markers on the console;
* the host returns the ``rc`` value; when there is none (guest crash, timeout) it prints
  the end of the console log and returns EXIT_NO_RESULT (3) or EXIT_TIMEOUT (124). The
  control directory is removed afterwards.

A boot that hangs is stopped (that qemu, by PID) and a fresh copy booted, 3 boots at
most, then exit 4 (:mod:`.boot`). On Ctrl-C or SIGTERM the guest command gets SIGINT
and 20 s to save its results, then the CLI exits 130 (SIGINT) or 143 (SIGTERM)
(:mod:`.session`). Only the qemu process this package started is ever terminated (by its
PID). Standard library only: runs with /usr/bin/python3 as root.
"""
