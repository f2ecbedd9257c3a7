"""The training step never reads a device value on the host: an explicit inventory.

A CPU has no host-device synchronisation to observe, so the test records what *would* be one
on a GPU, inside the real ``contrastkit pretrain`` loop (Lightning, views, method, optimiser,
after-step hook), from the start of each training batch to its end:

* operators that return a device value to the host or whose output size depends on device
  values (``_local_scalar_dense`` behind ``.item()`` / ``bool()`` / ``float()``, ``nonzero``,
  ``is_nonzero``, ``equal``, ``unique``, ``masked_select``, boolean-mask indexing,
  ``repeat_interleave`` with tensor repeats);
* Python-level reads that bypass the dispatcher (``Tensor.tolist``, ``.numpy``, ``.cpu``);
* tensors built from Python data (``lift_fresh``), a host-to-device copy on a GPU.

The first step is excluded (constants are built once and cached there). Logging steps are
avoided (``log_every_n_steps`` larger than the run), as they read metrics on purpose; the
deferred NaN check reads one flag every ``log_every_n_steps`` steps and before checkpoints, at
epoch end, outside the batch.
"""

from __future__ import annotations

import traceback
from collections import Counter

import lightning as L
import pytest
import torch
from pretrain_args import method_args
from torch.utils._python_dispatch import TorchDispatchMode

from contrastkit.cli.pretrain import build

#: Operators that make a GPU wait for the host (or the host for the GPU).
SYNCHRONISING = {"_local_scalar_dense", "item", "nonzero", "is_nonzero", "equal", "unique",
                 "_unique2", "unique_consecutive", "masked_select", "lift_fresh", "allclose"}


def _where() -> str:
    frames = [f for f in traceback.extract_stack() if "contrastkit" in f.filename
              or "lightning" in f.filename]
    return " <- ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}" for f in frames[-4:])


class HostReads(TorchDispatchMode):
    """Records the synchronising operators dispatched while active."""

    def __init__(self, found: list[str]) -> None:
        super().__init__()
        self.found = found

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        bool_index = name in ("index", "index_put", "index_put_") and any(
            isinstance(i, torch.Tensor) and i.dtype == torch.bool
            for i in (args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else []))
        tensor_repeats = name == "repeat_interleave" and isinstance(
            args[1] if len(args) > 1 else None, torch.Tensor)
        if name in SYNCHRONISING or bool_index or tensor_repeats:
            self.found.append(f"aten.{name} at {_where()}")
        return func(*args, **(kwargs or {}))


class Inventory(L.Callback):
    """Activates :class:`HostReads` and the Python-level probes inside every batch but the
    first."""

    def __init__(self) -> None:
        self.found: list[str] = []
        self.batches = 0
        self._mode: HostReads | None = None
        self._saved: dict[str, object] = {}

    def _probe(self, name: str) -> None:
        original = getattr(torch.Tensor, name)
        self._saved[name] = original
        found = self.found

        def probe(tensor, *args, **kwargs):
            found.append(f"Tensor.{name} at {_where()}")
            return original(tensor, *args, **kwargs)

        setattr(torch.Tensor, name, probe)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.batches += 1
        if self.batches == 1:
            return
        for name in ("tolist", "numpy", "cpu"):
            self._probe(name)
        self._mode = HostReads(self.found)
        self._mode.__enter__()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self._mode is None:
            return
        self._mode.__exit__(None, None, None)
        self._mode = None
        for name, original in self._saved.items():
            setattr(torch.Tensor, name, original)
        self._saved.clear()


def fit_with_inventory(argv: list[str]) -> Inventory:
    """Train the run that ``argv`` builds with an :class:`Inventory` attached; the inventory."""
    cli, _ = build(argv)
    inventory = Inventory()
    cli.trainer.callbacks.append(inventory)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    return inventory


SETTINGS = [
    "--data.dataset", "digits", "--data.batch_size", "16", "--data.subset", "80",
    "--data.monitor_bank_size", "64", "--model.views.size", "8",
    "--trainer.accelerator", "cpu", "--trainer.devices", "1", "--trainer.max_epochs", "1",
    "--trainer.enable_progress_bar", "false", "--trainer.log_every_n_steps", "1000",
]


@pytest.mark.parametrize(
    ("method", "kw", "extra"),
    [
        ("SCE", {"queue_size": 32, "shuffle_bn": 4, "symmetric": "true"}, []),
        ("MoCo", {"queue_size": 32, "temperature": "contrastkit.losses.MACLTemperature"}, []),
        ("SimCLR", {"temperature": "contrastkit.losses.DySTreSSTemperature"},
         ["--model.views.online", "strong_gamma", "--model.views.target", "strong_beta"]),
        ("SupervisedContrastive", {"loss": "sincere"}, []),
        ("SimCLR", {"loss": "dclw"}, []),
        ("BYOL", {"predictor": '{"hidden_dim": 16, "out_dim": 8}'}, []),
        ("MoCoV3", {"predictor": '{"hidden_dim": 16, "out_dim": 8}', "temperature": 0.2}, []),
        ("WMSE", {"w_size": 16}, []),
        # SwAV: multi-crop, Sinkhorn over the gathered batch, a queue full from step 2, the
        # prototypes frozen for 2 steps and normalised after each
        ("SwAV", {"num_prototypes": 16, "queue_size": 32, "queue_start_epoch": 0,
                  "freeze_prototypes": '{"until": 2}'},
         ["--model.views.multicrop", '{"local_sizes": [8, 8], "local_scales": [[0.05, 0.3], '
          '[0.05, 0.3]], "local_preset": "simclr"}']),
        # DINO: its head, a scheduled teacher temperature, the centre, the last layer frozen
        # for 2 steps, each gradient clipped on its own
        ("DINO", {"projector": '{"hidden_dim": 16, "bottleneck_dim": 8, "num_prototypes": 32}',
                  "teacher_temperature": '{"class_path": "contrastkit.schedules.'
                  'EpochWarmupSchedule", "init_args": {"start": 0.04, "end": 0.07, "epochs": 2}}',
                  "freeze_last_layer": '{"until": 2}'},
         ["--model.optimizer.clip_grad_per_parameter", "3.0"]),
        ("NNCLR", {"queue_size": 32, "predictor": '{"hidden_dim": 16, "out_dim": 8}'}, []),
        ("BarlowTwins", {"scale_loss": 0.1}, []),
        ("VICReg", {"halve_variance": "false"}, []),
    ],
)
def test_training_step_reads_nothing_back(tmp_path, method: str, kw: dict, extra: list) -> None:
    inventory = fit_with_inventory([*SETTINGS, *method_args(method, **kw), *extra,
                                    "--output", str(tmp_path / "run")])
    assert inventory.batches == 5
    assert inventory.found == []


def test_inventory_sees_a_host_read(tmp_path) -> None:
    """The probe itself works: a ``bool()`` on a loss inside the step is caught."""
    cli, _ = build([*SETTINGS, *method_args("SimCLR"), "--output", str(tmp_path / "run")])
    method = cli.model.method
    original = method.forward

    def reads(views, labels, state):
        out = original(views, labels, state)
        bool(torch.isfinite(out.loss))
        views[0][:1].tolist()
        return out

    method.forward = reads
    inventory = Inventory()
    cli.trainer.callbacks.append(inventory)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    kinds = Counter(entry.split(" at ")[0] for entry in inventory.found)
    assert kinds == {"aten._local_scalar_dense": 4, "Tensor.tolist": 4}  # batches 2 to 5


def test_progress_bar_reads_the_loss_on_logging_steps_only(tmp_path) -> None:
    """Lightning's default bar refreshes every step, reading the loss back each time."""
    from lightning.pytorch.callbacks import TQDMProgressBar

    shown = [*SETTINGS[:-4], "--trainer.log_every_n_steps", "25", *method_args("SimCLR")]
    cli, _ = build([*shown, "--trainer.enable_progress_bar", "true",
                    "--output", str(tmp_path / "a")])
    bars = [c for c in cli.trainer.callbacks if isinstance(c, TQDMProgressBar)]
    assert [b.refresh_rate for b in bars] == [25]
    cli, _ = build([*shown, "--trainer.enable_progress_bar", "false",
                    "--output", str(tmp_path / "b")])
    assert not any(isinstance(c, TQDMProgressBar) for c in cli.trainer.callbacks)


def test_logged_values_are_computed_on_logging_steps_only(tmp_path, monkeypatch) -> None:
    """The positive-pair cosines of SCE (a float temperature: only logged) are computed on
    logging steps and nowhere else; numbers go to Lightning as CPU tensors (a Python number
    would be copied to the device)."""
    import contrastkit.methods.base as base
    import contrastkit.methods.momentum_contrast as momentum_contrast
    from contrastkit.train.module import PretrainModule

    calls: list[int] = []
    original = base.cosine_of_pairs

    def counted(a, b):
        calls.append(1)
        return original(a, b)

    for module in (base, momentum_contrast):
        monkeypatch.setattr(module, "cosine_of_pairs", counted)
    monkeypatch.setattr("contrastkit.methods.sce.cosine_of_pairs", counted, raising=False)
    handed: list[tuple[str, object]] = []
    log = PretrainModule.log

    def recorded(self, name, value, *args, **kwargs):
        handed.append((name, value))
        return log(self, name, value, *args, **kwargs)

    monkeypatch.setattr(PretrainModule, "log", recorded)
    steps = {"1000": 0, "2": 2}  # 5 steps: logging steps 2 and 4
    for every, expected in steps.items():
        calls.clear()
        settings = [*SETTINGS[:-2], "--trainer.log_every_n_steps", every]
        cli, _ = build([*settings, *method_args("SCE", queue_size=32),
                        "--output", str(tmp_path / every)])
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
        assert len(calls) == expected, every
    train = [(n, v) for n, v in handed if n.startswith("train/")]
    assert {n for n, _ in train} >= {"train/loss", "train/coeff", "train/momentum",
                                      "train/positive_similarity"}
    assert [n for n, v in train if not isinstance(v, torch.Tensor)] == []


def test_progress_bar_refreshes_on_the_global_logging_steps(tmp_path) -> None:
    """5 steps per epoch, a log every 3 steps: the bar reads the loss at global steps 3, 6, 9
    (and at each epoch's end), not at batch 3 of every epoch."""
    from contrastkit.train.logging import LoggingStepProgressBar

    settings = [*SETTINGS[:-4], "--trainer.max_epochs", "2", "--trainer.log_every_n_steps", "3",
                "--trainer.enable_progress_bar", "true"]
    cli, _ = build([*settings, *method_args("SimCLR"), "--output", str(tmp_path / "run")])
    bar = next(c for c in cli.trainer.callbacks if isinstance(c, LoggingStepProgressBar))
    read_at: list[int] = []
    get_metrics = bar.get_metrics

    def recorded(trainer, module):
        read_at.append(trainer.global_step)
        return get_metrics(trainer, module)

    bar.get_metrics = recorded
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    assert sorted(set(read_at)) == [3, 5, 6, 9, 10]
