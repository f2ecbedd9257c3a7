"""Readers of the DySTreSS transfer sets (contrastkit.data.sources.transfer_sets) on small files in
the distributed layouts, with a bad input each."""

from __future__ import annotations

import json

import pytest
import transfer_fixtures as fx

from contrastkit.data.sources.transfer_sets import FileListImages, read_transfer_set

pytest.importorskip("PIL")
pytest.importorskip("scipy")


def test_flowers102_splits_from_the_mat_files(tmp_path):
    root = fx.flowers102(tmp_path)
    train = read_transfer_set("flowers102", root, "train")
    assert train.classes == ["1", "2", "3"]
    assert train.labels == [0, 0, 1, 1, 2, 2]
    assert [p.name for p in train.paths][:2] == ["image_00001.jpg", "image_00002.jpg"]
    assert len(read_transfer_set("flowers102", root, "trainval").paths) == 12
    test = read_transfer_set("flowers102", root, "test")
    assert test.paths[0].name == "image_00013.jpg"
    image, label = FileListImages(test)[0]
    assert image.dtype.is_floating_point is False and image.shape[0] == 3 and label == 0


def test_mura_images_take_their_study_label(tmp_path):
    files = read_transfer_set("mura", fx.mura(tmp_path), "valid")
    assert files.classes == ["normal", "abnormal"]
    assert files.labels == [0, 0, 1, 1, 0, 0, 1, 1]
    assert all(p.is_file() for p in files.paths)
    # the root may also be the MURA-v1.1 folder itself
    again = read_transfer_set("mura", tmp_path / "MURA-v1.1", "valid")
    assert again.paths == files.paths


def test_isic2016_mhist_chaoyang_labels(tmp_path):
    isic = read_transfer_set("isic2016", fx.isic2016(tmp_path / "isic"), "test")
    assert isic.labels == [0, 1, 0, 1, 0, 1] and isic.classes == ["benign", "malignant"]
    train = read_transfer_set("isic2016", tmp_path / "isic", "train")
    assert train.labels == [0, 1, 0, 1, 0, 1]
    mh = read_transfer_set("mhist", fx.mhist(tmp_path / "mhist"), "test")
    assert mh.classes == ["HP", "SSA"] and mh.labels == [0, 1, 0, 1, 0, 1]
    assert all("test" in p.name for p in mh.paths)
    ch = read_transfer_set("chaoyang", fx.chaoyang(tmp_path / "chaoyang"), "train")
    assert ch.labels == [0, 0, 1, 1, 2, 2, 3, 3] and len(ch.classes) == 4


def test_missing_list_file_is_named(tmp_path):
    root = fx.mura(tmp_path)
    (root / "MURA-v1.1" / "valid_labeled_studies.csv").unlink()
    with pytest.raises(FileNotFoundError, match=r"valid_labeled_studies\.csv"):
        read_transfer_set("mura", root, "valid")
    flowers = fx.flowers102(tmp_path / "f")
    (flowers / "setid.mat").unlink()
    with pytest.raises(FileNotFoundError, match=r"setid\.mat"):
        read_transfer_set("flowers102", flowers, "train")


def test_class_absent_from_a_split_is_named(tmp_path):
    root = fx.chaoyang(tmp_path)
    entries = [e for e in json.loads((root / "test.json").read_text()) if e["label"] != 2]
    (root / "test.json").write_text(json.dumps(entries))
    with pytest.raises(ValueError, match=r"test\.json: class adenocarcinoma has no image"):
        read_transfer_set("chaoyang", root, "test")


def test_malformed_rows_and_unknown_split_are_named(tmp_path):
    root = fx.isic2016(tmp_path)
    truth = root / "ISBI2016_ISIC_Part3_Test_GroundTruth.csv"
    truth.write_text(truth.read_text().replace("1.0", "maybe", 1))
    with pytest.raises(ValueError, match=r"Test_GroundTruth\.csv, line 2"):
        read_transfer_set("isic2016", root, "test")
    with pytest.raises(ValueError, match="split 'valid' is not one of train, test"):
        read_transfer_set("isic2016", root, "valid")


def test_corrupt_image_is_named(tmp_path):
    from contrastkit.data.decode.images import UnreadableImageError

    files = read_transfer_set("mhist", fx.mhist(tmp_path), "train")
    files.paths[1].write_bytes(b"broken")
    with pytest.raises(UnreadableImageError, match=files.paths[1].name):
        FileListImages(files)[1]
