"""Issue 52 items 9 and 12: faults that were tracebacks or misleading lines, now one line that
names the key, file or value, with exit status 2.

At 0f3dae1: running out of memory was a 151-line traceback; a negative learning rate named the
scaled rate ("Invalid learning rate: -0.0125"), not the key; a NaN temperature was
jsonargparse's "not a valid path but nan either not accessible or invalid or float or dot
import path string"; ``pretrain --config FILE --help`` with a FILE that is not UTF-8 was a
traceback (and ``pretrain --config FILE`` "unacceptable character #x00e9"); ``--checkpint``
was "the following arguments are required: --checkpoint"; a torchvision built for another
torch was a 40-line traceback from torchmetrics' import; ``--checkpoint RUN_FOLDER`` "does not
exist".
"""

from __future__ import annotations

import importlib
import json
import sys
import types
from importlib import metadata
from pathlib import Path

import pytest
import torch
from pretrain_args import TINY, method_args

from contrastkit.cli import environment, main
from contrastkit.train.module import PretrainModule

#: What torch says when a GPU runs out of memory (its advice on the allocator is left out).
CUDA_OOM = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "79.19 GiB of which 10.06 MiB is free. Including non-PyTorch memory, this process "
            "has 79.17 GiB memory in use. If reserved but unallocated memory is large try "
            "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation. "
            "See documentation for Memory Management (https://pytorch.org/docs/stable/notes/"
            "cuda.html#environment-variables)")


def _pretrain_args(out: Path, *extra: str) -> list[str]:
    return ["pretrain", *TINY, *method_args("SimCLR"), "--trainer.max_epochs", "1",
            "--model.optimizer.warmup_epochs", "0", "--output", str(out), *extra]


def _one_line(capsys, argv: list[str]) -> str:
    """The error line of ``contrastkit ARGV`` (exit status 2, nothing else on stderr)."""
    try:
        code = main(argv)
    except SystemExit as exit_:  # the parsers exit
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


@pytest.mark.parametrize(("raised", "expected"), [
    (torch.OutOfMemoryError(CUDA_OOM),
     "out of memory (CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
     "capacity of 79.19 GiB of which 10.06 MiB is free); the device's memory is too small for "
     "this step: reduce --data.batch_size (per process) or the image size (--model.views.size)"),
    (MemoryError(),
     "out of memory; the machine's memory is too small: reduce --data.num_workers, "
     "--data.batch_size or the images' load size (--data.load_size)"),
])
def test_running_out_of_memory_in_pretraining_says_what_to_reduce(tmp_path, capsys, monkeypatch,
                                                                  raised, expected):
    def step(self, batch, batch_idx):
        raise raised

    monkeypatch.setattr(PretrainModule, "training_step", step)
    out = tmp_path / "run"
    assert _one_line(capsys, _pretrain_args(out)) == f"contrastkit pretrain: error: {expected}"
    assert not out.exists() or not any(out.iterdir())  # a failed start leaves nothing


def test_running_out_of_memory_in_an_evaluation_says_what_to_reduce(tiny_checkpoint, capsys,
                                                                    monkeypatch):
    from contrastkit.eval import setup

    def extract(*args, **kwargs):
        raise torch.OutOfMemoryError(CUDA_OOM)

    monkeypatch.setattr(setup, "extract_features", extract)
    line = _one_line(capsys, ["eval", "knn", "--checkpoint", str(tiny_checkpoint), "--data",
                              "digits", "--no-cache", "--quiet"])
    assert line.startswith("contrastkit eval: error: out of memory (CUDA out of memory. Tried")
    assert line.endswith("; the device's memory is too small: reduce --batch-size or the image "
                         "size (--size)")


@pytest.mark.parametrize(("extra", "expected"), [
    (("--model.optimizer.base_lr", "-0.1"),
     "model.optimizer.base_lr must be finite and >= 0, got -0.1"),
    (("--model.optimizer.online_lr", "0"),
     "model.optimizer.online_lr must be finite and > 0, got 0.0"),
    (("--model.optimizer.weight_decay", "-1"),
     "model.optimizer.weight_decay must be finite and >= 0, got -1.0"),
    (("--model.method.temperature", "nan"), "model.method.temperature: nan is not a finite number"),
    (("--model.optimizer.base_lr", "inf"), "model.optimizer.base_lr: inf is not a finite number"),
])
def test_a_bad_number_names_the_key_and_the_value_given(tmp_path, capsys, extra, expected):
    out = tmp_path / "run"
    assert _one_line(capsys, _pretrain_args(out, *extra)) == (
        f"contrastkit pretrain: error: {expected}")
    assert not out.exists()


@pytest.mark.parametrize("help_", [False, True])
def test_a_config_that_is_not_utf8_is_named_with_where(tmp_path, capsys, help_):
    config = tmp_path / "latin1.yaml"
    config.write_bytes("trainer:\n  max_epochs: 1  # café\n".encode("latin-1"))
    argv = ["pretrain", "--config", str(config), *(["--help"] if help_ else
                                                   ["--output", str(tmp_path / "run")])]
    assert _one_line(capsys, argv) == (f"contrastkit pretrain: error: --config {config} is not "
                                       "UTF-8 text: byte 0xe9 at line 2, column 23; save it as "
                                       "UTF-8")


@pytest.mark.parametrize("command", [["eval", "knn"], ["analyze"], ["export"]])
def test_a_mistyped_required_option_is_named_with_the_one_meant(capsys, command):
    line = _one_line(capsys, [*command, "--checkpint", "run.ckpt", "--data", "digits",
                              "--output", "out"])
    prog = "contrastkit " + " ".join(command)
    assert line == (f"{prog}: error: --checkpint is not an option of {prog}; did you mean "
                    f"--checkpoint? ({prog} --help lists them)")


@pytest.fixture
def broken_torchvision(tmp_path, monkeypatch):
    """A torchvision whose import fails as one built for another torch does, imported by a
    command (as torchmetrics imports it under Lightning), with the versions a plain ``pip
    install timm`` beside the CPU torch installs."""
    package = tmp_path / "site" / "torchvision"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        'raise RuntimeError("operator torchvision::nms does not exist")\n')
    monkeypatch.syspath_prepend(str(package.parent))
    monkeypatch.delitem(sys.modules, "torchvision", raising=False)
    command = types.ModuleType("contrastkit.cli.imports_torchvision")

    def run(argv):
        import torchvision  # noqa: F401

        return 0

    command.run = run
    monkeypatch.setitem(sys.modules, command.__name__, command)
    dispatcher = importlib.import_module("contrastkit.cli.main")
    monkeypatch.setitem(dispatcher.COMMANDS, "pretrain", ("imports_torchvision", "run"))
    versions = {"torch": "2.13.0+cpu", "torchvision": "0.28.0"}
    monkeypatch.setattr(environment.metadata, "version",
                        lambda name: versions.get(name) or metadata.version(name))


def test_a_torchvision_of_another_torch_is_one_line_with_the_matching_pair(broken_torchvision,
                                                                          capsys):
    line = _one_line(capsys, ["pretrain", "--config", "run.yaml"])
    assert line == (
        "contrastkit pretrain: error: torchvision 0.28.0 does not import beside torch "
        "2.13.0+cpu (operator torchvision::nms does not exist); contrastkit does not use it: "
        "pip uninstall torchvision, or, where another package needs it (timm), install the one "
        "built for this torch: pip install torchvision==0.28.0 --index-url "
        "https://download.pytorch.org/whl/cpu")


@pytest.mark.parametrize(("torch_version", "command"), [
    ("2.14.1", "pip install torchvision==0.29.1"),
    ("2.5.1+cu121", "pip install torchvision==0.20.1 --index-url "
                    "https://download.pytorch.org/whl/cu121"),
    ("2.0.1", "the release listed for torch 2.0.1 at "
              "https://pytorch.org/get-started/previous-versions/"),
])
def test_the_matching_torchvision_is_the_release_built_with_that_torch(torch_version, command):
    assert environment.matching_torchvision(torch_version) == command


def test_another_error_is_left_as_it_is():
    assert environment.torchvision_mismatch(RuntimeError("CUDA error: device-side assert")) is None


def test_a_run_folder_as_checkpoint_is_its_last_checkpoint(tiny_run, tmp_path, capsys):
    """Issue 52 item 9: ``--checkpoint RUN_FOLDER`` said "checkpoint ... does not exist"."""
    out = tmp_path / "eval"
    assert main(["eval", "knn", "--checkpoint", str(tiny_run), "--data", "digits",
                 "--no-cache", "--quiet", "--output", str(out)]) == 0
    record = json.loads((out / "results.json").read_text())
    assert record["checkpoint"]["path"] == str(tiny_run.resolve() / "checkpoints" / "last.ckpt")
    export = tmp_path / "backbone.safetensors"
    assert main(["export", "--checkpoint", str(tiny_run), "--output", str(export)]) == 0
    assert export.is_file()


def test_a_folder_without_a_checkpoint_says_what_it_holds(tiny_run, tmp_path, capsys):
    folder = tmp_path / "elsewhere"
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "checkpoints" / "best.ckpt").write_bytes(
        (tiny_run / "checkpoints" / "best.ckpt").read_bytes())
    line = _one_line(capsys, ["eval", "knn", "--checkpoint", str(folder), "--data", "digits",
                              "--no-cache", "--quiet"])
    assert line == (f"contrastkit eval: error: checkpoint {folder.resolve()} is a folder without "
                    "a checkpoint to read (a run folder's checkpoints/last.ckpt, a Hub folder's "
                    "model.safetensors): give a checkpoint file; it holds checkpoints/best.ckpt")
