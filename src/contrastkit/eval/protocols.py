"""The evaluation protocols of a frozen checkpoint, and :func:`evaluate`: one protocol on one
dataset in one call, the function under ``contrastkit eval {knn,linear,retrieval,lowshot,
finetune}``::

    from contrastkit.eval import EvalRequest, KnnEval, evaluate

    result = evaluate(EvalRequest(checkpoint="runs/sce/last.ckpt", data="digits"), KnnEval(k=20))
    print(result.metrics["top1"])

Features of the train and test splits (cached, see :mod:`contrastkit.eval.features`), one
protocol, ``results.json`` / ``results.md`` / ``predictions.npz`` (+ figures) in the request's
``output`` folder when it names one. Video datasets (``ucf101``, ``hmdb51``, ``kinetics``,
``video_folder``) give one feature per video: the mean over its 30 views, 10 temporal clips x 3
spatial crops (SCE, Denize et al. 2023, appendix D.3); ``finetune`` trains the whole clip
backbone (same appendix, :mod:`contrastkit.eval.finetune`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
import torch
from torch import Tensor

from contrastkit.data.decode.images import collate_images
from contrastkit.data.sources.registry import build_video_dataset
from contrastkit.eval import report
from contrastkit.eval.answer import pretraining_verdict, protocol_evidence
from contrastkit.eval.baselines import baselines_markdown, run_baselines
from contrastkit.eval.classifier import LinearProtocol
from contrastkit.eval.knn import topk_accuracy
from contrastkit.eval.linear import (
    SCE_D1,
    SCE_D2,
    linear_probe,
    lowshot_linear,
    mean_per_class_accuracy,
    too_small_text,
    train_linear_on_images,
)
from contrastkit.eval.results import (
    Evaluation,
    check_output,
    data_context,
    header,
    write_outputs,
)
from contrastkit.eval.retrieval import retrieval_recall
from contrastkit.eval.setup import (
    EvalRequest,
    Setup,
    eval_transform,
    is_video,
    open_split,
    setup,
    split_features,
    video_encoder,
    video_spec,
)
from contrastkit.eval.verdict import Evidence, Verdict
from contrastkit.knn import knn_predict, nearest_neighbors
from contrastkit.outputs import staged_folder

#: ``eval knn``'s k and temperature for a file without a run record (DySTreSS's; a pretraining
#: checkpoint gives its run's kNN monitor's, whose defaults are these).
KNN_K, KNN_TEMPERATURE = 200, 0.1


# --- the protocols' options ---------------------------------------------------------------------
@dataclass(frozen=True)
class KnnEval:
    """Weighted kNN (Wu et al. 2018, eq. 8) of the test features against the train bank.

    Attributes:
        k, temperature: neighbours and vote temperature (None: the run's kNN monitor's, else
            200 and 0.1 as DySTreSS; that k at most the bank's size, as the monitor used it).
        metric: similarity of the neighbour search (``cosine`` or ``l2``).
        backend: neighbour search (``auto``: faiss when installed, ``faiss``, ``torch``).
        baselines: also evaluate raw pixels and the randomly initialised backbone, with
            paired bootstrap intervals of the differences.
    """

    name: ClassVar[str] = "knn"
    k: int | None = None
    temperature: float | None = None
    metric: Literal["cosine", "l2"] = "cosine"
    backend: Literal["auto", "faiss", "torch"] = "auto"
    baselines: bool = False


@dataclass(frozen=True)
class LinearEval:
    """Linear probe on the frozen features (Denize et al. 2023, appendix D).

    Attributes:
        protocol: ``fast`` (cached features, standardised), ``sce_d1`` / ``sce_d2``
            (augmented images), ``sce_d3`` (augmented clips, video).
        epochs, lr, batch_size: None: 100, 0.1 and 256 with ``fast``, else the protocol's.
        validation: ``fast``: share of each class's training images held out to keep the
            epoch with the best validation top-1 (early stopping; 0: none, the last epoch).
        baselines: as :class:`KnnEval` (``fast`` only).
    """

    name: ClassVar[str] = "linear"
    protocol: Literal["fast", "sce_d1", "sce_d2", "sce_d3"] = "fast"
    epochs: int | None = None
    lr: float | None = None
    batch_size: int | None = None
    validation: float = 0.1
    baselines: bool = False


@dataclass(frozen=True)
class RetrievalEval:
    """Recall@k of cosine retrieval (Denize et al. 2023, Table 19).

    Attributes:
        ks: the k of recall@k.
        backend: neighbour search, as :class:`KnnEval`.
    """

    name: ClassVar[str] = "retrieval"
    ks: Sequence[int] = (1, 5, 10)
    backend: Literal["auto", "faiss", "torch"] = "auto"


@dataclass(frozen=True)
class LowshotEval:
    """Low-shot linear probes (Denize et al. 2023, Table 10).

    Attributes:
        shots: images per class, integers or ``"all"``.
        seeds: seeds of the subsets and probes, one run each.
        epochs, lr, batch_size: of each probe (None: 100, 0.1, 256).
        baselines: as :class:`KnnEval`.
    """

    name: ClassVar[str] = "lowshot"
    shots: Sequence[int | str] = ("16", "32", "64", "all")
    seeds: Sequence[int] = (0, 1, 2)
    epochs: int | None = None
    lr: float | None = None
    batch_size: int | None = None
    baselines: bool = False


@dataclass(frozen=True)
class FinetuneEval:
    """Fine-tuning of a clip backbone (Denize et al. 2023, appendix D.3), video datasets only
    (image sets: ``contrastkit eval finetune``, :mod:`contrastkit.eval.finetune_images`).

    Attributes:
        epochs, lr, batch_size, dropout: None: the appendix's 200, 0.1 (batch 64), 64, 0.8.
        max_steps: stop after this many steps (None: no limit).
    """

    name: ClassVar[str] = "finetune"
    epochs: int | None = None
    lr: float | None = None
    batch_size: int | None = None
    dropout: float | None = None
    max_steps: int | None = None


#: The options of one protocol.
Protocol = KnnEval | LinearEval | RetrievalEval | LowshotEval | FinetuneEval


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
    shot_pred: dict[str, Tensor] = field(default_factory=dict)  # lowshot: (seeds, n) per shot


def _features(s: Setup) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    return (*split_features(s, s.request.train_split), *split_features(s, s.request.test_split))


def run_knn(s: Setup, o: KnnEval, out: Path | None) -> Outcome:
    """Weighted kNN (Wu et al. 2018, eq. 8) with top-1/top-5/mean-per-class accuracy."""
    a = s.request
    temperature = o.temperature if o.temperature is not None else \
        float(s.run.knn_temperature or KNN_TEMPERATURE)
    bank = len(open_split(s, a.train_split))  # type: ignore[arg-type]
    # the default k, as the run's kNN monitor used it, is at most the bank; a k given is kept
    k = o.k if o.k is not None else min(int(s.run.knn_k or KNN_K), bank)
    if k > bank:  # checked before any feature is extracted
        raise ValueError(f"k={k} is larger than the bank ({bank} images of --train-split "
                         f"{a.train_split}): pass --k {bank} or less")
    xtr, ytr, xte, yte = _features(s)
    pred, scores = knn_predict(xtr, ytr, xte, k=k, temperature=temperature, metric=o.metric,
                               backend=o.backend)
    metrics = topk_accuracy(scores, yte, (1, 5))  # top-5 only with more than 5 classes
    metrics["mean_per_class"] = mean_per_class_accuracy(pred, yte)
    config = {"k": k, "temperature": temperature, "metric": o.metric, "backend": o.backend}
    outcome = Outcome(metrics, config, pred, yte)
    if out is not None:
        from contrastkit.eval.report_figures import plot_per_class_accuracy

        names = getattr(open_split(s, a.test_split), "classes", None)
        plot_per_class_accuracy(pred.cpu().numpy(), yte.cpu().numpy(),
                                out / "knn_per_class.png", names,
                                title=f"kNN accuracy per class (k={k}, t={temperature:g})")
        outcome.figures.append("knn_per_class.png")
    return outcome


def _probe_kwargs(o: LinearEval | LowshotEval) -> dict:
    """The probe's epochs, lr and batch size (defaults 100, 0.1, 256)."""
    def pick(value: object, default: object) -> object:
        return default if value is None else value

    return {"epochs": pick(o.epochs, 100), "lr": pick(o.lr, 0.1),
            "batch_size": pick(o.batch_size, 256)}


def run_linear(s: Setup, o: LinearEval, out: Path | None) -> Outcome:
    """Linear probe: fast (cached features) or on augmented images (Denize et al. 2023,
    appendix D.1/D.2; clips: D.3)."""
    a = s.request
    if o.protocol == "fast":
        if not 0.0 <= o.validation < 1.0:
            raise ValueError(f"--validation must be in [0, 1), got {o.validation}")
        xtr, ytr, xte, yte = _features(s)
        kwargs = _probe_kwargs(o)
        result = linear_probe(xtr, ytr, xte, yte, LinearProtocol(**kwargs), seed=a.seed,
                              validation=o.validation)
        config = {"protocol": "fast", **kwargs, "standardize": True, "seed": a.seed,
                  "validation": o.validation}
        if "validation_too_small" in result:
            config["validation_too_small"] = result["validation_too_small"]
        elif o.validation:
            config["early_stopping"] = {k: result[k] for k in ("best_epoch", "num_validation",
                                                                 "num_fit")}
    else:
        if (o.protocol == "sce_d3") != is_video(s):
            raise ValueError(f"--protocol {o.protocol} does not apply to --data {a.data}: "
                             "sce_d3 is for video datasets, sce_d1/sce_d2 for images")
        xte, yte = split_features(s, a.test_split)
        runner = _linear_on_clips if is_video(s) else _linear_on_images
        result, config = runner(s, o, int(yte.max()) + 1)
    classifier = result["classifier"]
    with torch.no_grad():
        pred = classifier(xte.to(classifier.weight.device)).argmax(dim=1).cpu()  # type: ignore[operator, union-attr]
    curve = [float(v) for v in result["loss_curve"]]  # type: ignore[union-attr]
    if not all(np.isfinite(curve)):
        raise ValueError(f"the linear probe diverged (training loss {curve}); lower --lr")
    metrics = {k: result[k] for k in ("top1", "top5", "mean_per_class") if k in result}
    outcome = Outcome(metrics, config, pred, yte, curves={"loss_per_epoch": curve})
    accuracy = {k: [float(v) for v in result[f"{k}_top1_curve"]]  # type: ignore[union-attr]
                for k in ("train", "val", "test") if f"{k}_top1_curve" in result}
    outcome.curves.update({f"{k}_top1_per_epoch": v for k, v in accuracy.items()})
    kept = result.get("best_epoch")
    if isinstance(kept, int):
        metrics["train_top1"] = accuracy["train"][kept - 1]
        metrics["validation_top1"] = accuracy["val"][kept - 1]
    if out is not None and accuracy:
        from contrastkit.eval.report_figures import plot_probe_accuracy

        plot_probe_accuracy(accuracy["train"], accuracy["test"], out / "probe_accuracy.png",
                            validation=accuracy.get("val"), kept_epoch=kept)  # type: ignore[arg-type]
        outcome.figures.append("probe_accuracy.png")
    return outcome


def _linear_on_images(s: Setup, o: LinearEval, test_classes: int) -> tuple[dict, dict]:
    """Linear protocol on augmented images, frozen backbone (Denize et al. 2023, D.1/D.2)."""
    a = s.request
    base = SCE_D1 if o.protocol == "sce_d1" else SCE_D2
    train, test = open_split(s, a.train_split), open_split(s, a.test_split)
    protocol, classes, train_loader, test_loader = _linear_setup(s, o, base, train, test,
                                                                 test_classes)
    backbone = s.backbone.to(s.device).eval()
    train_tf, test_tf = eval_transform(s, "eval_train").to(s.device), eval_transform(s)
    test_tf = test_tf.to(s.device)
    result = train_linear_on_images(
        backbone, train_loader, test_loader, protocol,
        lambda x: train_tf(x.to(s.device)), lambda x: test_tf(x.to(s.device)), classes,
        device=s.device, seed=a.seed,
    )
    return result, {"protocol": o.protocol, **asdict(protocol), "seed": a.seed}


def _linear_setup(s: Setup, o: LinearEval, base, train, test, test_classes: int) -> tuple:
    """A linear protocol with the request's overrides, the class count and the loaders."""
    from torch.utils.data import DataLoader

    a = s.request
    changes = {k: v for k, v in (("epochs", o.epochs), ("lr", o.lr),
                                 ("batch_size", o.batch_size)) if v is not None}
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
    return build_video_dataset(s.request.data, s.request.root, split, spec, role="train",
                               skip_corrupt=s.request.skip_corrupt)


def _linear_on_clips(s: Setup, o: LinearEval, test_classes: int) -> tuple[dict, dict]:
    """Linear protocol of Denize et al. 2023, appendix D.3: random clip, random crop, flip;
    30-view test features."""
    from contrastkit.eval.video import SCE_D3, flip_only_transform

    a = s.request
    train, test = _clip_split(s, a.train_split), open_split(s, a.test_split)
    protocol, classes, train_loader, test_loader = _linear_setup(s, o, SCE_D3, train, test,
                                                                 test_classes)
    encoder = video_encoder(s).to(s.device).eval()
    train_tf = flip_only_transform(s.size, s.normalize).to(s.device)
    result = train_linear_on_images(
        encoder, train_loader, test_loader, protocol, lambda x: train_tf(x.to(s.device)),
        lambda x: x.to(s.device), classes, device=s.device, seed=a.seed,
    )
    return result, {"protocol": "sce_d3", **asdict(protocol), "seed": a.seed}


def run_finetune(s: Setup, o: FinetuneEval, out: Path | None) -> Outcome:
    """Fine-tuning of the whole clip backbone (Denize et al. 2023, appendix D.3) on videos."""
    from contrastkit.eval.finetune import SCE_D3_FINETUNE, finetune_video

    a = s.request
    if not is_video(s):
        raise ValueError(f"finetune applies to video datasets, not --data {a.data}")
    if s.projector is not None:
        raise ValueError("--space projector: finetune trains the backbone itself; the "
                         "projector's embeddings are evaluated by knn, linear, retrieval, lowshot")
    changes = {k: v for k, v in (("epochs", o.epochs), ("lr", o.lr),
                                 ("batch_size", o.batch_size),
                                 ("dropout", o.dropout)) if v is not None}
    protocol = replace(SCE_D3_FINETUNE, **changes)
    train, test = _clip_split(s, a.train_split), open_split(s, a.test_split)
    classes = max(max(train.targets), max(test.targets)) + 1  # type: ignore[attr-defined]
    result = finetune_video(s.backbone, train, test, classes, size=s.size,  # type: ignore[arg-type]
                            protocol=protocol, normalize=s.normalize, device=s.device,
                            seed=a.seed, max_steps=o.max_steps)
    pred, yte = result["scores"].argmax(dim=1), result["labels"]  # type: ignore[union-attr]
    metrics = {k: result[k] for k in ("top1", "top5", "mean_per_class") if k in result}
    config = {"protocol": "sce_d3_finetune", **asdict(protocol), "max_steps": o.max_steps,
              "steps": result["steps"], "seed": a.seed}
    curve = [float(v) for v in result["loss_curve"]]  # type: ignore[union-attr]
    return Outcome(metrics, config, pred, yte, curves={"loss_per_epoch": curve})


def run_retrieval(s: Setup, o: RetrievalEval, out: Path | None) -> Outcome:
    """Recall@k of cosine retrieval (Denize et al. 2023, Table 19); predictions: 1-NN labels."""
    xtr, ytr, xte, yte = _features(s)
    metrics = retrieval_recall(xtr, ytr, xte, yte, list(o.ks), backend=o.backend)
    _, idx = nearest_neighbors(xtr, xte, 1, metric="cosine", backend=o.backend)
    pred = ytr[idx[:, 0].cpu()]
    outcome = Outcome(metrics, {"ks": list(o.ks), "backend": o.backend}, pred, yte)
    if out is not None:
        from contrastkit.eval.report_figures import plot_recall_at_k

        plot_recall_at_k(metrics, out / "recall_at_k.png")
        outcome.figures.append("recall_at_k.png")
    return outcome


def _parse_shots(values: Sequence[int | str]) -> list[int | None]:
    shots: list[int | None] = []
    for v in map(str, values):
        if v == "all":
            shots.append(None)
        elif v.isdigit() and int(v) > 0:
            shots.append(int(v))
        else:
            raise ValueError(f"--shots values must be positive integers or 'all', got {v!r}")
    return shots


def check_shots(shots: Sequence[int | None], labels: Sequence[int],
                classes: Sequence[str] | None, split: str) -> None:
    """Every class of ``labels`` (training split ``split``) has at least the largest of
    ``shots`` images.

    Raises:
        ValueError: naming the smallest class, its count and ``--shots``.
    """
    largest = max((n for n in shots if n is not None), default=None)
    if largest is None or not len(labels):
        return
    counts = torch.bincount(torch.as_tensor(list(labels), dtype=torch.long))
    present = torch.nonzero(counts).flatten()
    smallest = int(present[counts[present].argmin()])
    count = int(counts[smallest])
    if count < largest:
        name = classes[smallest] if classes and smallest < len(classes) else str(smallest)
        raise ValueError(f"--shots {largest}: class {name!r} has {count} images in "
                         f"--train-split {split}, fewer than {largest}; pass --shots values of "
                         f"at most {count} (e.g. --shots {max(1, count // 2)} {count} all)")


def run_lowshot(s: Setup, o: LowshotEval, out: Path | None) -> Outcome:
    """Low-shot linear probes (Denize et al. 2023, Table 10); predictions are those of the last
    shot, first seed; every seed's are kept per shot (``shot_pred``) for the baselines."""
    shots = _parse_shots(o.shots)
    train = open_split(s, s.request.train_split)
    check_shots(shots, getattr(train, "targets", []), getattr(train, "classes", None),
                s.request.train_split)  # before any feature is extracted
    xtr, ytr, xte, yte = _features(s)
    check_shots(shots, ytr.tolist(), getattr(train, "classes", None), s.request.train_split)
    kwargs = _probe_kwargs(o)
    probe_protocol, classes = LinearProtocol(**kwargs), max(int(ytr.max()), int(yte.max())) + 1
    table = lowshot_linear(xtr, ytr, xte, yte, shots=shots, seeds=list(o.seeds),
                           protocol=probe_protocol, num_classes=classes)
    shot_pred = {("all" if k is None else str(k)): v.pop("pred") for k, v in table.items()}
    last, seed = shots[-1], o.seeds[0]
    pred = shot_pred["all" if last is None else str(last)][0]
    metrics = {"shots": {("all" if k is None else str(k)): v for k, v in table.items()}}
    config = {**kwargs, "num_classes": classes, "shots": list(o.shots), "seeds": list(o.seeds),
              "predictions_from": {"shots": "all" if last is None else last, "seed": seed}}
    outcome = Outcome(metrics, config, pred, yte, shot_pred=shot_pred)
    if out is not None:
        from contrastkit.eval.report_figures import plot_lowshot

        plot_lowshot(metrics["shots"], out / "lowshot.png")
        outcome.figures.append("lowshot.png")
    return outcome


RUNNERS: dict[str, Callable[[Setup, Protocol, Path | None], Outcome]] = {
    "knn": run_knn, "linear": run_linear, "retrieval": run_retrieval, "lowshot": run_lowshot,
    "finetune": run_finetune,
}


def early_stopping_line(config: dict, metrics: dict) -> str | None:
    """How the fast linear probe guarded against overfitting, in words, or why its validation
    split could not (None: it was not asked to)."""
    if "validation_too_small" in config:
        return (f"{100 * config['validation']:g}% of each class: "
                f"{too_small_text(config['validation_too_small'])}; the probe trains on every "
                f"training image and the last epoch ({config['epochs']}) is used")
    stop = config.get("early_stopping")
    if not stop:
        return None
    return (f"{100 * config['validation']:g}% of each class of the training split held out "
            f"({stop['num_validation']} images, the probe trains on {stop['num_fit']}); the "
            f"probe of epoch {stop['best_epoch']} of {config['epochs']} (best validation "
            f"top-1) is kept: train top-1 {100 * metrics['train_top1']:.1f}%, validation "
            f"{100 * metrics['validation_top1']:.1f}%")


def _markdown(title: str, s: Setup, outcome: Outcome) -> str:
    context = {"checkpoint": s.checkpoint.name, "sha256": s.sha256[:16],
               "backbone": s.spec.get("name"), "data": s.request.data,
               "splits": f"{s.request.train_split} -> {s.request.test_split}", **data_context(s),
               "size": s.size, **{k: v for k, v in outcome.config.items()
                                  if not isinstance(v, (dict, list))}}
    stopping = early_stopping_line(outcome.config, outcome.metrics)
    if stopping:
        key = "validation split" if "validation_too_small" in outcome.config else \
            "early stopping"
        context[key] = stopping
    if "shots" not in outcome.metrics:
        return report.metrics_markdown(title, outcome.metrics, context)
    rows = [[shot, r["mean"], r["std"], r["top1"], r["num_train"]]
            for shot, r in outcome.metrics["shots"].items()]
    return (f"# {title}\n\n" + report.markdown_table(["setting", "value"], list(context.items()))
            + "\n" + report.markdown_table(["shots", "top1 mean", "top1 std", "per seed",
                                            "train images"], rows))


# --- the verdict ----------------------------------------------------------------------------------
def _evidence(name: str, outcome: Outcome, baselines: dict) -> Evidence:
    classes = int(outcome.labels.max()) + 1
    return protocol_evidence(name, outcome.config, outcome.metrics, classes, baselines)


def companion_evidence(s: Setup, name: str) -> Evidence:
    """``knn`` (the run's monitor k and temperature, at most the bank) or ``linear`` (the fast
    probe with its defaults) on ``s`` against the baselines: what the verdict adds to a command
    that lacks it (:func:`~contrastkit.eval.answer.pretraining_verdict`)."""
    if name == "knn":
        bank = len(open_split(s, s.request.train_split))  # type: ignore[arg-type]
        options: Protocol = KnnEval(k=min(int(s.run.knn_k or KNN_K), bank))
    else:
        options = LinearEval()
    runner = RUNNERS[name]
    outcome = runner(s, options, None)
    return _evidence(name, outcome, run_baselines(s, lambda b, o: runner(b, options, o),
                                                  outcome))


def verdict_of(s: Setup, given: Sequence[Evidence] = ()) -> Verdict:
    """The verdict on ``s``'s checkpoint: ``given`` and kNN and the fast linear probe where it
    lacks them (:func:`companion_evidence`)."""
    return pretraining_verdict(given, lambda name: companion_evidence(s, name))


# --- one call -----------------------------------------------------------------------------------
def evaluate(request: EvalRequest, protocol: Protocol | None = None,
             argv: Sequence[str] | None = None) -> Evaluation:
    """Evaluate the checkpoint of ``request`` on its data with one protocol.

    Args:
        request: checkpoint, data and how (:class:`~contrastkit.eval.setup.EvalRequest`);
            with ``request.output`` set, the results and figures are written there.
        protocol: :class:`KnnEval` (default), :class:`LinearEval`, :class:`RetrievalEval`,
            :class:`LowshotEval` or :class:`FinetuneEval`.
        argv: the command line it came from, recorded in the results (None: from Python).

    Raises:
        ValueError, FileNotFoundError: bad options, files or data, naming the option.
    """
    protocol = KnnEval() if protocol is None else protocol
    if isinstance(protocol, KnnEval) and protocol.k is not None and protocol.k < 1:
        raise ValueError(f"--k must be >= 1, got {protocol.k}")
    if getattr(protocol, "baselines", False) and getattr(protocol, "protocol", "fast") != "fast":
        raise ValueError("--baselines needs --protocol fast (cached features)")
    out, earlier = check_output(request.output, request.overwrite)
    s = setup(request)
    runner = RUNNERS[protocol.name]
    with staged_folder(out, earlier) as stage:
        outcome = runner(s, protocol, stage)
        results = {**header("eval", argv), **s.record(), "protocol": protocol.name,
                   "config": outcome.config, "metrics": outcome.metrics,
                   "num_test": int(outcome.labels.shape[0]), "figures": outcome.figures,
                   "curves": outcome.curves,
                   "predictions": report.PREDICTIONS if out else None}
        text = _markdown(f"contrastkit eval {protocol.name}", s, outcome)
        if getattr(protocol, "baselines", False):
            results["baselines"] = run_baselines(s, lambda b, o: runner(b, protocol, o),
                                                 outcome)
            text += baselines_markdown(outcome.metrics, results["baselines"])
            verdict = verdict_of(s, [_evidence(protocol.name, outcome, results["baselines"])])
            results["verdict"] = verdict.record()
            text += verdict.markdown()
        if stage is not None:
            report.write_predictions(stage / report.PREDICTIONS, outcome.pred, outcome.labels)
            write_outputs(stage, s, results, text)
    return Evaluation(results, text, outcome.pred, outcome.labels)
