"""The Lightning module that drives any :class:`~contrastkit.methods.ContrastiveMethod`.

It owns what is common to every method and nothing method-specific:

* views: uint8 batch on the device -> augmented float views (GPU augmentation when the batch
  is on a GPU); with ``views.video`` the batch is a pair of clip batches and view ``i`` is made
  from clip ``i`` (:mod:`contrastkit.data.augment.views`; Denize et al. 2023, section 4.2);
* the optimiser (SGD/LARS/AdamW, linear scaling rule, warm-up + cosine per step);
* schedules: the :class:`~contrastkit.schedules.ScheduleState` handed to the method, and the
  method's after-step hook (EMA update, queue commit) once per optimiser step, so gradient
  accumulation behaves like the equivalent large batch;
* the online monitors: a linear classifier on detached backbone features and a weighted
  kNN on the validation split (sharded over processes), neither of which changes the backbone;
  the validation pass reads only the splits the monitors that run need (:meth:`monitor_splits`)
  and does not run at all when both are off;
* a non-finite loss stops the run with the step, epoch and batch where it appeared; the check
  runs on the device and is read every ``trainer.log_every_n_steps`` steps and before every
  checkpoint, so no checkpoint holds weights updated with a NaN (:mod:`.finite_guard`);
* a collapsed embedding is warned about once, read at the logging steps (:mod:`.collapse_check`);
* one augmentation generator per process on its device (:mod:`.augment_rng`);
* the GPU path: the step runs inside :func:`contrastkit.hot_path.hot_path` (no host reads:
  see ``docs/performance.md`` for the inventory), 2-D backbones in ``channels_last`` on CUDA,
  optionally ``torch.compile``-d backbone and heads, metrics logged only on logging steps;
* every checkpoint's ``contrastkit`` entry: the backbone spec and what evaluating the
  checkpoint needs (views, input size, normalisation, class names, data split options; see
  :mod:`contrastkit.checkpoints`), so that ``contrastkit eval`` needs the checkpoint alone.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor, nn

from contrastkit.checks import check_positive_float
from contrastkit.data import augment
from contrastkit.data.augment.views import build_eval_view, build_train_views
from contrastkit.data.specs import ViewsSpec
from contrastkit.distributed import gather_no_grad, is_distributed, rank, world_size
from contrastkit.gradients import clip_grad_norm_per_parameter_, drop_frozen_gradients
from contrastkit.hot_path import hot_path
from contrastkit.knn import knn_predict
from contrastkit.methods.base import ContrastiveMethod, Loggable, methods_that
from contrastkit.optim import (
    build_optimizer,
    param_groups,
    resolve_warmup_epochs,
    scaled_lr,
    warmup_cosine_scheduler,
)
from contrastkit.schedules import ScheduleState
from contrastkit.train.augment_rng import AugmentationRNG
from contrastkit.train.captured_step import CapturedStep
from contrastkit.train.collapse_check import CollapseCheck, embedding_spread
from contrastkit.train.finite_guard import FiniteGuard, NonFiniteLossError, check_weights
from contrastkit.train.performance import compile_encoders, use_channels_last
from contrastkit.train.specs import OnlineEvalSpec, OptimizerSpec, PerformanceSpec

__all__ = ["NonFiniteLossError", "PretrainModule"]


def _full_precision(batch: Tensor | list[Tensor]) -> torch.autocast:
    """Evaluation views run in float32 even inside a bf16/fp16 autocast region."""
    first = batch[0] if isinstance(batch, list) else batch
    return torch.autocast(device_type=first.device.type, enabled=False)


class PretrainModule(L.LightningModule):
    """Pretrain a contrastive method.

    Args:
        method: the method, any :mod:`contrastkit.methods` class.
        views: how views are made (presets, size, multi-crop).
        optimizer: optimiser and learning-rate schedule.
        online_eval: online linear classifier and kNN monitor.
        num_classes: classes of the labelled data (online monitors); 0 disables them.
        performance: memory layout and compilation of the GPU path (what is computed stays).
    """

    def __init__(
        self,
        method: ContrastiveMethod,
        views: ViewsSpec | None = None,
        optimizer: OptimizerSpec | None = None,
        online_eval: OnlineEvalSpec | None = None,
        num_classes: int = 10,
        performance: PerformanceSpec | None = None,
    ) -> None:
        super().__init__()
        self.method = method
        self.views_spec = views or ViewsSpec()
        self.optimizer_spec = optimizer or OptimizerSpec()
        self.online_spec = online_eval or OnlineEvalSpec()
        self.performance = performance or PerformanceSpec()
        if self.views_spec.multicrop is not None and not method.supports_multicrop:
            raise ValueError(f"views.multicrop is set but {type(method).__name__} takes two "
                             f"views: multi-crop is for {methods_that('supports_multicrop')}")
        if self.optimizer_spec.clip_grad_per_parameter is not None:
            check_positive_float("optimizer.clip_grad_per_parameter",
                                 self.optimizer_spec.clip_grad_per_parameter)
        self.num_classes = num_classes
        self.train_views = build_train_views(self.views_spec, method.default_views)
        self.eval_view = build_eval_view(self.views_spec)
        use_linear = self.online_spec.linear and num_classes > 0
        self.classifier = nn.Linear(method.backbone.out_dim, num_classes) if use_linear else None
        self._val_features: dict[str, list[Tensor]] = {}
        self._val_labels: dict[str, list[Tensor]] = {}
        self.finite_guard = FiniteGuard()
        online = self.online_spec
        self.collapse_check = CollapseCheck(online.collapse_spread,
                                            online.collapse_loss_tolerance,
                                            online.collapse_steps, method.collapse_loss())
        self.augmentation_rng = AugmentationRNG(torch.initial_seed())
        self._channels_last = False
        self._configured = False
        # the captured step updates weights and optimiser state itself (.captured_step)
        self.automatic_optimization = self.performance.step == "eager"
        if not self.automatic_optimization and (
                type(self).training_step is not PretrainModule.training_step):
            raise ValueError("model.performance.step captured applies to image pretraining: "
                             f"{type(self).__name__} runs model.performance.step eager")
        self._captured: CapturedStep | None = None

    # --- start of training ---------------------------------------------------------------------
    def configure_model(self) -> None:
        """Memory layout and compilation, once, before Lightning moves the model to its device
        and wraps it for DDP (a later change of parameter strides would leave DDP's gradient
        buckets with other strides than the gradients)."""
        if self._configured:
            return
        self._configured = True
        device = self.trainer.strategy.root_device
        self._channels_last = use_channels_last(self.performance, device,
                                                images=self.views_spec.video is None)
        if self._channels_last:
            self.method.to(memory_format=torch.channels_last)
            for pipeline in self.train_views.modules():  # views written channels_last at once
                if isinstance(pipeline, augment.Pipeline):
                    pipeline.memory_format = torch.channels_last
        if self.performance.compile and self.automatic_optimization:
            compile_encoders(self.method, self.performance.compile_mode)

    def on_fit_start(self) -> None:
        """Per-process augmentation generator (on the device) and the label check."""
        self.finite_guard = FiniteGuard(max(1, int(self.trainer.log_every_n_steps or 1)))
        if self._captured is not None:  # a step captured by an earlier fit: not this one's
            self._captured.release()
            self._captured = None
        self.augmentation_rng.start(self.train_views, self.device, rank())
        if self.method.needs_labels:
            self._check_labelled_training_split()

    def _check_labelled_training_split(self) -> None:
        """Supervised methods: every training image has a label (checked once, on the host)."""
        datamodule = getattr(self.trainer, "datamodule", None)
        targets = getattr(getattr(datamodule, "train_set", None), "targets", None)
        if targets is not None and len(targets) and min(int(t) for t in targets) < 0:
            raise ValueError(
                f"{type(self.method).__name__} is supervised but the training split has "
                "unlabelled images (label -1): use a labelled data.train_split"
            )
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
    def _logging_step(self) -> bool:
        """Whether Lightning writes logs after this step (``trainer.log_every_n_steps``);
        metrics are only handed to it then, so the others cost nothing."""
        connector = getattr(self.trainer, "_logger_connector", None)
        return bool(getattr(connector, "should_update_logs", True))

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor | None:
        if not self.automatic_optimization:
            return self._captured_training_step(batch, batch_idx)
        images, labels = batch[0], batch[1]
        crops = isinstance(images, (list, tuple)) and self.views_spec.video is None
        if crops and not all(isinstance(v, Tensor) and v.dim() == 4 for v in images):
            raise ValueError("the batch holds a list of clips (a video dataset): set views.video")
        with torch.no_grad():  # views in float32 even under autocast (the views' own)
            # a list of uint8 view batches: crops cut in the loader (data.crops: loader)
            views = self.train_views.from_crops(images) if crops else self.train_views(images)
        if self._channels_last:
            views = [v.contiguous(memory_format=torch.channels_last) for v in views]
        with hot_path():
            out = self.method(views, labels, self.schedule_state())
        loss = out.loss
        if self.finite_guard.observe(loss, self.global_step, self.current_epoch, batch_idx):
            self.finite_guard.check(self._last_checkpoint())
        logging = self._logging_step()
        batch_size = labels.shape[0]
        # A tensor handed to Lightning is only stored (read when logs are written); the other
        # metrics are computed (methods hand functions for those that cost operators) and
        # handed over on logging steps only, Python numbers as CPU tensors (Lightning would copy
        # a number to the device, a blocking host-to-device copy).
        self.log("train/loss", loss.detach(), prog_bar=True, batch_size=batch_size)
        if logging:
            for name, value in out.logs.items():
                self.log(f"train/{name}", _log_value(value), batch_size=batch_size)
            spread = None if out.embedding is None else embedding_spread(out.embedding)
            if spread is not None:
                self.log("train/z_std", spread, batch_size=batch_size)
            self.check_collapse(loss, spread)
        if self.classifier is not None:
            extra, accuracy = self.online_classifier(out.features, labels, logging)
            loss = loss + extra
            if accuracy is not None:
                self.log("train/online_linear_acc", accuracy, batch_size=batch_size)
        return loss

    def online_classifier(self, features: Tensor, labels: Tensor,
                          accuracy: bool) -> tuple[Tensor, Tensor | None]:
        """The online linear classifier's loss on detached ``features`` and, when asked, its
        accuracy. Unlabelled samples (label -1) are weighted out instead of indexed out:
        boolean indexing would read the count back on the host."""
        known = (labels >= 0).to(torch.float32)
        count = known.sum().clamp_min(1.0)
        logits = self.classifier(features.float())
        per_sample = F.cross_entropy(logits, labels.clamp_min(0), reduction="none")
        loss = (per_sample * known).sum() / count
        if not accuracy:
            return loss, None
        hits = (logits.argmax(1) == labels).to(torch.float32) * known
        return loss, hits.sum() / count

    def _captured_training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        """``model.performance.step: captured``: one :class:`.captured_step.CapturedStep` run
        (views to queue write), through ``optimizer.step`` so that Lightning counts it."""
        images, labels = batch[0], batch[1]
        if not isinstance(images, Tensor):
            raise ValueError("model.performance.step captured takes image batches (not loader "
                             "crops or clips): use model.performance.step eager")
        optimizer, scheduler = self.optimizers(), self.lr_schedulers()
        if self._captured is None:
            self._captured = CapturedStep(self, optimizer.optimizer, scheduler, images, labels,
                                          compile=self.performance.compile)
        step, captured, outputs = int(self.global_step), self._captured, {}

        def closure() -> None:
            outputs.update(captured.run(images, labels))

        optimizer.step(closure=closure)
        scheduler.step()
        if self.finite_guard.note(step, self.current_epoch, batch_idx):
            self.finite_guard.check(self._last_checkpoint())
        batch_size = labels.shape[0]
        self.log("train/loss", outputs["loss"], prog_bar=True, batch_size=batch_size)
        if self._logging_step():
            for name, value in outputs.items():
                if name != "loss":
                    self.log(f"train/{name}", value.clone(), batch_size=batch_size)
            numbers = dict(captured.numbers)
            momentum = captured.momentum_after(step)
            if momentum is not None:
                numbers["momentum"] = momentum
            for name, value in numbers.items():
                self.log(f"train/{name}", torch.tensor(value), batch_size=batch_size)
            self.check_collapse(outputs["loss"], outputs.get("z_std"))

    def check_collapse(self, loss: Tensor, spread: Tensor | None) -> None:
        """At a logging step, on the main process: the collapse check's warning, once, and its
        step as ``train/collapse_step`` (:mod:`.collapse_check`; reads both values)."""
        if not self.trainer.is_global_zero or not self.collapse_check.watches:
            return
        warning = self.collapse_check.observe(int(self.global_step), loss, spread,
                                              self.method.embed_dim)
        if warning is not None:
            warnings.warn(warning, stacklevel=1)
            self.log("train/collapse_step", torch.tensor(float(self.global_step)),
                     rank_zero_only=True)

    def on_train_end(self) -> None:
        if self._captured is not None:
            self._captured.release()
            self._captured = None

    def on_before_optimizer_step(self, optimizer) -> None:
        """Between the backward pass (all micro-batches, loss scale removed) and the step: the
        per-parameter gradient clipping of ``optimizer.clip_grad_per_parameter`` and the
        method's frozen layers (:mod:`contrastkit.gradients`), on the method's parameters."""
        clip = self.optimizer_spec.clip_grad_per_parameter
        if clip is not None:
            clip_grad_norm_per_parameter_(self.method.parameters(), clip)
        if self.method.gradient_freezes:
            drop_frozen_gradients(self.method, self.method.gradient_freezes,
                                  self.schedule_state())

    def optimizer_step(self, *args, **kwargs) -> None:
        super().optimizer_step(*args, **kwargs)
        with hot_path():
            logs = self.method.after_optimizer_step(self.schedule_state())
        if self._logging_step():
            for name, value in logs.items():
                self.log(f"train/{name}", _log_value(value))

    def _last_checkpoint(self) -> str | None:
        """The newest checkpoint on disk (named in the non-finite-loss error)."""
        callback = getattr(self.trainer, "checkpoint_callback", None)
        path = getattr(callback, "last_model_path", "") or getattr(callback, "best_model_path", "")
        return path or None

    def configure_optimizers(self):
        spec = self.optimizer_spec
        global_batch = self._global_batch()
        lr = scaled_lr(spec.base_lr, global_batch) if spec.scale_lr else spec.base_lr
        groups = param_groups(self.method, spec.weight_decay, spec.exclude_bias_and_norm)
        for group in groups:
            if group["name"] == "no_decay" and spec.excluded_lr_ratio != 1.0:
                group["lr"] = lr * spec.excluded_lr_ratio
        if self.classifier is not None:
            groups.append({"params": list(self.classifier.parameters()), "weight_decay": 0.0,
                           "lars_adapt": False, "lr": spec.online_lr, "name": "online_linear"})
        optimizer = build_optimizer(spec.name, groups, lr, spec.weight_decay, spec.momentum,
                                    eta=spec.eta, clip_lr=spec.clip_lr,
                                    trust_ratio=spec.trust_ratio)
        total = self._total_steps()
        max_epochs = self._max_epochs()
        warmup_epochs, notice = resolve_warmup_epochs(spec.warmup_epochs, spec.warmup_fraction,
                                                      max_epochs)
        if notice is not None:
            rank_zero_info(notice)
        warmup = round(warmup_epochs * total / max_epochs)
        scheduler = warmup_cosine_scheduler(optimizer, total, min(warmup, total),
                                            spec.final_lr_ratio, spec.warmup_start_ratio)
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
    def monitor_splits(self) -> tuple[str, ...]:
        """The splits the online monitors that run read, in the order of the validation
        loaders: ``("bank", "queries")`` with the kNN monitor, ``("queries",)`` with the
        online classifier alone, ``()`` when no monitor runs (no validation pass at all:
        :meth:`~contrastkit.train.datamodule.PretrainDataModule.val_dataloader` gives none)."""
        if self.online_spec.knn and self.num_classes > 0:
            return ("bank", "queries")
        return ("queries",) if self.classifier is not None else ()

    def validation_step(
        self, batch: tuple[Tensor, Tensor], batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        images, labels = batch[0], batch[1]
        with _full_precision(images):
            view = self.eval_view(images)
        if self._channels_last:  # the training views' layout: a compiled backbone is reused
            view = view.contiguous(memory_format=torch.channels_last)
        features = self.method.backbone(view)
        split = self.monitor_splits()[dataloader_idx]
        self._val_features.setdefault(split, []).append(features.float())
        self._val_labels.setdefault(split, []).append(labels)

    def on_validation_epoch_end(self) -> None:
        # Each process saw its shard of the bank and of the queries (the data module's
        # ShardSampler): the bank is gathered whole on every process, each process predicts
        # its own queries, and the predictions are gathered and put back in the split's order.
        feats = {split: torch.cat(v) for split, v in self._val_features.items()}
        labels = {split: torch.cat(v) for split, v in self._val_labels.items()}
        self._val_features.clear()
        self._val_labels.clear()
        if "queries" not in feats:
            return
        query, query_y = feats["queries"], labels["queries"]
        truth = _gather_shards(query_y)
        if "bank" in feats:
            bank, bank_y = _gather_shards(feats["bank"]), _gather_shards(labels["bank"])
            k = min(self.online_spec.knn_k, bank.shape[0])
            # The bank may be a subset missing some class: let knn_predict infer the count.
            pred, _ = knn_predict(bank, bank_y, query, k=k,
                                  temperature=self.online_spec.knn_temperature)
            pred = _gather_shards(pred.to(query_y.device))
            # identical on every process (gathered): sync_dist averages equal values
            self.log("val/knn_top1", (pred == truth).float().mean(), prog_bar=True,
                     sync_dist=True)
        if self.classifier is not None:
            pred = _gather_shards(self.classifier(query).argmax(1))
            self.log("val/online_linear_top1", (pred == truth).float().mean(), sync_dist=True)

    # --- augmentation generator in checkpoints ---------------------------------------------------
    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.augmentation_rng.load(checkpoint.get(AugmentationRNG.key), rank(), world_size())
        _carry_step_count(checkpoint, self.automatic_optimization)

    def _augmentation_states(self) -> list[Tensor]:
        """Every process's augmentation generator state (a collective under DDP)."""
        state = self.augmentation_rng.state()
        if not is_distributed():
            return [state]
        gathered = gather_no_grad(state.to(self.device).unsqueeze(0))
        return list(gathered.cpu().unbind(0))

    # --- checkpoint metadata -----------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        # Called on every process before any file is written: a NaN loss since the last check,
        # or weights already blown up, stop the run here, so no checkpoint holds them.
        self.finite_guard.check(self._last_checkpoint())
        check_weights(self, self.global_step, self.current_epoch, self._last_checkpoint())
        if self.augmentation_rng.generator is not None:
            checkpoint[AugmentationRNG.key] = self.augmentation_rng.dump(
                self._augmentation_states())
        datamodule = getattr(self.trainer, "datamodule", None)
        record = getattr(datamodule, "evaluation_record", None)
        checkpoint["contrastkit"] = {
            "backbone": asdict(self.method.backbone_spec),
            "method": type(self.method).__name__,
            "num_classes": self.num_classes,
            "views": self.evaluation_views(),
            "data": record() if callable(record) else {},
            "schedule": self.schedule_record(),
            "monitor": {"knn_k": self.online_spec.knn_k,
                        "knn_temperature": self.online_spec.knn_temperature,
                        "val_split": getattr(datamodule, "val_split", None)},
        }

    def schedule_record(self) -> dict:
        """What the learning-rate schedule depends on (a resume that changes it is refused)."""
        return {"max_epochs": self.trainer.max_epochs, "max_steps": self.trainer.max_steps,
                "optimizer": asdict(self.optimizer_spec)}

    def evaluation_views(self) -> dict:
        """The views config with the method's default presets filled in: what evaluating a
        checkpoint reads (input size, normalisation, eval resize, the two view presets)."""
        online, target = self.method.default_views
        spec = self.views_spec
        return {**asdict(spec), "online": spec.online or online, "target": spec.target or target}


def _carry_step_count(checkpoint: dict, automatic: bool) -> None:
    """Lightning counts optimiser steps apart in automatic and manual optimisation: a
    checkpoint of an eager run resumed with the captured step (or the other way round) would
    restart the count (``global_step``, the schedules) at 0, or at the count of the last time
    it trained in this mode. Counts only grow, and each mode starts from the count it finds, so
    the larger one is the mode that trained last: it is copied to the resuming mode before
    Lightning restores its loops."""
    loop = checkpoint.get("loops", {}).get("fit_loop", {})
    auto = loop.get("epoch_loop.automatic_optimization.optim_progress", {}).get("optimizer", {})
    manual = loop.get("epoch_loop.manual_optimization.optim_step_progress")
    if not auto.get("step") or not manual:
        return
    source, target = (manual, auto["step"]) if automatic else (auto["step"], manual)
    if source["total"]["completed"] > target["total"]["completed"]:
        for key in ("total", "current"):
            target[key] = dict(source[key])


def _gather_shards(local: Tensor) -> Tensor:
    """Gather the shards of a split taken by :class:`~contrastkit.train.datamodule.ShardSampler`
    (process ``r`` holds rows ``r, r + W, r + 2W, ...``) back into the split's order."""
    if not is_distributed():
        return local
    gathered = gather_no_grad(local)  # rank order, shards of different lengths
    n, world = gathered.shape[0], world_size()
    sizes = [len(range(r, n, world)) for r in range(world)]
    starts = [sum(sizes[:r]) for r in range(world)]
    order = torch.tensor([starts[i % world] + i // world for i in range(n)], device=local.device)
    return gathered[order]


def _log_value(value: Loggable) -> Tensor:
    """A method's logged value as handed to Lightning: a tensor as it is, a function's result,
    a Python number as a CPU tensor (stored and written by Lightning without device work)."""
    if callable(value):
        value = value()
    return value if isinstance(value, Tensor) else torch.tensor(float(value))
