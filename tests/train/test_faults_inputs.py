"""Issue 36: bad input met by ``contrastkit pretrain``, each one line naming the file (or
skipped and listed, as chosen): a config that is not YAML or holds a Python tag, a corrupt
video, a text corpus with bytes that are not UTF-8; and the start line of a held-out split that
holds out nothing (docs/reliability.md counts these faults)."""

from __future__ import annotations

import logging
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from contrastkit.cli import main
from contrastkit.outputs import SKIPPED_FILES, record_skipped
from contrastkit.train.datamodule import PretrainDataModule
from contrastkit.train.skipped_files import SKIP_LOG, SkippedFilesCallback

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize(("content", "problem"), [
    ("model:\n  method: [SCE\ndata: {dataset: digits}\n",
     "(line 3, column 5): expected ',' or ']', but got ':'"),
    ('model: !!python/object/apply:os.system ["echo pwned > PWNED"]\n',
     "(line 1, column 8): could not determine a constructor for the tag "
     "'tag:yaml.org,2002:python/object/apply:os.system'"),
])
def test_a_config_that_is_not_yaml_or_holds_a_python_tag_is_one_line(tmp_path, capsys,
                                                                      monkeypatch, content,
                                                                      problem):
    """``is_text_config`` read the file with yaml.safe_load outside the error handling: a
    59-74-line traceback. Nothing ran then, nothing runs now."""
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "bad.yaml"
    config.write_text(content)
    assert main(["pretrain", "--config", str(config), "--output", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err == f"contrastkit pretrain: error: --config {config} is not valid YAML {problem}\n"
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "run").exists()


# --- videos ----------------------------------------------------------------------------------
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))


@pytest.fixture(scope="module")
def videos_with_a_broken_one(tmp_path_factory) -> tuple[Path, Path]:
    pytest.importorskip("av")
    from video_fixtures import squares_folder

    root = tmp_path_factory.mktemp("videos") / "squares"
    shutil.copytree(squares_folder(), root)
    broken = root / "left" / "broken.mp4"
    good = next((root / "left").iterdir())
    broken.write_bytes(good.read_bytes()[:200])  # a truncated file: its header is cut too
    return root, broken


def _video_args(root: Path, out: Path, *extra: str) -> list[str]:
    return ["pretrain", "--data.dataset", "video_folder", "--data.root", str(root),
            "--data.batch_size", "3", "--data.val_split", "null",
            "--data.video", '{"frames": 2, "duration_s": 0.32, "short_side": 16, '
                            '"crop_size": 16}',
            "--model.method", "contrastkit.methods.SimCLR",
            "--model.method.backbone", '{"name": "resnet3d_18", "width": 4}',
            "--model.method.projector", '{"hidden_dim": 16, "out_dim": 8}',
            "--model.views", '{"size": 16, "online": "weak", "target": "weak", "video": {}}',
            "--trainer.max_epochs", "1", "--trainer.accelerator", "cpu",
            "--trainer.enable_progress_bar", "false", "--output", str(out), *extra]


def test_a_corrupt_video_is_one_line_with_the_skip_hint(videos_with_a_broken_one, tmp_path,
                                                        capsys):
    """A 111-line traceback: VideoDecodeError derived from RuntimeError, not an expected
    error (and a loader worker raised it again as a plain RuntimeError)."""
    root, broken = videos_with_a_broken_one
    code = main(_video_args(root, tmp_path / "run", "--data.num_workers", "1"))
    err = capsys.readouterr().err
    assert code == 2, err
    [line] = [ln for ln in err.splitlines() if "error" in ln]
    assert line.startswith(f"contrastkit pretrain: error: cannot decode video {broken}: ")
    assert line.endswith("; pass --data.skip_corrupt true to skip unreadable videos (they are "
                         "listed in the run folder's skipped_files.txt)")
    assert "Traceback" not in err


def test_skipped_videos_are_listed_like_images(videos_with_a_broken_one, tmp_path):
    """With skip_corrupt a corrupt video was skipped in a loader worker, and no
    skipped_files.txt named it: the workers now append it to a log the run folder merges."""
    root, broken = videos_with_a_broken_one
    out = tmp_path / "run"
    assert main(_video_args(root, out, "--data.skip_corrupt", "true",
                            "--data.num_workers", "1")) == 0
    assert (out / "skipped_files.txt").read_text() == f"{broken}\n"
    assert not (out / SKIP_LOG).exists()  # issue 52: the merged log was left behind


def test_a_run_that_ends_leaves_its_skip_log_merged_and_removed(tmp_path):
    """Issue 52, item 13: ``RUN/.skipped_files.log`` stayed in the run folder of a finished run
    beside ``skipped_files.txt``; a run that ends (finished or failed) merges and removes it."""
    for end in ("teardown", "on_exception"):
        folder = tmp_path / end
        folder.mkdir()
        record_skipped(folder / SKIP_LOG, "videos/broken.avi")
        trainer = SimpleNamespace(default_root_dir=str(folder), is_global_zero=True)
        callback = SkippedFilesCallback()
        with pytest.warns(UserWarning, match="skipped 1 unreadable"):
            callback.on_train_epoch_end(trainer, None)  # mid-run: merged, kept for the workers
        assert (folder / SKIP_LOG).is_file()
        with pytest.warns(UserWarning, match="skipped 1 unreadable"):
            record_skipped(folder / SKIP_LOG, "videos/late.avi")
            if end == "teardown":
                callback.teardown(trainer, None, "fit")
            else:
                callback.on_exception(trainer, None, RuntimeError("stopped"))
        assert (folder / SKIPPED_FILES).read_text() == "videos/broken.avi\nvideos/late.avi\n"
        assert sorted(p.name for p in folder.iterdir()) == [SKIPPED_FILES]


# --- text ------------------------------------------------------------------------------------
def _text_args(tmp_path: Path, corpus: Path, *extra: str) -> list[str]:
    tiny_bert = pytest.importorskip("tiny_bert")
    bert = tiny_bert.save_tiny_bert(tmp_path / "bert")
    return ["pretrain", "--data.text_file", str(corpus), "--data.batch_size", "8",
            "--model.method", "contrastkit.methods.simcse.SimCSE",
            "--model.method.encoder", f'{{"name": "{bert}", "max_length": 12}}',
            "--model.optimizer", '{"name": "adamw", "base_lr": 1e-3, "scale_lr": false, '
            '"weight_decay": 0.0, "warmup_epochs": 0}',
            "--trainer.max_epochs", "1", "--trainer.accelerator", "cpu",
            "--trainer.enable_progress_bar", "false", "--output", str(tmp_path / "run"), *extra]


@pytest.fixture
def corpus(tmp_path) -> Path:
    tiny_bert = pytest.importorskip("tiny_bert")
    lines = [s.encode() for s in tiny_bert.sentences(24)]
    lines[6] = b"the cat sat on the caf\xe9 mat"
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_a_corpus_line_that_is_not_utf8_stops_the_run_naming_file_and_line(tmp_path, corpus,
                                                                           capsys):
    assert main(_text_args(tmp_path, corpus)) == 2
    err = capsys.readouterr().err  # after the tokenizer's own progress bars
    [line] = [ln for ln in err.splitlines() if "error" in ln]
    assert line == (f"contrastkit pretrain: error: data.text_file: {corpus} line 7 is not UTF-8 "
                    "(byte 0xe9 at byte 23 of the line); pass --data.decode_errors skip to "
                    "leave such lines out, or replace to read them with U+FFFD")


def test_corpus_lines_that_are_not_utf8_can_be_skipped_and_are_listed(tmp_path, corpus):
    assert main(_text_args(tmp_path, corpus, "--data.decode_errors", "skip")) == 0
    assert (tmp_path / "run" / "skipped_files.txt").read_text() == f"{corpus}:7\n"


# --- a held-out split that holds out nothing -------------------------------------------------
def test_one_image_per_class_says_none_is_held_out(tmp_path, caplog):
    """The start line said "data.test_fraction 0.2 of each class held out" when a class of one
    image holds out none; the kNN monitor then had no image to query."""
    rng = np.random.default_rng(0)
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
        Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(
            tmp_path / name / "only.png")
    data = PretrainDataModule(dataset="folder", root=str(tmp_path), batch_size=2,
                              test_fraction=0.2)
    with caplog.at_level(logging.INFO):
        data.setup("fit")
    [line] = [r.getMessage() for r in caplog.records if "held out" in r.getMessage()]
    assert f"data: {tmp_path}: pretraining on 3 images, none held out" in line
    assert "0.2 of each class held out" not in line
    assert data.val_split is None and data.num_classes == 3  # no monitor on an empty split


# --- files that are not read as images (issue 52, item 4) ------------------------------------
def test_files_not_read_as_images_are_counted_in_the_start_line(tmp_path, caplog):
    """At 0f3dae1 a .gif, .tif or .bmp in a class folder was left out without a word; they
    are read now, and what is still not read (another extension, a file beside the class
    folders) is counted by extension."""
    rng = np.random.default_rng(0)
    for name, ext in (("a", "gif"), ("a", "tif"), ("a", "bmp"), ("b", "png"), ("b", "jpg")):
        (tmp_path / name).mkdir(exist_ok=True)
        for i in range(2):
            Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(
                tmp_path / name / f"{i}.{ext}")
    (tmp_path / "a" / "IMG_0001.HEIC").write_bytes(b"not read")
    (tmp_path / "b" / "notes.txt").write_text("not an image")
    (tmp_path / "b" / "more.txt").write_text("not an image")
    (tmp_path / "labels.csv").write_text("beside the class folders")
    data = PretrainDataModule(dataset="folder", root=str(tmp_path), batch_size=2,
                              test_fraction=0.2)
    with caplog.at_level(logging.INFO):
        data.setup("fit")
    assert len(data.train_set) + len(data.val_set) == 10  # every image, each format
    [line] = [r.getMessage() for r in caplog.records if "not read" in r.getMessage()]
    assert line.startswith(f"data: {tmp_path}: 4 file(s) not read as images (2 .txt, 1 .csv, "
                           "1 .heic; the formats read: .jpg, ")


def test_hidden_files_and_folders_are_not_read_and_are_counted(tmp_path, caplog):
    """A folder copied from a Mac holds ``._name.jpg`` resource forks (not images: every one
    failed to decode) and tools leave hidden thumbnail folders (copies of the images, which
    could fall on both sides of a held-out split): neither is read, both are counted."""
    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        (tmp_path / name / ".thumbnails").mkdir(parents=True)
        for i in range(3):
            Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(
                tmp_path / name / f"{i}.jpg")
            (tmp_path / name / f"._{i}.jpg").write_bytes(b"\x00\x05\x16\x07 AppleDouble")
        Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(
            tmp_path / name / ".thumbnails" / "0.jpg")
    (tmp_path / ".DS_Store").write_bytes(b"Bud1")
    data = PretrainDataModule(dataset="folder", root=str(tmp_path), batch_size=2,
                              test_fraction=0.2)
    with caplog.at_level(logging.INFO):
        data.setup("fit")
    files = [p for p, _ in data.train_set.samples + data.val_set.samples]
    assert sorted(os.path.relpath(p, tmp_path) for p in files) == [
        f"{c}/{i}.jpg" for c in "ab" for i in range(3)]
    [line] = [r.getMessage() for r in caplog.records if "not read" in r.getMessage()]
    assert line.startswith(f"data: {tmp_path}: 9 file(s) not read as images (9 hidden; ")
