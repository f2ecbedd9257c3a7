"""Every ``contrastkit`` command line: parsing, short help, one-line errors; each command calls
the library's functions below it (nothing below imports this package).

* :mod:`.main`: the ``contrastkit`` dispatcher, ``--version`` and ``pretrain --help`` (from
  :mod:`.short_help`, without loading Lightning); waiting OpenMP threads made to sleep before
  any command loads torch;
* :mod:`.parsing`: the parser of every command but ``pretrain`` (one-line errors with "did
  you mean") and the ``--threads`` option;
* :mod:`.pretrain` (LightningCLI over the training engine, with :mod:`.config_errors` and
  :mod:`.next_steps`, a finished run's last lines);
* :mod:`.eval` (``eval knn|linear|retrieval|lowshot|finetune`` over
  :func:`contrastkit.eval.evaluate`), :mod:`.analyze` (over :func:`contrastkit.eval.analyze`),
  :mod:`.voc07`, :mod:`.sts`, :mod:`.finetune_images`, :mod:`.compare`, :mod:`.embed`, with
  their shared options and error hints in :mod:`.common`;
* :mod:`.export` and :mod:`.data` (``data pack``).

Bad input prints ``contrastkit <command>: error: <message>`` on stderr and returns 2.
"""

from contrastkit.cli.main import main

__all__ = ["main"]
