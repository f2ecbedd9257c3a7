"""The captured training step (``model.performance.step captured``) on the CPU.

A CPU cannot capture a CUDA graph, but the captured step runs there as plain code: the same
tensors, updated in place, without a host read. These tests run the real ``contrastkit
pretrain`` loop and check that

* the captured step gives the eager path's weights, EMA weights, queue, optimiser state and
  logged loss and embedding spread bit for bit (SGD and LARS, with and without a target
  branch, a queue that fills
  during the run, shuffle BN, the online classifier, bf16 autocast);
* a run stopped and resumed, captured or eager on either side of each stop, ends where an
  uninterrupted one does, bit for bit;
* nothing in its batches reads a device value on the host (the inventory of
  ``test_hot_path.py``);
* every value that changes per step is a device tensor read at a device step counter: the
  learning-rate and EMA tables equal the scheduler's and the schedule's values, and the step
  replayed with a later counter reads the later values;
* what it cannot compute is refused in one line.
"""

from __future__ import annotations

from pathlib import Path

import lightning as L
import pytest
import torch
import torch._dynamo
from pretrain_args import TINY, StopAfterEpochs, method_args
from test_hot_path import SETTINGS, fit_with_inventory

from contrastkit.cli.pretrain import build

CAPTURED = ["--model.performance.step", "captured"]


def _fit(tmp_path: Path, name: str, args: list[str]) -> tuple[dict, object]:
    cli, _ = build([*TINY, *args, "--output", str(tmp_path / name)])
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    state = {k: v.detach().clone() for k, v in cli.model.state_dict().items()}
    return state, cli


def _assert_same_run(a: tuple[dict, object], b: tuple[dict, object]) -> None:
    (state_a, cli_a), (state_b, cli_b) = a, b
    assert state_a.keys() == state_b.keys()
    differ = [k for k in state_a if not torch.equal(state_a[k], state_b[k])]
    assert differ == []
    opt_a = cli_a.trainer.optimizers[0].state_dict()
    opt_b = cli_b.trainer.optimizers[0].state_dict()
    assert opt_a["state"].keys() == opt_b["state"].keys()
    for index, entry in opt_a["state"].items():
        assert torch.equal(entry["momentum_buffer"], opt_b["state"][index]["momentum_buffer"])
    assert cli_a.trainer.global_step == cli_b.trainer.global_step
    assert [g["lr"] for g in opt_a["param_groups"]] == [g["lr"] for g in opt_b["param_groups"]]
    metrics_a, metrics_b = cli_a.trainer.callback_metrics, cli_b.trainer.callback_metrics
    assert torch.equal(metrics_a["train/loss"].cpu(), metrics_b["train/loss"].cpu())
    assert torch.equal(metrics_a["train/z_std"].cpu(), metrics_b["train/z_std"].cpu())


# Four runs cover the cases (each a pair of 2-epoch runs; the float32 SCE step with a full
# queue is checked by the resume test below, whose eager epoch continues a captured one):
# SCE with shuffle BN, a queue that fills during the run (uncaptured until full), the online
# classifier, bf16 autocast; SimCLR (no target branch, no queue) with LARS (solo-learn's
# clip_lr and eta, the official codes' trust ratio), in float32; BYOL (a predictor, no queue)
# with a constant EMA momentum; NNCLR (its support set the queue, full from the start).
CASES = {
    "sce_shuffle_bn_queue_filling_classifier_bf16": [
        *method_args("SCE", queue_size=80, queue_init="empty", shuffle_bn=4),
        "--trainer.precision", "bf16-mixed"],
    "simclr_lars": [*method_args("SimCLR"), "--model.optimizer.name", "lars",
                    "--model.optimizer.exclude_bias_and_norm", "true",
                    "--model.optimizer.clip_lr", "true", "--model.optimizer.eta", "0.02",
                    "--model.optimizer.trust_ratio", "update"],
    # the EMA table follows the method's momentum schedule, here a constant one
    "byol_constant_momentum": method_args("BYOL", momentum=0.9, momentum_schedule="constant",
                                          predictor='{"hidden_dim": 16, "out_dim": 8}'),
    # NNCLR: nearest neighbours in the support set (the queue), predictions gathered
    "nnclr": method_args("NNCLR", queue_size=64, predictor='{"hidden_dim": 16, "out_dim": 8}'),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_captured_steps_equal_eager_steps_bit_for_bit(tmp_path, case: str) -> None:
    args = [*CASES[case], "--trainer.max_epochs", "2"]
    eager = _fit(tmp_path, "eager", args)
    captured = _fit(tmp_path, "captured", [*args, *CAPTURED])
    assert captured[1].trainer.global_step == 8
    _assert_same_run(eager, captured)


def _checkpoint(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=False)


class EpochStates(L.Callback):
    """The module's tensors at the end of every training epoch."""

    def __init__(self) -> None:
        self.states: list[dict] = []

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self.states.append({k: v.detach().clone() for k, v in pl_module.state_dict().items()})


def test_a_run_stopped_and_resumed_in_either_mode_ends_where_an_uninterrupted_one_does(
        tmp_path) -> None:
    """4 epochs straight (captured) == 4 one-epoch runs, each stopped and the next resumed from
    its last checkpoint, with the steps captured, captured, eager, captured (every switch:
    captured -> captured, captured -> eager, eager -> captured). After each run: the straight
    run's weights at that epoch and its step count; at the end every tensor of the two last
    checkpoints (optimiser state and augmentation generator included), bit for bit."""
    base = [*TINY, *method_args("SCE", queue_size=48, shuffle_bn=4), "--trainer.max_epochs", "4"]
    cli, _ = build([*base, *CAPTURED, "--output", str(tmp_path / "straight")])
    straight = EpochStates()
    cli.trainer.callbacks.append(straight)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    cli.folder_lock.release()
    split = [*base, "--output", str(tmp_path / "split")]
    last = tmp_path / "split" / "checkpoints" / "last.ckpt"
    for epoch, mode in enumerate(("captured", "captured", "eager", "captured"), start=1):
        resume = ["--resume", "last"] if epoch > 1 else []
        cli, ckpt_path = build([*split, *(CAPTURED if mode == "captured" else []), *resume])
        cli.trainer.callbacks.append(StopAfterEpochs(epoch))
        cli.trainer.fit(cli.model, datamodule=cli.datamodule, ckpt_path=ckpt_path)
        cli.folder_lock.release()
        want, got = straight.states[epoch - 1], _checkpoint(last)
        assert got["global_step"] == 4 * epoch, mode
        assert [k for k in want if not torch.equal(want[k], got["state_dict"][k])] == [], mode
    a = _checkpoint(tmp_path / "straight" / "checkpoints" / "last.ckpt")
    b = _checkpoint(last)
    assert a["global_step"] == b["global_step"] == 16
    assert [k for k in a["state_dict"] if not torch.equal(a["state_dict"][k],
                                                          b["state_dict"][k])] == []
    for index, entry in a["optimizer_states"][0]["state"].items():
        assert torch.equal(entry["momentum_buffer"],
                           b["optimizer_states"][0]["state"][index]["momentum_buffer"])
    assert torch.equal(a["augmentation_rng"]["states"][0], b["augmentation_rng"]["states"][0])


@pytest.mark.parametrize(
    ("method", "kw"),
    [("SCE", {"queue_size": 32, "shuffle_bn": 4, "symmetric": "true"}),
     ("SimCLR", {"temperature": "contrastkit.losses.DySTreSSTemperature"})],
)
def test_captured_step_reads_nothing_back(tmp_path, method: str, kw: dict) -> None:
    inventory = fit_with_inventory([*SETTINGS, *method_args(method, **kw), *CAPTURED,
                                    "--output", str(tmp_path / "run")])
    assert inventory.batches == 5
    assert inventory.found == []


def test_the_step_reads_its_changing_values_at_a_device_counter(tmp_path) -> None:
    """The tables hold the scheduler's learning rates and the EMA schedule's rates; the state
    they are read with is a device tensor that the step itself advances."""
    from contrastkit.models.momentum import cosine_momentum
    from contrastkit.train.graph_optim import at_step

    cli, _ = build([*TINY, *method_args("SCE", queue_size=64, shuffle_bn=4), *CAPTURED,
                    "--trainer.max_epochs", "1", "--output", str(tmp_path / "run")])
    kept = KeepCaptured()
    cli.trainer.callbacks.append(kept)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    module, step = cli.model, kept.step
    scheduler = cli.trainer.lr_scheduler_configs[0].scheduler
    assert step.step.device.type == "cpu" and step.step.dtype == torch.int64
    assert int(step.step) == cli.trainer.global_step == 4
    total = module._total_steps()
    for k in (0, 1, 3, total, total + 5):
        counter = torch.tensor(k)
        expected = [base * f(min(k, total)) for f, base in zip(scheduler.lr_lambdas,
                                                              scheduler.base_lrs, strict=True)]
        got = at_step(step.update.lr, counter, torch.float64).tolist()
        assert got == expected
        rate = float(at_step(step.ema_rate, counter, torch.float64))
        assert rate == 1.0 - cosine_momentum(min(k, total), total, module.method.base_momentum)
    queue = module.method.queue
    assert int(queue.ptr) == queue._ptr == (4 * 32) % 64  # moved on the device, host in step


class KeepCaptured(L.Callback):
    """Keeps the module's captured step (the module lets it go when training ends)."""

    step = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.step = pl_module._captured


@pytest.mark.parametrize(
    ("extra", "message"),
    [(["--model.method.temperature", "contrastkit.losses.KuklevaCosineTemperature"],
      "temperature of SCE is a schedule"),
     (["--trainer.gradient_clip_val", "1.0"], "does not clip gradients"),
     (["--model.optimizer.name", "adamw"], "computes SGD and LARS steps, not adamw"),
     (["--trainer.accumulate_grad_batches", "2"], "one batch per optimiser step"),
     (["--model.optimizer.clip_grad_per_parameter", "3.0"], "unset "
      "model.optimizer.clip_grad_per_parameter")],
)
def test_what_a_captured_step_cannot_compute_is_one_line(tmp_path, extra, message) -> None:
    """Refused before anything runs, naming the option and the way out."""
    args = [*method_args("SCE", queue_size=32), *CAPTURED, "--trainer.max_epochs", "1", *extra]
    with pytest.raises(ValueError, match=message) as caught:
        build([*TINY, *args, "--output", str(tmp_path / "run")])
    assert "\n" not in str(caught.value) and "step eager" in str(caught.value)
    assert not (tmp_path / "run" / "checkpoints").exists()


class TraceOnce(L.Callback):
    """After 2 steps: the captured step traced whole by ``torch.compile`` (``fullgraph=True``,
    dynamo's own ``eager`` backend: the graph's operators run as traced, no code generated),
    against 2 plain steps from the same state."""

    def __init__(self) -> None:
        self.graphs = 0
        self.plain: list[float] = []
        self.traced: list[float] = []
        self.states: list[dict] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step != 2:
            return
        trainer.should_stop = True
        captured = pl_module._captured
        saved = {k: v.clone() for k, v in pl_module.state_dict().items()}
        buffers = [b.clone() for b in _momentum_buffers(captured)]
        counter, rng = captured.step.clone(), pl_module.augmentation_rng.generator.get_state()

        def backend(gm, example_inputs):
            self.graphs += 1
            return gm.forward

        traced = torch.compile(captured._step, fullgraph=True, backend=backend)
        for fn, losses in ((captured._step, self.plain), (traced, self.traced)):
            for _ in range(2):
                captured.prepare(*batch)
                losses.append(float(fn()["loss"]))
                captured.finish()
            self.states.append({k: v.clone() for k, v in pl_module.state_dict().items()})
            pl_module.load_state_dict(saved)
            for buffer, value in zip(_momentum_buffers(captured), buffers, strict=True):
                buffer.copy_(value)
            captured.step.copy_(counter)
            pl_module.augmentation_rng.generator.set_state(rng)


def _momentum_buffers(captured) -> list:
    state = captured.update.optimizer.state
    return [state[p]["momentum_buffer"] for p in captured.update.params]


def test_the_captured_step_traces_as_one_graph(tmp_path) -> None:
    """The step that is captured (views, forward, loss, backward, SGD, EMA, queue, NaN flag)
    is one graph without break for ``torch.compile(fullgraph=True)`` (a break would be a host
    read or Python state a CUDA graph could not replay), and the traced steps give the plain
    steps' losses and weights (to float32 rounding: the traced backward is dynamo's record of
    the autograd formulas, which may sum a gradient's parts in another order)."""
    torch._dynamo.reset()
    torch._dynamo.config.trace_autograd_ops = True
    cli, _ = build([*TINY, *method_args("SCE", queue_size=64, shuffle_bn=4), *CAPTURED,
                    "--trainer.max_epochs", "3", "--output", str(tmp_path / "run")])
    trace = TraceOnce()
    cli.trainer.callbacks.append(trace)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    assert trace.graphs == 1
    assert trace.plain[0] == trace.traced[0]  # the first loss comes before any update
    torch.testing.assert_close(trace.traced, trace.plain, rtol=1e-6, atol=0)
    plain, traced = trace.states
    # float32 rounding of two steps summed in another order: up to about 6e-7 measured on a
    # queue key's element (unit vectors) on an AMD EPYC with AVX-512, depending on the draw of
    # the weights; a wrong step differs by orders of magnitude more
    for key, value in plain.items():
        torch.testing.assert_close(traced[key], value, rtol=1e-5, atol=2e-6, msg=key)


@pytest.mark.slow
def test_a_two_process_captured_run_equals_the_eager_one(tmp_path) -> None:
    """DDP, 2 gloo processes (the real command line): the captured step averages the
    gradients as DDP does (each divided by 2, one all-reduce) and shuffles the keys over both
    processes; both runs end with the same weights, queue and optimiser state, bit for bit."""
    from child_runs import finish
    from test_ddp_pretrain import CONVNET, checkpoint, start

    args = [*CONVNET, "--trainer.max_epochs", "2", "--model.method.shuffle_bn", "4"]
    runs = [start(tmp_path / "eager", *args),
            start(tmp_path / "captured", *args, *CAPTURED)]  # side by side: start-ups dominate
    for run in runs:
        finish(run)
    a, b = checkpoint(tmp_path / "eager"), checkpoint(tmp_path / "captured")
    assert a["global_step"] == b["global_step"] > 0
    assert [k for k in a["state_dict"] if not torch.equal(a["state_dict"][k],
                                                          b["state_dict"][k])] == []
    for index, entry in a["optimizer_states"][0]["state"].items():
        assert torch.equal(entry["momentum_buffer"],
                           b["optimizer_states"][0]["state"][index]["momentum_buffer"])
