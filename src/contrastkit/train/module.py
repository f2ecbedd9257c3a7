"""The Lightning module that drives any :class:`~contrastkit.methods.ContrastiveMethod`.

It owns what is common to every method and nothing method-specific:

* views: uint8 batch on the device -> augmented float views (GPU augmentation when the batch
  is on a GPU); with ``views.video`` the batch is a pair of clip batches and view ``i`` is made
  from clip ``i`` (:mod:`contrastkit.train.video`, SCE 4.2);
* the optimiser (SGD/LARS/AdamW, linear scaling rule, warm-up + cosine per step);
* schedules: the :class:`~contrastkit.schedules.ScheduleState` handed to the method, and the
  method's after-step hook (EMA update, queue commit) once per optimiser step, so gradient
  accumulation behaves like the equivalent large batch;
* the online monitors: a linear classifier on detached backbone features and a weighted
  kNN on the validation split, neither of which changes the backbone;
* a non-finite loss stops the run with the step number (the last checkpoint stays intact:
  checkpoints are written atomically).
"""

from __future__ import annotations

import math
from dataclasses import asdict

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from contrastkit.methods.base import ContrastiveMethod
from contrastkit.optim import build_optimizer, param_groups, scaled_lr, warmup_cosine_lambda
from contrastkit.schedules import ScheduleState
from contrastkit.train.specs import OnlineEvalSpec, OptimizerSpec, ViewsSpec
from contrastkit.train.views import build_eval_view, build_train_views


def _full_precision(batch: Tensor | list[Tensor]) -> torch.autocast:
    """Augmentations run in float32 even inside a bf16/fp16 autocast region."""
    first = batch[0] if isinstance(batch, list) else batch
    return torch.autocast(device_type=first.device.type, enabled=False)


class NonFiniteLossError(FloatingPointError):
    """Raised when the training loss becomes NaN or infinite."""


class PretrainModule(L.LightningModule):
    """Pretrain a contrastive method.

    Args:
        method: the method (``SimCLR``, ``MoCo``, ``ReSSL``, ``SCE``, ``SupervisedContrastive``).
        views: how views are made (presets, size, multi-crop).
        optimizer: optimiser and learning-rate schedule.
        online_eval: online linear classifier and kNN monitor.
        num_classes: classes of the labelled data (online monitors); 0 disables them.
    """

    def __init__(
        self,
        method: ContrastiveMethod,
        views: ViewsSpec | None = None,
        optimizer: OptimizerSpec | None = None,
        online_eval: OnlineEvalSpec | None = None,
        num_classes: int = 10,
    ) -> None:
        super().__init__()
        self.method = method
        self.views_spec = views or ViewsSpec()
        self.optimizer_spec = optimizer or OptimizerSpec()
        self.online_spec = online_eval or OnlineEvalSpec()
        if self.views_spec.multicrop is not None and not method.supports_multicrop:
            raise ValueError(
                f"views.multicrop is set but {type(method).__name__} has no momentum target "
                "branch: local crops are queries only, use SCE, MoCo or ReSSL"
            )
        self.num_classes = num_classes
        if self.views_spec.video is not None:
            from contrastkit.train import video

            self.train_views = video.build_train_views(self.views_spec, method.default_views)
            self.eval_view = video.build_eval_view(self.views_spec)
        else:
            self.train_views = build_train_views(self.views_spec, method.default_views)
            self.eval_view = build_eval_view(self.views_spec)
        use_linear = self.online_spec.linear and num_classes > 0
        self.classifier = nn.Linear(method.backbone.out_dim, num_classes) if use_linear else None
        self._val_features: dict[int, list[Tensor]] = {}
        self._val_labels: dict[int, list[Tensor]] = {}

    # --- schedules ---------------------------------------------------------------------------
    def _total_steps(self) -> int:
        total = self.trainer.estimated_stepping_batches
        if not math.isfinite(total) or total <= 0:
            raise ValueError("trainer.max_epochs (or max_steps) must be set for pretraining")
        return int(total)

    def _max_epochs(self) -> int:
        epochs = self.trainer.max_epochs
        return epochs if epochs is not None and epochs > 0 else 1

    def schedule_state(self) -> ScheduleState:
        """Where training stands: optimiser steps taken, total steps, fractional epoch."""
        total = self._total_steps()
        max_epochs = self._max_epochs()
        per_epoch = max(total / max_epochs, 1.0)
        step = int(self.global_step)
        return ScheduleState(step=step, total_steps=total, epoch=step / per_epoch,
                             total_epochs=float(max_epochs))

    # --- training ----------------------------------------------------------------------------
    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        images, labels = batch[0], batch[1]
        if isinstance(images, (list, tuple)) and self.views_spec.video is None:
            raise ValueError("the batch holds a list of clips (a video dataset): set views.video")
        with torch.no_grad(), _full_precision(images):
            views = self.train_views(images)
        out = self.method(views, labels, self.schedule_state())
        loss = out.loss
        if not bool(torch.isfinite(loss.detach())):
            raise NonFiniteLossError(
                f"training loss is {loss.item()} at step {self.global_step} (epoch "
                f"{self.current_epoch}, batch {batch_idx}); the run stops here and the last "
                "checkpoint written before this step is intact"
            )
        batch_size = labels.shape[0]
        self.log("train/loss", loss.detach(), prog_bar=True, batch_size=batch_size)
        for name, value in out.logs.items():
            self.log(f"train/{name}", value, batch_size=batch_size)
        if self.classifier is not None:
            known = labels >= 0
            if bool(known.any()):
                logits = self.classifier(out.features[known].float())
                clf_loss = F.cross_entropy(logits, labels[known])
                acc = (logits.argmax(1) == labels[known]).float().mean()
                self.log("train/online_linear_acc", acc, batch_size=int(known.sum()))
                loss = loss + clf_loss
        return loss

    def optimizer_step(self, *args, **kwargs) -> None:
        super().optimizer_step(*args, **kwargs)
        logs = self.method.after_optimizer_step(self.schedule_state())
        for name, value in logs.items():
            self.log(f"train/{name}", value)

    def configure_optimizers(self):
        spec = self.optimizer_spec
        global_batch = self._global_batch()
        lr = scaled_lr(spec.base_lr, global_batch) if spec.scale_lr else spec.base_lr
        groups = param_groups(self.method, spec.weight_decay, spec.exclude_bias_and_norm)
        if self.classifier is not None:
            groups.append({"params": list(self.classifier.parameters()), "weight_decay": 0.0,
                           "lars_adapt": False, "lr": spec.online_lr, "name": "online_linear"})
        optimizer = build_optimizer(spec.name, groups, lr, spec.weight_decay, spec.momentum)
        total = self._total_steps()
        max_epochs = self._max_epochs()
        warmup = round(spec.warmup_epochs * total / max_epochs)
        factor = warmup_cosine_lambda(total, min(warmup, total), spec.final_lr_ratio,
                                      spec.warmup_start_ratio)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
        return {"optimizer": optimizer,
                "lr_scheduler": {"scheduler": scheduler, "interval": "step", "frequency": 1}}

    def _global_batch(self) -> int:
        datamodule = getattr(self.trainer, "datamodule", None)
        per_process = getattr(datamodule, "batch_size", None)
        if per_process is None:
            return 256
        accumulate = self.trainer.accumulate_grad_batches
        return int(per_process) * self.trainer.world_size * int(accumulate)

    # --- online kNN / linear monitors on the validation split -------------------------------
    def validation_step(
        self, batch: tuple[Tensor, Tensor], batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        images, labels = batch[0], batch[1]
        with _full_precision(images):
            view = self.eval_view(images)
        features = self.method.backbone(view)
        self._val_features.setdefault(dataloader_idx, []).append(features.float())
        self._val_labels.setdefault(dataloader_idx, []).append(labels)

    def on_validation_epoch_end(self) -> None:
        # Every process evaluates the whole split (the data module does not shard it).
        feats = {i: torch.cat(v) for i, v in self._val_features.items()}
        labels = {i: torch.cat(v) for i, v in self._val_labels.items()}
        self._val_features.clear()
        self._val_labels.clear()
        if 1 not in feats:  # the datamodule gives (bank, query) loaders
            return
        bank, bank_y, query, query_y = feats[0], labels[0], feats[1], labels[1]
        if self.online_spec.knn and self.num_classes > 0:
            from contrastkit.eval import knn_predict

            k = min(self.online_spec.knn_k, bank.shape[0])
            # The bank may be a subset missing some class: let knn_predict infer the count.
            pred, _ = knn_predict(bank, bank_y, query, k=k,
                                  temperature=self.online_spec.knn_temperature)
            self.log("val/knn_top1", (pred.to(query_y.device) == query_y).float().mean(),
                     prog_bar=True, sync_dist=False)
        if self.classifier is not None:
            acc = (self.classifier(query).argmax(1) == query_y).float().mean()
            self.log("val/online_linear_top1", acc, sync_dist=False)

    # --- checkpoint metadata -----------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["contrastkit"] = {
            "backbone": asdict(self.method.backbone_spec),
            "method": type(self.method).__name__,
            "num_classes": self.num_classes,
        }
