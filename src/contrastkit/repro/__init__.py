"""Reproduce the papers' claims with the public commands (docs/reproduction.md).

``contrastkit repro`` (from a source checkout)::

    contrastkit repro cpu [--study NAME ...] [--seeds 0 1 2] [--epochs N] [--dry-run]
                          [--max-steps N]
    contrastkit repro gpu [--study NAME ...] [--seeds 0] [--chunk-time 00:00:08:30]
                          [--device cuda] [--max-steps N] [--dry-run]
    contrastkit repro report [--summary FILE] [--output FILE] [--figures DIR]
    contrastkit repro list

``cpu`` (Part A) pretrains, evaluates and compares every run of the CPU studies (3 paired seeds,
a random-initialisation baseline in each; two lanes may run at once) and collects the results
into ``runs/repro/summary.json``, recording each finished run's small files in
``docs/reproduction/runs`` (committed: the study goes on from there on another machine);
``gpu`` (Part B) does the same at full scale, training in chunks; ``report`` collects again
and writes ``docs/reproduction.md`` and its figures: each claim next to the paper's table or
figure and numbers, with a verdict.

One module per job:

* :mod:`~contrastkit.repro.studies`: the studies, their runs and the papers' claims;
* :mod:`~contrastkit.repro.layout`: the checkout and the run folders' layout;
* :mod:`~contrastkit.repro.commands`: the ``contrastkit`` command line of each step;
* :mod:`~contrastkit.repro.runner`: runs those commands in order, resumable;
* :mod:`~contrastkit.repro.records`: finished runs kept in git, restored on another machine;
* :mod:`~contrastkit.repro.collection`: scans the run folders into a summary;
* :mod:`~contrastkit.repro.stats`: paired t-intervals and minimum detectable effects;
* :mod:`~contrastkit.repro.verdicts`: the verdict rules;
* :mod:`~contrastkit.repro.plan`: the planned cost of Part A (an estimate);
* :mod:`~contrastkit.repro.report`: the Markdown report;
* :mod:`~contrastkit.repro.scale`: its sections on the planned and measured cost and the scale;
* :mod:`~contrastkit.repro.figures`: its figures;
* :mod:`~contrastkit.repro.cli`: the ``contrastkit repro`` command line.
"""
