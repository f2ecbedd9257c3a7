"""Fine-tuning of a pretrained image backbone with a new classifier (DySTreSS, Manna et al.
2023, Table 11 and appendix A.2), with a resumable state file.

Appendix A.2: "We fine-tuned the models ... for 50 epochs using an SGD optimizer. We used class
weights to mitigate the effect of imbalance in all datasets, except the natural image datasets.
For the MURA, ISIC2016, and MHIST datasets, we used positive class weights of 0.7097, 4.24, and
2.45 ... [Chaoyang:] 1.264, 1.667, 1.0, and 2.114 ... a batch size of 128 ... a learning rate of
0.1 and 1.0 [multi-class, binary] ... multistep decay ... by a factor of 0.1 at the 30th and 40th
epochs." (:data:`DYSTRESS_A2`, :data:`DYSTRESS_CLASS_WEIGHTS`).

What the text leaves open, and our choices:

* binary sets: one logit and ``BCEWithLogitsLoss(pos_weight=w)`` (the "positive class weight");
  multi-class sets: ``cross_entropy(weight=class weights)``; the prediction of a binary set is
  ``logit > 0``;
* the epoch ``e`` (0-based) runs at ``lr * 0.1 ** #{m in (30, 40): e >= m}``: epochs 0-29 at
  ``lr``, 30-39 at ``lr / 10``, 40-49 at ``lr / 100`` (PyTorch's ``MultiStepLR`` reading; the
  step schedule of :class:`~contrastkit.eval.classifier.LinearProtocol`, run by the loop of
  :mod:`.classifier`);
* SGD momentum 0.9, weight decay 1e-4, no warm-up;
* resolution 224: training images resized to a 256 square (shorter side, centre crop), then a
  random resized crop (scale 0.08-1) and a horizontal flip; test images resized to 256 and
  centre-cropped to 224 (the ``eval_train`` / ``eval`` presets);
* metrics: top-1 accuracy and mean per-class accuracy, and for binary sets the area under the
  ROC curve of the logit.

The state file (model, optimiser, generators, curves, epoch) is written atomically after every
epoch; :func:`finetune_images` with ``resume=True`` continues from it and gives the same model as
an uninterrupted run.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset

from contrastkit.data.decode.images import collate_images
from contrastkit.eval.classifier import LinearProtocol, MappedBatches, sgd, train_classifier
from contrastkit.outputs import temp_file_beside

__all__ = ["DYSTRESS_A2", "DYSTRESS_CLASS_WEIGHTS", "ImageFinetuneProtocol", "finetune_images"]


@dataclass(frozen=True)
class ImageFinetuneProtocol(LinearProtocol):
    """Hyper-parameters of image fine-tuning (module docstring): a
    :class:`~contrastkit.eval.classifier.LinearProtocol` with A.2's values (step decay) and what
    fine-tuning adds.

    Attributes:
        lr_binary: the learning rate of a binary set (one logit; ``lr`` is the multi-class one).
        size: training and test crop side.
    """

    epochs: int = 50
    lr: float = 0.1
    weight_decay: float = 1e-4
    batch_size: int = 128
    schedule: str = "step"
    milestones: tuple[int, ...] = (30, 40)
    lr_binary: float = 1.0
    size: int = 224

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
            raise ValueError(f"--size must be a positive int, got {self.size!r}")
        if not self.lr_binary > 0:
            raise ValueError(f"lr_binary must be > 0, got {self.lr_binary}")
        if list(self.milestones) != sorted(set(self.milestones)) or any(
                m < 1 for m in self.milestones):
            raise ValueError(f"--milestones must be increasing positive epochs, got "
                             f"{list(self.milestones)}")

    def schedule_for(self, binary: bool) -> ImageFinetuneProtocol:
        """The protocol a set runs: ``lr`` for several classes, ``lr_binary`` for two."""
        return replace(self, lr=self.lr_binary) if binary else self


#: DySTreSS appendix A.2.
DYSTRESS_A2 = ImageFinetuneProtocol()
#: DySTreSS appendix A.2: positive class weight (binary sets) or class weights (Chaoyang).
DYSTRESS_CLASS_WEIGHTS: dict[str, tuple[float, ...]] = {
    "mura": (0.7097,), "isic2016": (4.24,), "mhist": (2.45,),
    "chaoyang": (1.264, 1.667, 1.0, 2.114),
}


class ImageClassifier(nn.Module):
    """``backbone -> linear`` (one logit for a binary set)."""

    def __init__(self, backbone: nn.Module, outputs: int) -> None:
        super().__init__()
        out_dim = getattr(backbone, "out_dim", None)
        if not isinstance(out_dim, int):
            raise ValueError("backbone must expose an int out_dim")
        self.backbone, self.classifier = backbone, nn.Linear(out_dim, outputs)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.backbone(x))


def _loss(logits: Tensor, labels: Tensor, weights: Tensor | None, binary: bool) -> Tensor:
    if binary:
        return F.binary_cross_entropy_with_logits(logits[:, 0], labels.float(),
                                                  pos_weight=weights)
    return F.cross_entropy(logits, labels, weight=weights)


def _save_state(path: Path, state: dict) -> None:
    fd, tmp = temp_file_beside(path)
    os.close(fd)
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _load_state(path: Path, record: dict) -> dict:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a truncated or foreign file
        raise ValueError(f"{path}: not a readable fine-tuning state ({err})") from None
    if state.get("record") != record:
        raise ValueError(f"{path}: the state was written by another fine-tuning (checkpoint, "
                         "data or protocol differ); run without --resume in another --output")
    return state


def finetune_images(
    backbone: nn.Module, train_set: Dataset, test_set: Dataset, num_classes: int, *,
    train_transform: nn.Module, test_transform: nn.Module, generator: torch.Generator,
    protocol: ImageFinetuneProtocol = DYSTRESS_A2, class_weights: tuple[float, ...] | None = None,
    device: torch.device | str = "cpu", seed: int = 0, state_path: Path | None = None,
    resume: bool = False, record: dict | None = None, stop_after: int | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, object]:
    """Fine-tune a copy of ``backbone`` and a new classifier (module docstring).

    Args:
        backbone: pretrained ``(B, 3, H, W) -> (B, D)`` module with ``out_dim`` (copied).
        train_set, test_set: ``(uint8 image, label)`` items of one size.
        num_classes: classes; 2 gives one logit and the BCE loss.
        train_transform, test_transform: batched transforms on ``device``; ``train_transform``
            draws from ``generator`` (saved in the state so a resumed run repeats the draws).
        protocol: hyper-parameters (default :data:`DYSTRESS_A2`).
        class_weights: positive class weight (binary) or one weight per class; None: none.
        device: training device.
        seed: seed of the classifier's initialisation and of the shuffling.
        state_path: state file written after every epoch (None: none).
        resume: continue from ``state_path``.
        record: what the state must match to be resumed (checkpoint, data, protocol).
        stop_after: stop after this many epochs in total (an interrupted run; None: all).
        log: called with one line per epoch (loss, learning rate); None: silent.

    Returns:
        ``{"top1", "mean_per_class", ["auroc"], "loss_curve", "lr_curve", "epochs_done",
        "pred", "labels", "scores"}``; ``lr_curve`` has one value per epoch.
    """
    from contrastkit.eval.linear import mean_per_class_accuracy

    binary = num_classes == 2
    weights = None if class_weights is None else torch.tensor(class_weights, device=device)
    if weights is not None and weights.numel() != (1 if binary else num_classes):
        raise ValueError(f"class weights {list(class_weights)} do not fit {num_classes} classes")
    record = {**(record or {}), "protocol": asdict(protocol), "seed": seed,
              "class_weights": list(class_weights or [])}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = ImageClassifier(copy.deepcopy(backbone), 1 if binary else num_classes).to(device)
    schedule = protocol.schedule_for(binary)
    optimizer = sgd(model.parameters(), schedule)
    shuffle = torch.Generator().manual_seed(seed)
    loss_curve: list[float] = []
    lr_curve: list[float] = []
    start = 0
    if resume:
        if state_path is None or not state_path.is_file():
            raise FileNotFoundError(f"--resume: {state_path} does not exist")
        state = _load_state(state_path, record)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        shuffle.set_state(state["shuffle"])
        generator.set_state(state["augment"])
        loss_curve, lr_curve, start = state["loss_curve"], state["lr_curve"], state["epoch"]
    loader = DataLoader(train_set, batch_size=protocol.batch_size, shuffle=True,
                        generator=shuffle, drop_last=len(train_set) >= protocol.batch_size,  # type: ignore[arg-type]
                        collate_fn=collate_images)
    batches = MappedBatches(loader, lambda batch: (
        train_transform(batch[0].to(device)), torch.as_tensor(batch[1]).to(device)))
    end = protocol.epochs if stop_after is None else min(stop_after, protocol.epochs)

    def epoch_end(epoch: int, loss: float) -> None:
        lr = schedule.lr_at(epoch)
        loss_curve.append(loss)
        lr_curve.append(lr)
        if log is not None:
            log(f"epoch {epoch + 1}/{protocol.epochs}: loss {loss:.4f}, lr {lr:g}")
        if state_path is not None:
            _save_state(state_path, {"record": record, "epoch": epoch + 1,
                                     "model": model.state_dict(),
                                     "optimizer": optimizer.state_dict(),
                                     "shuffle": shuffle.get_state(),
                                     "augment": generator.get_state(),
                                     "loss_curve": loss_curve, "lr_curve": lr_curve})

    train_classifier(model, batches, schedule,
                     loss_fn=lambda logits, labels: _loss(logits, labels, weights, binary),
                     optimizer=optimizer, start_epoch=start, stop_epoch=end, epoch_end=epoch_end)
    model.eval()
    scores, targets = [], []
    with torch.no_grad():
        for images, labels in DataLoader(test_set, batch_size=protocol.batch_size,
                                         collate_fn=collate_images):
            scores.append(model(test_transform(images.to(device))).float().cpu())
            targets.append(torch.as_tensor(labels).long())
    logits, labels = torch.cat(scores), torch.cat(targets)
    pred = (logits[:, 0] > 0).long() if binary else logits.argmax(dim=1)
    result: dict[str, object] = {"top1": float((pred == labels).float().mean()),
                                 "mean_per_class": mean_per_class_accuracy(pred, labels)}
    if binary and 0 < int(labels.sum()) < labels.numel():
        from sklearn.metrics import roc_auc_score

        result["auroc"] = float(roc_auc_score(labels.numpy(), logits[:, 0].numpy()))
    result.update(loss_curve=loss_curve, lr_curve=lr_curve, epochs_done=end, pred=pred,
                  labels=labels, scores=logits, model=model)
    return result
