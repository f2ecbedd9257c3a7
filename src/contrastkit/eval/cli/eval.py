"""``contrastkit eval {knn,linear,retrieval,lowshot,finetune}``: evaluate a frozen checkpoint
with one protocol.

Features of the train and test splits (cached, see :mod:`contrastkit.eval.features`), one
protocol, ``results.json`` / ``results.md`` / ``predictions.npz`` (+ figures) in ``--output``.
Video datasets (``--data ucf101|hmdb51|kinetics|video_folder``) give one feature per video:
the mean over its 30 views, 10 temporal clips x 3 spatial crops (SCE, Denize et al. 2023,
appendix D.3); ``finetune`` trains the whole clip backbone (same appendix,
:mod:`contrastkit.eval.finetune`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from contrastkit.data.images.datasets import collate_images
from contrastkit.data.registry import build_video_dataset, is_video_dataset
from contrastkit.eval import report
from contrastkit.eval.cli.baselines import baselines_markdown, run_baselines
from contrastkit.eval.cli.output import check_output, data_context, guard, header, write_outputs
from contrastkit.eval.cli.setup import (
    DefaultsHelpFormatter,
    Setup,
    common_parser,
    eval_transform,
    is_video,
    open_split,
    setup,
    split_features,
    video_encoder,
    video_spec,
)
from contrastkit.outputs import staged_folder

#: ``eval knn``'s k and temperature for a file without a run record (DySTreSS's; a pretraining
#: checkpoint gives its run's kNN monitor's, whose defaults are these).
KNN_K, KNN_TEMPERATURE = 200, 0.1


# --- options ------------------------------------------------------------------------------------
def _baselines_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--baselines", action="store_true",
                   help="also evaluate raw pixels and the backbone randomly initialised "
                   "(seeded), with paired bootstrap intervals of the differences")


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
    parser = argparse.ArgumentParser(
        prog="contrastkit eval", formatter_class=DefaultsHelpFormatter,
        description="Evaluate a frozen backbone with one protocol "
        "(sentence encoders: contrastkit eval sts --help).")
    sub = parser.add_subparsers(dest="protocol", required=True, metavar="PROTOCOL")
    common = common_parser()
    knn = sub.add_parser("knn", parents=[common], help="weighted kNN (Wu et al. 2018)",
                         formatter_class=DefaultsHelpFormatter)
    knn.add_argument("--k", type=int, default=None,
                     help="neighbours (default: the run's kNN monitor's, else 200 as DySTreSS)")
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



# --- protocols ----------------------------------------------------------------------------------
@dataclass
class Outcome:
    """What a protocol produced: numbers, options, predictions and figures."""

    metrics: dict
    config: dict
    pred: Tensor
    labels: Tensor
    figures: list[str] = field(default_factory=list)
    curves: dict[str, list[float]] = field(default_factory=dict)


def _features(s: Setup) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    return (*split_features(s, s.args.train_split), *split_features(s, s.args.test_split))


def run_knn(s: Setup, out: Path | None) -> Outcome:
    """Weighted kNN (Wu et al. 2018, eq. 8) with top-1/top-5/mean-per-class accuracy."""
    from contrastkit.eval import knn_predict, mean_per_class_accuracy, topk_accuracy

    a = s.args
    k = a.k if a.k is not None else int(s.run.knn_k or KNN_K)
    temperature = a.temperature if a.temperature is not None else \
        float(s.run.knn_temperature or KNN_TEMPERATURE)
    bank = len(open_split(s, a.train_split))  # type: ignore[arg-type]
    if k > bank:  # checked before any feature is extracted
        raise ValueError(f"k={k} is larger than the bank ({bank} images of --train-split "
                         f"{a.train_split}): pass --k {bank} or less")
    xtr, ytr, xte, yte = _features(s)
    pred, scores = knn_predict(xtr, ytr, xte, k=k, temperature=temperature, metric=a.metric,
                               backend=a.backend)
    metrics = topk_accuracy(scores, yte, (1, 5))  # top-5 only with more than 5 classes
    metrics["mean_per_class"] = mean_per_class_accuracy(pred, yte)
    config = {"k": k, "temperature": temperature, "metric": a.metric, "backend": a.backend}
    outcome = Outcome(metrics, config, pred, yte)
    if out is not None:
        from contrastkit.eval.report_figures import plot_per_class_accuracy

        names = getattr(open_split(s, a.test_split), "classes", None)
        plot_per_class_accuracy(pred.cpu().numpy(), yte.cpu().numpy(),
                                out / "knn_per_class.png", names,
                                title=f"kNN accuracy per class (k={k}, t={temperature:g})")
        outcome.figures.append("knn_per_class.png")
    return outcome


def _probe_kwargs(a: argparse.Namespace) -> dict:
    """linear_probe options from --epochs/--lr/--linear-batch-size (defaults 100, 0.1, 256)."""
    def pick(value: object, default: object) -> object:
        return default if value is None else value

    return {"epochs": pick(a.epochs, 100), "lr": pick(a.lr, 0.1),
            "batch_size": pick(a.linear_batch_size, 256)}


def run_linear(s: Setup, out: Path | None) -> Outcome:
    """Linear probe: fast (cached features) or on augmented images (Denize et al. 2023,
    appendix D.1/D.2; clips: D.3)."""
    from contrastkit.eval import linear_probe

    a = s.args
    if a.linear_protocol == "fast":
        xtr, ytr, xte, yte = _features(s)
        kwargs = _probe_kwargs(a)
        result = linear_probe(xtr, ytr, xte, yte, seed=a.seed, **kwargs)  # type: ignore[arg-type]
        config = {"protocol": "fast", **kwargs, "standardize": True, "seed": a.seed}
    else:
        if (a.linear_protocol == "sce_d3") != is_video(s):
            raise ValueError(f"--protocol {a.linear_protocol} does not apply to --data {a.data}: "
                             "sce_d3 is for video datasets, sce_d1/sce_d2 for images")
        xte, yte = split_features(s, a.test_split)
        runner = _linear_on_clips if is_video(s) else _linear_on_images
        result, config = runner(s, int(yte.max()) + 1)
    classifier = result["classifier"]
    with torch.no_grad():
        pred = classifier(xte.to(classifier.weight.device)).argmax(dim=1).cpu()  # type: ignore[operator, union-attr]
    curve = [float(v) for v in result["loss_curve"]]  # type: ignore[union-attr]
    if not all(np.isfinite(curve)):
        raise ValueError(f"the linear probe diverged (training loss {curve}); lower --lr")
    metrics = {k: result[k] for k in ("top1", "top5", "mean_per_class") if k in result}
    outcome = Outcome(metrics, config, pred, yte, curves={"loss_per_epoch": curve})
    accuracy = {k: [float(v) for v in result[f"{k}_top1_curve"]]  # type: ignore[union-attr]
                for k in ("train", "test") if f"{k}_top1_curve" in result}
    outcome.curves.update({f"{k}_top1_per_epoch": v for k, v in accuracy.items()})
    if out is not None:
        from contrastkit.eval.plots import plot_curve
        from contrastkit.eval.report_figures import plot_probe_accuracy

        plot_curve(curve, out / "loss_curve.png", xlabel="epoch",  # type: ignore[arg-type]
                   ylabel="training loss", title="Linear probe")
        outcome.figures.append("loss_curve.png")
        if accuracy:
            plot_probe_accuracy(accuracy["train"], accuracy["test"],
                                out / "probe_accuracy.png")
            outcome.figures.append("probe_accuracy.png")
    return outcome


def _linear_on_images(s: Setup, test_classes: int) -> tuple[dict, dict]:
    """Linear protocol on augmented images, frozen backbone (Denize et al. 2023, D.1/D.2)."""
    from contrastkit.eval import SCE_D1, SCE_D2, train_linear_on_images

    a = s.args
    base = SCE_D1 if a.linear_protocol == "sce_d1" else SCE_D2
    train, test = open_split(s, a.train_split), open_split(s, a.test_split)
    protocol, classes, train_loader, test_loader = _linear_setup(s, base, train, test,
                                                                 test_classes)
    backbone = s.backbone.to(s.device).eval()
    train_tf, test_tf = eval_transform(s, "eval_train").to(s.device), eval_transform(s)
    test_tf = test_tf.to(s.device)
    result = train_linear_on_images(
        backbone, train_loader, test_loader, protocol,
        lambda x: train_tf(x.to(s.device)), lambda x: test_tf(x.to(s.device)), classes,
        device=s.device, seed=a.seed,
    )
    return result, {"protocol": a.linear_protocol, **asdict(protocol), "seed": a.seed}


def _linear_setup(s: Setup, base, train, test, test_classes: int) -> tuple:
    """A linear protocol with the command line's overrides, the class count and the loaders."""
    from torch.utils.data import DataLoader

    a = s.args
    changes = {k: v for k, v in (("epochs", a.epochs), ("lr", a.lr),
                                 ("batch_size", a.linear_batch_size)) if v is not None}
    protocol = replace(base, **changes)
    classes = max(max(train.targets), test_classes - 1) + 1
    generator = torch.Generator().manual_seed(a.seed)
    collate = None if is_video(s) else collate_images
    train_loader = DataLoader(train, batch_size=protocol.batch_size, shuffle=True,
                              generator=generator, collate_fn=collate)
    test_loader = DataLoader(test, batch_size=a.batch_size, collate_fn=collate)
    return protocol, classes, train_loader, test_loader


def _clip_split(s: Setup, split: str) -> object:
    """Training split of the clip protocols: one random clip and ``size`` crop per video."""
    spec = replace(video_spec(s), num_clips=1, crop_size=s.size)
    return build_video_dataset(s.args.data, s.args.root, split, spec, role="train",
                               skip_corrupt=s.args.skip_corrupt)


def _linear_on_clips(s: Setup, test_classes: int) -> tuple[dict, dict]:
    """Linear protocol of Denize et al. 2023, appendix D.3: random clip, random crop, flip;
    30-view test features."""
    from contrastkit.eval import train_linear_on_images
    from contrastkit.eval.video import SCE_D3, flip_only_transform

    a = s.args
    train, test = _clip_split(s, a.train_split), open_split(s, a.test_split)
    protocol, classes, train_loader, test_loader = _linear_setup(s, SCE_D3, train, test,
                                                                 test_classes)
    encoder = video_encoder(s).to(s.device).eval()
    train_tf = flip_only_transform(s.size, s.normalize).to(s.device)
    result = train_linear_on_images(
        encoder, train_loader, test_loader, protocol, lambda x: train_tf(x.to(s.device)),
        lambda x: x.to(s.device), classes, device=s.device, seed=a.seed,
    )
    return result, {"protocol": "sce_d3", **asdict(protocol), "seed": a.seed}


def run_finetune(s: Setup, out: Path | None) -> Outcome:
    """Fine-tuning of the whole clip backbone (Denize et al. 2023, appendix D.3) on videos."""
    from contrastkit.eval.finetune import SCE_D3_FINETUNE, finetune_video

    a = s.args
    if not is_video(s):
        raise ValueError(f"finetune applies to video datasets, not --data {a.data}")
    if s.projector is not None:
        raise ValueError("--space projector: finetune trains the backbone itself; the "
                         "projector's embeddings are evaluated by knn, linear, retrieval, lowshot")
    changes = {k: v for k, v in (("epochs", a.epochs), ("lr", a.lr),
                                 ("batch_size", a.finetune_batch_size),
                                 ("dropout", a.dropout)) if v is not None}
    protocol = replace(SCE_D3_FINETUNE, **changes)
    train, test = _clip_split(s, a.train_split), open_split(s, a.test_split)
    classes = max(max(train.targets), max(test.targets)) + 1  # type: ignore[attr-defined]
    result = finetune_video(s.backbone, train, test, classes, size=s.size,  # type: ignore[arg-type]
                            protocol=protocol, normalize=s.normalize, device=s.device,
                            seed=a.seed, max_steps=a.max_steps)
    pred, yte = result["scores"].argmax(dim=1), result["labels"]  # type: ignore[union-attr]
    metrics = {k: result[k] for k in ("top1", "top5", "mean_per_class") if k in result}
    config = {"protocol": "sce_d3_finetune", **asdict(protocol), "max_steps": a.max_steps,
              "steps": result["steps"], "seed": a.seed}
    curve = [float(v) for v in result["loss_curve"]]  # type: ignore[union-attr]
    return Outcome(metrics, config, pred, yte, curves={"loss_per_epoch": curve})


def run_retrieval(s: Setup, out: Path | None) -> Outcome:
    """Recall@k of cosine retrieval (Denize et al. 2023, Table 19); predictions: 1-NN labels."""
    from contrastkit.eval import nearest_neighbors, retrieval_recall

    a = s.args
    xtr, ytr, xte, yte = _features(s)
    metrics = retrieval_recall(xtr, ytr, xte, yte, a.ks, backend=a.backend)
    _, idx = nearest_neighbors(xtr, xte, 1, metric="cosine", backend=a.backend)
    pred = ytr[idx[:, 0].cpu()]
    outcome = Outcome(metrics, {"ks": list(a.ks), "backend": a.backend}, pred, yte)
    if out is not None:
        from contrastkit.eval.report_figures import plot_recall_at_k

        plot_recall_at_k(metrics, out / "recall_at_k.png")
        outcome.figures.append("recall_at_k.png")
    return outcome


def _parse_shots(values: Sequence[str]) -> list[int | None]:
    shots: list[int | None] = []
    for v in values:
        if v == "all":
            shots.append(None)
        elif v.isdigit() and int(v) > 0:
            shots.append(int(v))
        else:
            raise ValueError(f"--shots values must be positive integers or 'all', got {v!r}")
    return shots


def run_lowshot(s: Setup, out: Path | None) -> Outcome:
    """Low-shot linear probes (Denize et al. 2023, Table 10); predictions are those of the last
    shot, first seed."""
    from contrastkit.eval import linear_probe, lowshot_linear, sample_per_class

    a = s.args
    shots = _parse_shots(a.shots)
    xtr, ytr, xte, yte = _features(s)
    kwargs = _probe_kwargs(a)
    kwargs["num_classes"] = max(int(ytr.max()), int(yte.max())) + 1
    table = lowshot_linear(xtr, ytr, xte, yte, shots=shots, seeds=a.seeds, **kwargs)
    last, seed = shots[-1], a.seeds[0]
    idx = torch.arange(len(ytr)) if last is None else sample_per_class(ytr, last, seed)
    probe = linear_probe(xtr[idx], ytr[idx], xte, yte, seed=seed, **kwargs)  # type: ignore[arg-type]
    with torch.no_grad():
        pred = probe["classifier"](xte).argmax(dim=1)  # type: ignore[operator]
    metrics = {"shots": {("all" if k is None else str(k)): v for k, v in table.items()}}
    config = {**kwargs, "shots": list(a.shots), "seeds": list(a.seeds),
              "predictions_from": {"shots": "all" if last is None else last, "seed": seed}}
    outcome = Outcome(metrics, config, pred, yte)
    if out is not None:
        from contrastkit.eval.report_figures import plot_lowshot

        plot_lowshot(metrics["shots"], out / "lowshot.png")
        outcome.figures.append("lowshot.png")
    return outcome


RUNNERS: dict[str, Callable[[Setup, Path | None], Outcome]] = {
    "knn": run_knn, "linear": run_linear, "retrieval": run_retrieval, "lowshot": run_lowshot,
    "finetune": run_finetune,
}


def _markdown(title: str, s: Setup, outcome: Outcome) -> str:
    context = {"checkpoint": s.checkpoint.name, "sha256": s.sha256[:16],
               "backbone": s.spec.get("name"), "data": s.args.data,
               "splits": f"{s.args.train_split} -> {s.args.test_split}", **data_context(s),
               "size": s.size, **{k: v for k, v in outcome.config.items()
                                  if not isinstance(v, (dict, list))}}
    if "shots" not in outcome.metrics:
        return report.metrics_markdown(title, outcome.metrics, context)
    rows = [[shot, r["mean"], r["std"], r["top1"], r["num_train"]]
            for shot, r in outcome.metrics["shots"].items()]
    return (f"# {title}\n\n" + report.markdown_table(["setting", "value"], list(context.items()))
            + "\n" + report.markdown_table(["shots", "top1 mean", "top1 std", "per seed",
                                            "train images"], rows))


# --- command ------------------------------------------------------------------------------------
def _video_data(argv: Sequence[str]) -> bool:
    """Whether ``--data`` names a video dataset (``finetune`` on images has its own command)."""
    data = argparse.ArgumentParser(add_help=False)
    data.add_argument("--data", default=None)
    return is_video_dataset(data.parse_known_args(list(argv))[0].data or "")


def eval_command(argv: Sequence[str]) -> int:
    """``contrastkit eval PROTOCOL ...``; returns the exit status."""
    if list(argv[:1]) == ["voc07"]:
        from contrastkit.eval.cli.voc07 import voc07_command

        return voc07_command(argv[1:])
    if list(argv[:1]) == ["finetune"] and not _video_data(argv):
        from contrastkit.eval.cli.finetune_images import finetune_images_command

        return finetune_images_command(argv[1:])
    if list(argv[:1]) == ["sts"]:  # sentence encoders: options of their own
        from contrastkit.eval.cli.sts import sts_command

        return sts_command(argv[1:])
    args = eval_parser().parse_args(list(argv))
    return guard("contrastkit eval", lambda: _eval(args, argv))


def _eval(args: argparse.Namespace, argv: Sequence[str]) -> int:
    if getattr(args, "k", None) is not None and args.k < 1:
        raise ValueError(f"--k must be >= 1, got {args.k}")
    if getattr(args, "baselines", False) and getattr(args, "linear_protocol", "fast") != "fast":
        raise ValueError("--baselines needs --protocol fast (cached features)")
    out, earlier = check_output(args)
    s = setup(args)
    with staged_folder(out, earlier) as stage:
        outcome = RUNNERS[args.protocol](s, stage)
        results = {**header("eval", argv), **s.record(), "protocol": args.protocol,
                   "config": outcome.config, "metrics": outcome.metrics,
                   "num_test": int(outcome.labels.shape[0]), "figures": outcome.figures,
                   "curves": outcome.curves,
                   "predictions": report.PREDICTIONS if out else None}
        text = _markdown(f"contrastkit eval {args.protocol}", s, outcome)
        if getattr(args, "baselines", False):
            results["baselines"] = run_baselines(s, RUNNERS[args.protocol], outcome)
            text += baselines_markdown(outcome.metrics, results["baselines"])
        if stage is not None:
            report.write_predictions(stage / report.PREDICTIONS, outcome.pred, outcome.labels)
            write_outputs(stage, s, results, text)
    print(text)
    return 0

