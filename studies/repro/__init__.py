"""Reproduce the papers' claims with the public commands (docs/reproduction.md).

``python -m studies.repro`` (from a source checkout)::

    python -m studies.repro cpu [--study NAME ...] [--seeds 0 1 2] [--epochs N] [--dry-run]
                          [--max-steps N]
    python -m studies.repro gpu [--json] [--force] | gpu --record FOLDER
    python -m studies.repro block RUN --out DIR --commit SHA [--archive A] [--limit-s S]
                          [--device cuda|cpu] [--epochs N] [--probe-epochs N] [-- OVERRIDES]
    python -m studies.repro report [--summary FILE] [--output FILE] [--figures DIR]
    python -m studies.repro list

``cpu`` (Part A) pretrains, evaluates and compares every run of the CPU studies (3 paired seeds,
a random-initialisation baseline in each; two lanes may run at once) and collects the results
into ``runs/repro/summary.json``, recording each finished run's small files in
``docs/reproduction/runs`` (committed: the study goes on from there on another machine);
``gpu`` (Part B) plans the next block of GPU time (one full-scale run trained, evaluated and
recorded inside it) and prints its device call, whose command is ``block``, or records a
finished block's files; ``report`` collects again and writes ``docs/reproduction.md`` and
its figures: each claim next to the paper's table or figure and numbers, with a verdict.

One module per job:

* :mod:`~studies.repro.schema`: what a study, a run, a tuning, a claim and a mechanism are;
* :mod:`~studies.repro.studies`: the studies, their runs and the papers' claims;
  :mod:`~studies.repro.grids`: the tuning grids and their studies;
  :mod:`~studies.repro.tuning`: a tuned run's setting, chosen by its grid;
* :mod:`~studies.repro.layout`: the checkout and the run folders' layout;
* :mod:`~studies.repro.commands`: the ``contrastkit`` command line of each step;
* :mod:`~studies.repro.runner`: runs those commands in order, resumable;
* :mod:`~studies.repro.records`: finished runs kept in git, restored on another machine;
* :mod:`~studies.repro.collection`: scans the run folders into a summary;
* :mod:`~studies.repro.stats`: paired t-intervals, detectable effects and power;
* :mod:`~studies.repro.trained`: whether a run trained past its random init, or collapsed;
* :mod:`~studies.repro.verdicts`: the verdict rules; :mod:`~studies.repro.rules`: them in words;
  :mod:`~studies.repro.superseded`: the labels and runs the revised page replaces;
* :mod:`~studies.repro.plan`: the planned cost of Part A (an estimate);
* :mod:`~studies.repro.report`: the Markdown report; :mod:`~studies.repro.headline`: its
  first screens; :mod:`~studies.repro.grid_section`: a tuning grid's lines;
  :mod:`~studies.repro.baselines_section`: study 6's tables (one seed per baseline);
* :mod:`~studies.repro.scale`: its sections on the planned and measured cost and the scale;
* :mod:`~studies.repro.figures`: its figures;
* :mod:`~studies.repro.blocks`: Part B's order across blocks of GPU time, the next block and
  its device call; :mod:`~studies.repro.device_block`: what the GPU machine runs;
  :mod:`~studies.repro.block_records`: the block's records in transit;
  :mod:`~studies.repro.partb`: Part B's results table; :mod:`~studies.repro.recipe`: the
  papers' settings, checked against the configs;
* :mod:`~studies.repro.cli`: the ``python -m studies.repro`` command line.
"""
