"""Issue 52, item 3: the listing of a dataset's files that a resumed run is checked against
(per class folder: how many files, a digest of their relative paths and sizes)."""

from __future__ import annotations

import os
from pathlib import Path

from own_images import make_own_folder

from contrastkit.data.sources.listing import data_listing, listing_changes


def test_an_image_folder_is_listed_per_class_folder(tmp_path):
    root = make_own_folder(tmp_path / "flat", per_class=3, classes=("cat", "dog"))
    (root / "cat" / "notes.txt").write_text("not an image: not listed")
    listing = data_listing("folder", root)
    assert listing["files"] == "images"
    assert {k: n for k, (n, _) in listing["groups"].items()} == {"cat": 3, "dog": 3}
    split = make_own_folder(tmp_path / "split" / "train", per_class=2, classes=("cat",))
    make_own_folder(split.parent / "test", per_class=1, classes=("cat",))
    assert {k: n for k, (n, _) in data_listing("folder", split.parent)["groups"].items()} == {
        "train/cat": 2, "test/cat": 1}
    flat = make_own_folder(tmp_path / "unlabelled", per_class=2, classes=("x",),
                           labelled=False)
    assert data_listing("folder", flat)["groups"].keys() == {"."}


def test_what_changed_is_said_per_class(tmp_path):
    root = make_own_folder(tmp_path / "images", per_class=4, classes=("cat", "dog", "emu"))
    then = data_listing("folder", root)
    assert listing_changes(then, data_listing("folder", root)) is None
    for path in sorted((root / "cat").iterdir())[:3]:
        path.unlink()
    os.rename(root / "dog" / "dog_0.png", root / "dog" / "renamed.png")
    make_own_folder(root, per_class=2, classes=("fox",))
    for path in (root / "emu").iterdir():
        path.unlink()
    (root / "emu").rmdir()
    assert listing_changes(then, data_listing("folder", root)) == (
        "3 image(s) fewer in 'cat', other images in 'dog' (as many: renamed, replaced or "
        "resized), 4 image(s) fewer in 'emu' (gone), 2 image(s) more in 'fox' (new)")


def test_a_file_rewritten_at_another_size_is_a_change(tmp_path):
    root = make_own_folder(tmp_path / "images", per_class=2, classes=("cat",))
    then = data_listing("folder", root)
    path = root / "cat" / "cat_0.png"
    path.write_bytes(path.read_bytes() + b"\0")
    assert "other images in 'cat'" in listing_changes(then, data_listing("folder", root))


def test_many_changed_classes_are_counted_after_the_first_five(tmp_path):
    names = tuple(f"c{i}" for i in range(8))
    root = make_own_folder(tmp_path / "images", per_class=2, classes=names)
    then = data_listing("folder", root)
    for name in names:
        (root / name / f"{name}_0.png").unlink()
    said = listing_changes(then, data_listing("folder", root))
    assert said.count("fewer") == 5 and said.endswith("and 3 more group(s) changed")


def test_shards_and_archives_are_listed_and_fixed_releases_are_not(tmp_path):
    shards = tmp_path / "shards"
    (shards / "train").mkdir(parents=True)
    (shards / "train" / "shard-00000.tar").write_bytes(b"x" * 10)
    (shards / "train" / "index.json").write_text("{}")
    listing = data_listing("shards", shards)
    assert listing["files"] == "shards" and listing["groups"]["train"][0] == 2
    (shards / "train" / "shard-00001.tar").write_bytes(b"y")
    assert listing_changes(listing, data_listing("shards", shards)) == \
        "1 file(s) more in 'train'"
    archive = tmp_path / "images.tar.gz"
    archive.write_bytes(b"z" * 5)
    before = data_listing("image_archive", archive)
    archive.write_bytes(b"z" * 6)
    assert listing_changes(before, data_listing("image_archive", archive)) == \
        "other files in 'images.tar.gz' (as many: renamed, replaced or resized)"
    assert data_listing("cifar10", tmp_path) is None
    assert data_listing("folder", Path(tmp_path / "absent")) is None
    assert data_listing("shards", "https://host/shards") is None
