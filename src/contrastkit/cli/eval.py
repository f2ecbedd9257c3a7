"""``contrastkit eval {knn,linear,retrieval,lowshot,finetune,voc07,sts}``: parse the options and
evaluate a frozen checkpoint with :func:`contrastkit.eval.evaluate` (``voc07``, ``sts`` and
``finetune`` on image sets have commands of their own: :mod:`.voc07`, :mod:`.sts`,
:mod:`.finetune_images`).

Bad input (unreadable checkpoint, wrong architecture, ``k`` larger than the bank, NaN features,
...) prints ``contrastkit eval: error: <message>`` on stderr and returns 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from contrastkit.cli.common import DefaultsHelpFormatter, common_parser, eval_request, guard
from contrastkit.cli.parsing import CommandParser
from contrastkit.data.sources.registry import is_video_dataset
from contrastkit.eval.linear import MIN_VALIDATION_PER_CLASS
from contrastkit.eval.protocols import (
    FinetuneEval,
    KnnEval,
    LinearEval,
    LowshotEval,
    Protocol,
    RetrievalEval,
    evaluate,
)


def _baselines_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--baselines", action="store_true",
                   help="also evaluate raw pixels and the backbone randomly initialised "
                   "(seeded), with paired bootstrap intervals of the differences, and end with "
                   "one verdict on whether pretraining helped (kNN and linear probe)")


def _linear_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--epochs", type=int, default=None,
                   help="training epochs (default: 100 on cached features, else the protocol's)")
    p.add_argument("--lr", type=float, default=None,
                   help="base learning rate (default: 0.1 on cached features, else the "
                   "protocol's)")
    p.add_argument("--linear-batch-size", type=int, default=None,
                   help="probe batch size (default: 256 on cached features, else the "
                   "protocol's)")


def eval_parser() -> argparse.ArgumentParser:
    """Parser of ``contrastkit eval PROTOCOL ...``."""
    parser = CommandParser(
        prog="contrastkit eval", formatter_class=DefaultsHelpFormatter,
        description="Evaluate a frozen backbone with one protocol "
        "(sentence encoders: contrastkit eval sts --help).")
    sub = parser.add_subparsers(dest="protocol", required=True, metavar="PROTOCOL")
    common = common_parser()
    knn = sub.add_parser("knn", parents=[common], help="weighted kNN (Wu et al. 2018)",
                         formatter_class=DefaultsHelpFormatter)
    knn.add_argument("--k", type=int, default=None,
                     help="neighbours (default: the run's kNN monitor's, else 200 as DySTreSS; "
                     "at most the bank's size)")
    knn.add_argument("--temperature", type=float, default=None,
                     help="vote temperature (default: the run's kNN monitor's, else 0.1)")
    knn.add_argument("--metric", choices=("cosine", "l2"), default="cosine",
                     help="similarity of the neighbour search")
    knn.add_argument("--backend", choices=("auto", "faiss", "torch"), default="auto",
                     help="neighbour search (auto: faiss when installed)")
    _baselines_option(knn)
    lin = sub.add_parser("linear", parents=[common], help="linear probe (SCE appendix D)",
                         formatter_class=DefaultsHelpFormatter)
    lin.add_argument("--protocol", dest="linear_protocol", default="fast",
                     choices=("fast", "sce_d1", "sce_d2", "sce_d3"),
                     help="fast: cached features; sce_d1/sce_d2: augmented images; sce_d3: "
                     "augmented clips (video)")
    _linear_options(lin)
    lin.add_argument("--validation", type=float, default=0.1, metavar="F",
                     help="fast: share of each class's training images held out; the probe "
                     "of the epoch with the best validation top-1 is kept (0, or fewer than "
                     f"{MIN_VALIDATION_PER_CLASS} images of a class held out: none, the last "
                     "epoch)")
    _baselines_option(lin)
    ret = sub.add_parser("retrieval", parents=[common], help="recall@k (SCE Table 19)",
                         formatter_class=DefaultsHelpFormatter)
    ret.add_argument("--ks", type=int, nargs="+", default=[1, 5, 10], help="the k of recall@k")
    ret.add_argument("--backend", choices=("auto", "faiss", "torch"), default="auto",
                     help="neighbour search (auto: faiss when installed)")
    low = sub.add_parser("lowshot", parents=[common], help="low-shot linear (SCE Table 10)",
                         formatter_class=DefaultsHelpFormatter)
    low.add_argument("--shots", nargs="+", default=["16", "32", "64", "all"],
                     help="images per class (integers or 'all')")
    low.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                     help="seeds of the subsets and probes, one run each")
    _linear_options(low)
    _baselines_option(low)
    fin = sub.add_parser("finetune", parents=[common],
                         help="fine-tune a clip backbone (SCE D.3); on image data sets: "
                         "DySTreSS A.2 (contrastkit eval finetune --data NAME --help)",
                         formatter_class=DefaultsHelpFormatter)
    fin.add_argument("--epochs", type=int, default=None, help="epochs (default: 200, SCE D.3)")
    fin.add_argument("--lr", type=float, default=None, help="lr for a batch of 64 (default: 0.1)")
    fin.add_argument("--finetune-batch-size", type=int, default=None, help="batch (default: 64)")
    fin.add_argument("--dropout", type=float, default=None,
                     help="before the classifier (default: 0.8)")
    fin.add_argument("--max-steps", type=int, default=None,
                     help="stop after this many steps (default: no limit)")
    sub.add_parser("voc07", add_help=False,
                   help="VOC2007 linear SVMs, mAP, low-shot (SCE Tables 9-10; own options: "
                   "contrastkit eval voc07 --help)")
    return parser


def protocol_options(args: argparse.Namespace) -> Protocol:
    """The options of ``args.protocol`` as its dataclass (:mod:`contrastkit.eval.protocols`)."""
    a = args
    if a.protocol == "knn":
        return KnnEval(k=a.k, temperature=a.temperature, metric=a.metric, backend=a.backend,
                       baselines=a.baselines)
    if a.protocol == "linear":
        return LinearEval(protocol=a.linear_protocol, epochs=a.epochs, lr=a.lr,
                          batch_size=a.linear_batch_size, validation=a.validation,
                          baselines=a.baselines)
    if a.protocol == "retrieval":
        return RetrievalEval(ks=tuple(a.ks), backend=a.backend)
    if a.protocol == "lowshot":
        return LowshotEval(shots=tuple(a.shots), seeds=tuple(a.seeds), epochs=a.epochs,
                           lr=a.lr, batch_size=a.linear_batch_size, baselines=a.baselines)
    return FinetuneEval(epochs=a.epochs, lr=a.lr, batch_size=a.finetune_batch_size,
                        dropout=a.dropout, max_steps=a.max_steps)


def _video_data(argv: Sequence[str]) -> bool:
    """Whether ``--data`` names a video dataset (``finetune`` on images has its own command)."""
    data = argparse.ArgumentParser(add_help=False)
    data.add_argument("--data", default=None)
    return is_video_dataset(data.parse_known_args(list(argv))[0].data or "")


def eval_command(argv: Sequence[str]) -> int:
    """``contrastkit eval PROTOCOL ...``; returns the exit status."""
    if list(argv[:1]) == ["voc07"]:
        from contrastkit.cli.voc07 import voc07_command

        return voc07_command(argv[1:])
    if list(argv[:1]) == ["finetune"] and not _video_data(argv):
        from contrastkit.cli.finetune_images import finetune_images_command

        return finetune_images_command(argv[1:])
    if list(argv[:1]) == ["sts"]:  # sentence encoders: options of their own
        from contrastkit.cli.sts import sts_command

        return sts_command(argv[1:])
    args = eval_parser().parse_args(list(argv))

    def body() -> int:
        print(evaluate(eval_request(args), protocol_options(args), argv).markdown)
        return 0

    return guard("contrastkit eval", body, args.threads)
