"""Every ``contrastkit`` command line: parsing, short help, one-line errors; each command calls
the library's functions below it (nothing below imports this package).

* :mod:`.main`: the ``contrastkit`` dispatcher, ``--threads`` and ``--version``;
* :mod:`.pretrain` (LightningCLI over the training engine, with :mod:`.short_help` and
  :mod:`.config_errors`);
* :mod:`.eval` (``eval knn|linear|retrieval|lowshot|finetune`` over
  :func:`contrastkit.eval.evaluate`), :mod:`.analyze` (over :func:`contrastkit.eval.analyze`),
  :mod:`.voc07`, :mod:`.sts`, :mod:`.finetune_images`, :mod:`.compare`, :mod:`.embed`, with
  their shared options and error hints in :mod:`.common`;
* :mod:`.export` and :mod:`.data` (``data pack``).

Bad input prints ``contrastkit <command>: error: <message>`` on stderr and returns 2.
"""

from contrastkit.cli.main import main

__all__ = ["main"]
