"""Where `contrastkit eval | analyze` take a checkpoint's defaults from: the record the checkpoint
carries, else (checkpoints written before it) the run's config.yaml."""

from __future__ import annotations

from pathlib import Path

import yaml

from contrastkit.eval.run_defaults import RunDefaults, run_defaults

OLD_ENTRY = {"backbone": {"name": "small_convnet"}, "method": "SCE", "num_classes": 10}
RECORD = {
    **OLD_ENTRY,
    "views": {"online": "strong", "target": "weak", "size": 24, "normalize": "cifar10",
              "eval_resize": "large", "video": None},
    "data": {"dataset": "folder", "classes": ["cat", "dog"], "test_fraction": 0.25,
             "split_seed": 3, "load_size": 16, "video": None},
}


def _run_folder(tmp_path: Path, config: dict | None) -> Path:
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    if config is not None:
        (tmp_path / "run" / "config.yaml").write_text(yaml.safe_dump(config))
    return tmp_path / "run" / "checkpoints" / "last.ckpt"


def test_the_record_in_the_checkpoint_gives_the_defaults(tmp_path):
    ckpt = _run_folder(tmp_path, {"model": {"views": {"size": 99}}})  # not read
    run = run_defaults(ckpt, RECORD)
    assert run == RunDefaults(source=ckpt, size=24, eval_resize="large", normalize="cifar10",
                              views=("strong", "weak"), dataset="folder", load_size=16,
                              test_fraction=0.25, split_seed=3, video=None)
    assert run.data_option("test_fraction", "folder") == 0.25
    assert run.data_option("test_fraction", "digits") is None  # another dataset: not the run's


def test_an_older_checkpoint_reads_its_run_config(tmp_path):
    config = {"model": {"method": {"class_path": "contrastkit.methods.SCE"},
                        "views": {"size": 12, "normalize": "imagenet", "online": None,
                                  "target": None}},
              "data": {"dataset": "folder", "test_fraction": 0.2, "split_seed": 1,
                       "load_size": None, "video": None}}
    ckpt = _run_folder(tmp_path, config)
    run = run_defaults(ckpt, OLD_ENTRY)
    assert run.source == ckpt.parent.parent / "config.yaml"
    assert (run.size, run.normalize, run.eval_resize) == (12, "imagenet", None)
    assert run.views == ("strong", "weak")  # SCE's default views, by its class name
    assert (run.dataset, run.test_fraction, run.split_seed) == ("folder", 0.2, 1)


def test_an_older_checkpoint_without_run_folder_has_no_defaults(tmp_path):
    ckpt = tmp_path / "model.ckpt"
    assert run_defaults(ckpt, OLD_ENTRY) == RunDefaults()
    unreadable = _run_folder(tmp_path, None)
    (unreadable.parent.parent / "config.yaml").write_text("model: [unclosed")
    assert run_defaults(unreadable, OLD_ENTRY) == RunDefaults()
    assert run_defaults(tmp_path / "backbone.pth", {}) == RunDefaults()  # exported backbone
