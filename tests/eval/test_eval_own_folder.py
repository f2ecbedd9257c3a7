"""`contrastkit eval | analyze | export` on a user's own image folder: held-out split, unreadable
files, mixed sizes, unlabelled images, output folders, exported backbones, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from own_images import make_own_folder

from contrastkit.checkpoints import SETTINGS_METADATA, load_backbone
from contrastkit.cli import main
from contrastkit.cli.eval import eval_parser
from contrastkit.eval.protocols import KNN_K, KNN_TEMPERATURE
from contrastkit.outputs import file_mode
from contrastkit.train.specs import OnlineEvalSpec

pytest.importorskip("matplotlib")

TINY_NET = [
    "--model.method", "contrastkit.methods.SimCLR",
    "--model.method.backbone", '{"name": "small_convnet", "width": 8, "out_dim": 16}',
    "--model.method.projector", '{"hidden_dim": 16, "out_dim": 8}',
    "--trainer.accelerator", "cpu", "--trainer.devices", "1", "--trainer.max_epochs", "1",
    "--trainer.enable_progress_bar", "false", "--trainer.log_every_n_steps", "1",
]


@pytest.fixture(scope="module")
def own(tmp_path_factory) -> Path:
    """4 classes of 12 images of 3 sizes, and 2 files that are not images."""
    return make_own_folder(tmp_path_factory.mktemp("own") / "photos", corrupt=2)


@pytest.fixture(scope="module")
def run(own, tmp_path_factory) -> Path:
    """The checkpoint of a 1-epoch run on ``own`` with a 25% held-out test split."""
    from contrastkit.cli.pretrain import pretrain

    out = tmp_path_factory.mktemp("runs") / "run"
    pretrain([*TINY_NET, "--data.dataset", "folder", "--data.root", str(own),
              "--data.test_fraction", "0.25", "--data.skip_corrupt", "true",
              "--data.load_size", "16", "--data.batch_size", "8", "--model.views.size", "16",
              "--output", str(out)])
    return out / "checkpoints" / "last.ckpt"


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(capsys, argv: list[str], *fragments: str) -> str:
    code, _, err = _cli(capsys, *argv)
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    return err


def _export_without_settings(checkpoint: Path, exported: Path) -> Path:
    """Export ``checkpoint`` to ``exported`` (``.pth`` or ``.safetensors``), then drop the
    run's settings the export carries: an export written before they were recorded, which
    gives evaluation no defaults from the run."""
    assert main(["export", "--checkpoint", str(checkpoint), "--output", str(exported)]) == 0
    if exported.suffix == ".pth":
        data = torch.load(exported, weights_only=True)
        del data["contrastkit"][SETTINGS_METADATA]
        torch.save(data, exported)
        return exported
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(exported), framework="pt") as handle:
        tensors = {k: handle.get_tensor(k) for k in handle.keys()}
        metadata = {k: v for k, v in handle.metadata().items() if k != SETTINGS_METADATA}
    save_file(tensors, exported, metadata=metadata)
    return exported


def _data(own: Path, tmp_path: Path, *extra: str) -> list[str]:
    return ["--data", "folder", "--root", str(own), "--quiet", "--cache-dir",
            str(tmp_path / "cache"), *extra]


def test_a_flat_folder_has_no_test_split_unless_one_is_held_out(run, own, tmp_path, capsys):
    base = ["eval", "knn", "--checkpoint", str(run), "--k", "1", "--skip-corrupt",
            "--load-size", "16"]
    exported = _export_without_settings(run, tmp_path / "backbone.pth")
    _one_line_error(capsys, ["eval", "knn", "--checkpoint", str(exported), "--k", "1",
                             *_data(own, tmp_path, "--skip-corrupt", "--load-size", "16")],
                    "no test/ sub-folder", "--test-fraction 0.2")
    out = tmp_path / "knn"
    code, stdout, err = _cli(capsys, *base, *_data(own, tmp_path), "--output", str(out))
    assert code == 0, err
    results = json.loads((out / "results.json").read_text())
    assert results["data"]["test_fraction"] == 0.25  # the run's, stored in its checkpoint
    assert results["data"]["split_seed"] == 0
    assert results["num_test"] == 4 * 3  # 25% of each class of 12 readable images
    assert "--test-fraction 0.25 of each class" in stdout
    assert "top5" not in results["metrics"]  # 4 classes: top-5 says nothing
    code, stdout, _ = _cli(capsys, *base, *_data(own, tmp_path), "--test-split", "train")
    assert code == 0 and "the test images are in the bank" in stdout  # explicit, and said


def test_the_held_out_split_and_load_size_travel_with_the_checkpoint(run, own, tmp_path, capsys):
    alone = tmp_path / "copied.ckpt"  # outside the run folder: no config.yaml beside it
    alone.write_bytes(run.read_bytes())
    out = tmp_path / "knn"
    code, _, err = _cli(capsys, "eval", "knn", "--checkpoint", str(alone), "--k", "1",
                        *_data(own, tmp_path, "--skip-corrupt"), "--output", str(out))
    assert code == 0, err
    data = json.loads((out / "results.json").read_text())["data"]
    assert (data["test_fraction"], data["split_seed"], data["load_size"]) == (0.25, 0, 16)
    assert data["size"] == 16


def test_unreadable_images_are_skipped_and_listed_only_when_asked(run, own, tmp_path, capsys):
    args = ["eval", "knn", "--checkpoint", str(run), "--k", "3", "--load-size", "16"]
    _one_line_error(capsys, [*args, *_data(own, tmp_path)], "_broken", "--skip-corrupt")
    out = tmp_path / "knn"
    code, _, err = _cli(capsys, *args, *_data(own, tmp_path), "--skip-corrupt", "--output",
                        str(out))
    assert code == 0, err
    results = json.loads((out / "results.json").read_text())
    names = sorted(Path(p).name for p in results["data"]["skipped_files"])
    assert names == ["apple_broken0.jpg", "bear_broken1.jpg"]
    assert results["data"]["num_skipped"] == 2
    listed = (out / "skipped_files.txt").read_text().splitlines()
    assert sorted(Path(p).name for p in listed) == names


def test_images_of_different_sizes_need_a_load_size(run, own, tmp_path, capsys):
    exported = _export_without_settings(run, tmp_path / "backbone.safetensors")
    common = ["--checkpoint", str(exported), "--test-fraction", "0.25", "--size", "16",
              *_data(own, tmp_path, "--skip-corrupt")]
    _one_line_error(capsys, ["eval", "knn", *common], "images of different sizes",
                    "--load-size N")
    code, _, err = _cli(capsys, "eval", "knn", *common, "--load-size", "16", "--k", "3")
    assert code == 0, err
    code, _, err = _cli(capsys, "analyze", *common, "--load-size", "16", "--output",
                        str(tmp_path / "analysis"))
    assert code == 0, err
    assert (tmp_path / "analysis" / "local_separation.png").is_file()


def test_an_output_folder_holds_one_evaluation(run, own, tmp_path, capsys):
    out = tmp_path / "ev"
    common = ["--checkpoint", str(run), *_data(own, tmp_path, "--skip-corrupt"), "--output",
              str(out)]
    assert _cli(capsys, "eval", "linear", *common, "--epochs", "2")[0] == 0
    assert (out / "probe_accuracy.png").is_file()
    _one_line_error(capsys, ["eval", "knn", *common, "--k", "3"], "is not empty", "--overwrite")
    code, _, err = _cli(capsys, "eval", "knn", *common, "--k", "3", "--overwrite")
    assert code == 0, err
    assert not (out / "probe_accuracy.png").exists()  # the linear probe's figure went with it
    assert json.loads((out / "results.json").read_text())["protocol"] == "knn"
    assert (out / "results.json").stat().st_mode & 0o777 == file_mode()
    (out / "mine.txt").write_text("keep")
    _one_line_error(capsys, ["eval", "knn", *common, "--k", "3", "--overwrite"], "mine.txt")
    assert (out / "mine.txt").read_text() == "keep" and (out / "results.json").is_file()
    failed = tmp_path / "failed"
    _one_line_error(capsys, ["eval", "knn", *common[:-1], str(failed), "--k", "999"],
                    "k=999 is larger than the bank (36 images", "--k 36 or less")
    assert not failed.exists()  # nothing half-written


def test_unlabelled_images_cannot_be_evaluated(run, tmp_path, capsys):
    flat = make_own_folder(tmp_path / "flat", per_class=3, sizes=((16, 16),), labelled=False)
    _one_line_error(capsys, ["eval", "knn", "--checkpoint", str(run), *_data(flat, tmp_path),
                             "--test-fraction", "0.25"],
                    "no class sub-folders", "evaluation needs labels")


@pytest.mark.parametrize("suffix", [".pth", ".safetensors"])
def test_an_exported_small_convnet_loads_everywhere(run, own, tmp_path, capsys, suffix):
    exported = tmp_path / f"backbone{suffix}"
    assert main(["export", "--checkpoint", str(run), "--output", str(exported)]) == 0
    original, spec = load_backbone(run)
    loaded, loaded_spec = load_backbone(exported)
    assert loaded_spec == spec and spec.name == "small_convnet"
    x = torch.rand(2, 3, 16, 16)
    torch.testing.assert_close(loaded(x), original(x), rtol=0, atol=0)
    args = ["--test-fraction", "0.25", "--load-size", "16", "--size", "16", "--skip-corrupt"]
    for command in (["eval", "knn", "--k", "3"], ["analyze"]):
        code, _, err = _cli(capsys, *command, "--checkpoint", str(exported),
                            *_data(own, tmp_path, *args))
        assert code == 0, err


def test_commands_fail_in_one_line(run, tmp_path, capsys):
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(np.random.default_rng(0).bytes(3000))
    export = ["export", "--checkpoint"]
    _one_line_error(capsys, [*export, str(tmp_path / "absent.ckpt"), "--output", "x.pth"],
                    "absent.ckpt does not exist")
    _one_line_error(capsys, [*export, str(run), "--output", str(tmp_path / "b.txt")],
                    "must end in .pth")
    _one_line_error(capsys, [*export, str(junk), "--output", str(tmp_path / "b.pth")],
                    "junk.ckpt could not be read")
    _one_line_error(capsys, [*export, str(run), "--output", str(run / "b.pth")],
                    "which is a file")
    knn = ["eval", "knn", "--checkpoint", str(run), "--data", "digits", "--quiet"]
    _one_line_error(capsys, [*knn, "--device", "gpu"], "--device gpu is not a device")
    _one_line_error(capsys, [*knn, "--output", str(run / "sub")], "which is a file")
    _one_line_error(capsys, ["eval", "knn", "--checkpoint", str(run), "--data", "digts"],
                    "--data 'digts' is not a known dataset")
    _one_line_error(capsys, ["pretrain", "--resume", str(junk), "--output",
                             str(tmp_path / "r")], "junk.ckpt is not a readable checkpoint")
    _one_line_error(capsys, ["pretrain", "--data.dataset", "digits", "--output",
                             str(run / "sub")], "which is a file")


def test_the_knn_monitor_and_eval_knn_use_the_same_vote():
    args = eval_parser().parse_args(["knn", "--checkpoint", "c", "--data", "digits"])
    assert (args.k, args.temperature) == (None, None)  # the run's monitor's, else:
    assert (OnlineEvalSpec().knn_k, OnlineEvalSpec().knn_temperature) == (KNN_K, KNN_TEMPERATURE)
