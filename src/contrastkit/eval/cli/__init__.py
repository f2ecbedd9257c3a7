"""``contrastkit eval | analyze | compare``: evaluate frozen checkpoints from the command line.

* ``eval {knn,linear,retrieval,lowshot,finetune}`` (:mod:`.eval`): one protocol on the
  features of the train and test splits;
* ``analyze`` (:mod:`.analyze`): embedding diagnostics and figures;
* ``compare RUN_A RUN_B`` (:mod:`.compare`): paired bootstrap of the accuracy difference of two
  ``eval`` folders.

What ``eval`` and ``analyze`` share, the common options, the checkpoint with the defaults its
run stored in it, the splits and their cached features, is :mod:`.setup` (with
:mod:`.run_defaults`); the error and output handling of all three is :mod:`.output`.

Bad input (unreadable checkpoint, wrong architecture, ``k`` larger than the bank, NaN features,
...) prints ``contrastkit <command>: error: <message>`` on stderr and returns 2.
"""

from contrastkit.eval.cli.analyze import analyze_command, analyze_parser
from contrastkit.eval.cli.compare import compare_command, compare_parser
from contrastkit.eval.cli.eval import eval_command, eval_parser

__all__ = [
    "analyze_command",
    "analyze_parser",
    "compare_command",
    "compare_parser",
    "eval_command",
    "eval_parser",
]
