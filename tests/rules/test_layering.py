"""Imports run one way (CONTRIBUTING.md, "Layout"): data -> models/losses -> methods -> train;
eval reads checkpoints and tensors; the command lines (``contrastkit.cli``) sit above both, and
nothing in the package imports the applications beside it (``studies``, ``examples``). Inside
data/, the stages import one way (``DATA_ALLOWED``).

Every module under ``src/contrastkit`` is parsed with :mod:`ast`; every ``import`` and
``from ... import`` in it counts, at module level or inside a function, absolute or relative.
Imports made from strings at run time (``importlib.import_module``) are not seen.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "contrastkit"

#: Packages that are layers; every other top-level module is "shared" (cli.py: "cli").
LAYERS = ("data", "models", "losses", "methods", "train", "eval")
#: What uses training and evaluation together: nothing below imports it.
APPLICATIONS = frozenset({"cli"})
#: Applications beside the package, in the source checkout: the package never imports them.
OUTSIDE = ("studies", "examples")

#: (importing layer, layers it must not import, why)
FORBIDDEN: list[tuple[str, frozenset[str], str]] = [
    ("eval", frozenset({"train"}) | APPLICATIONS, "eval reads checkpoints and tensors"),
    ("train", frozenset({"eval"}) | APPLICATIONS, "train does not depend on evaluation"),
    ("methods", frozenset({"train", "eval"}) | APPLICATIONS, "methods know no engine"),
    ("models", frozenset({"methods", "train", "eval"}) | APPLICATIONS, "models are below"),
    ("losses", frozenset({"methods", "train", "eval"}) | APPLICATIONS, "losses are below"),
    ("data", frozenset({"models", "losses", "methods", "train", "eval"}) | APPLICATIONS,
     "data is the bottom layer"),
    ("shared", frozenset({"methods", "train", "eval"}) | APPLICATIONS,
     "top-level modules other than cli.py are below train and eval"),
]


def module_name(path: Path) -> str:
    """``src/contrastkit/eval/knn.py`` -> ``contrastkit.eval.knn`` (``__init__`` -> package)."""
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer(module: str) -> str | None:
    """The layer of a ``contrastkit`` module; None for the package itself and other packages."""
    parts = module.split(".")
    if parts[0] != "contrastkit" or len(parts) == 1:
        return None
    if parts[1] in LAYERS:
        return parts[1]
    return "cli" if parts[1] == "cli" else "shared"


def imported_modules(module: str, path: Path, known: set[str]) -> list[tuple[int, str]]:
    """``(line, module)`` of every import in ``path``; ``from a import b`` gives ``a.b`` when
    that is a module of the package, else ``a``."""
    is_package = path.name == "__init__.py"
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                drop = node.level - 1 if is_package else node.level
                base = base[: len(base) - drop] if drop else base
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                found.append((node.lineno, full if full in known else target))
    return sorted(set(found))


def violations() -> list[tuple[str, str, str]]:
    """``(importing layer, imported layer, message)`` of every forbidden import."""
    known = modules()
    names = set(known)
    out = []
    for module, path in known.items():
        source = layer(module)
        for line, target in imported_modules(module, path, names):
            dest = layer(target)
            for importer, banned, why in FORBIDDEN:
                if source == importer and dest in banned:
                    out.append((source, dest, f"{path.relative_to(SRC.parent)}:{line}: "
                                f"{module} imports {target} ({why})"))
    return out


def test_imports_run_one_way():
    found = [message for _, _, message in violations()]
    assert not found, "layering violations:\n" + "\n".join(found)


def test_the_package_imports_nothing_from_the_checkout():
    """``studies`` and ``examples`` live beside the package: an installed copy has neither."""
    known = modules()
    found = [f"{path.relative_to(SRC.parent)}:{line}: {module} imports {target}"
             for module, path in known.items()
             for line, target in imported_modules(module, path, set(known))
             if target.split(".")[0] in OUTSIDE]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(("importer", "imported"), [("eval", "train"), ("train", "eval")])
def test_eval_and_train_do_not_import_each_other(importer, imported):
    """The rules the issue names first, on their own so that a failure reads plainly."""
    found = [m for source, dest, m in violations() if (source, dest) == (importer, imported)]
    assert not found, "\n".join(found)


# --- the checker itself ------------------------------------------------------------------------
@pytest.mark.parametrize(("source", "module", "is_package", "expected"), [
    ("from contrastkit.train.video import x", "contrastkit.eval.cli", False,
     "contrastkit.train.video"),
    ("from ..train import datamodule", "contrastkit.eval.cli", False,
     "contrastkit.train.datamodule"),
    ("from . import knn", "contrastkit.eval", True, "contrastkit.eval.knn"),
    ("from .knn import knn_predict", "contrastkit.eval.linear", False, "contrastkit.eval.knn"),
    ("def f():\n    import contrastkit.cli.pretrain\n", "contrastkit.eval.x", False,
     "contrastkit.cli.pretrain"),
    ("from contrastkit import eval as e", "contrastkit.train.module", False,
     "contrastkit.eval"),
])
def test_imports_are_resolved(tmp_path, source, module, is_package, expected):
    path = tmp_path / ("__init__.py" if is_package else "m.py")
    path.write_text(source)
    known = set(modules())
    assert [t for _, t in imported_modules(module, path, known)] == [expected]


#: Inside data/, the stages of the flow dataset (sources) -> decode -> crop (loading) -> augment,
#: and what each may import of data/ besides itself: the decoders are below the datasets that
#: call them, the loader's crops read the datasets and decoders, the views read the crops'
#: specs; ``specs`` (configuration records) import nothing.
DATA_STAGES = ("sources", "decode", "loading", "augment", "specs")
DATA_ALLOWED: dict[str, frozenset[str]] = {
    "decode": frozenset(),
    "sources": frozenset({"decode", "specs"}),
    "loading": frozenset({"sources", "decode", "specs"}),
    "augment": frozenset({"loading", "specs"}),
    "specs": frozenset(),
}


def data_part(module: str) -> str | None:
    """The stage of a module of ``contrastkit.data`` (``top`` for the package itself), else
    None."""
    parts = module.split(".")
    if parts[:2] != ["contrastkit", "data"]:
        return None
    return parts[2] if len(parts) > 2 and parts[2] in DATA_STAGES else "top"


def test_every_data_module_is_in_a_stage():
    stray = [m for m in modules() if data_part(m) == "top" and m != "contrastkit.data"]
    assert not stray, f"modules of data/ outside its stages: {stray}"


def test_data_stages_import_one_way():
    known = modules()
    found = []
    for module, path in known.items():
        source = data_part(module)
        if source in (None, "top"):
            continue
        for line, target in imported_modules(module, path, set(known)):
            dest = data_part(target)
            if dest not in (None, source) and dest not in DATA_ALLOWED[source]:
                found.append(f"{path.relative_to(SRC.parent)}:{line}: {module} ({source}) "
                             f"imports {target} ({dest})")
    assert not found, "data/ stage violations:\n" + "\n".join(found)


def test_data_parts_of_modules():
    assert data_part("contrastkit.data.sources.images._cifar") == "sources"
    assert data_part("contrastkit.data.decode.video") == "decode"
    assert data_part("contrastkit.data") == "top"
    assert data_part("contrastkit.data.augment.views") == "augment"
    assert data_part("contrastkit.models.resnet") is None


def test_layers_of_modules():
    assert layer("contrastkit.eval.knn") == "eval" and layer("contrastkit.train") == "train"
    assert layer("studies.repro.runner") is None and layer("examples.demos") is None
    assert layer("contrastkit.cli") == "cli" and layer("contrastkit.checkpoints") == "shared"
    assert layer("contrastkit") is None and layer("torch.nn") is None
