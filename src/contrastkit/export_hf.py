"""Export a pretrained backbone as a Hugging Face Hub-format folder
(``contrastkit export --format hf``).

The folder holds what a model repository on the Hub holds, ready for ``hf upload`` (or the
older ``huggingface-cli upload``; nothing here uploads):

* ``model.safetensors``: the backbone's weights in the layout :func:`contrastkit.export.
  export_backbone` writes (torchvision's keys for contrastkit's ResNets, timm's own keys for
  ``timm:<model>`` backbones, contrastkit's keys otherwise), with the backbone's description
  in the header metadata (``contrastkit_backbone``), ``format: pt``, and the SHA-256 of the
  tensors with the run's identity and settings (:mod:`contrastkit.export_metadata`; the
  digest is checked whenever contrastkit loads the folder);
* ``config.json``: the backbone description, its feature size, the method, the data and the
  input the run used (``input_size``, ``normalize`` with its ``image_mean`` and
  ``image_std``); for timm backbones also timm's own fields (``architecture``,
  ``num_classes``, ``num_features``, ``model_args``, ``pretrained_cfg``), so that
  ``timm.create_model("hf-hub:<user>/<repo>")`` builds and loads it once uploaded; and
  ``contrastkit_export``, the files the export wrote and the digest of its weights, which says
  the folder is whole;
* ``README.md``: the model card: Hub metadata (YAML front matter), method, backbone, data,
  epochs, the run's evaluation results (every ``results.json`` in the run folder, or in the
  ``RUN-eval`` folder beside it where the commands that pretraining suggests write, that
  evaluated this very checkpoint, by SHA-256, and any ``--results`` folder), how to load it,
  the run's ``config.yaml`` and the commits.

The folder is written whole or not at all (:func:`contrastkit.export.write_export`); two
exports of one checkpoint are byte-identical. :func:`contrastkit.checkpoints.load_backbone`
reads the folder (or a snapshot of it downloaded with ``huggingface_hub.snapshot_download``)
directly, once :func:`~contrastkit.checkpoints.check_export_folder` finds it whole; ``eval``
and ``analyze`` start from the settings its weights carry (normalisation, input size, data,
kNN monitor), as for the checkpoint.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from contrastkit import __version__
from contrastkit.checkpoints import (
    DIGEST_METADATA,
    EXPORT_RECORD,
    HUB_CONFIG,
    HUB_WEIGHTS,
    SPEC_METADATA,
    file_hash,
    load_backbone,
    load_checkpoint_file,
    read_metadata,
    weights_file,
)
from contrastkit.export import (
    backbone_state,
    recover_export,
    run_identity_of,
    safetensors_bytes,
    write_export,
)
from contrastkit.export_metadata import export_metadata, run_settings
from contrastkit.models.timm_backbone import timm_model_name
from contrastkit.outputs import check_output_folder, evaluations_folder
from contrastkit.provenance import source_commit

__all__ = ["export_hub_folder"]

MODEL_CARD = "README.md"
#: What the folder holds (``--overwrite`` replaces these, and refuses a folder with others).
HUB_FILES = frozenset({HUB_CONFIG, HUB_WEIGHTS, MODEL_CARD})
#: The run folder's evaluation results (``contrastkit eval --output``).
RESULTS_JSON = "results.json"


def _results(run: Path | None, extra: list[Path], sha256: str) -> list[dict]:
    """The evaluations of the checkpoint: every ``results.json`` under ``run`` and under the
    ``RUN-eval`` folder beside it (:func:`~contrastkit.outputs.evaluations_folder`) whose
    checkpoint SHA-256 is ``sha256``, then the ``extra`` folders (which must have evaluated it
    too)."""
    found: list[dict] = []
    seen: set[Path] = set()
    candidates = [path for folder in ((run, evaluations_folder(run)) if run else ())
                  for path in sorted(folder.rglob(RESULTS_JSON))]
    for folder in extra:
        path = Path(folder) / RESULTS_JSON
        if not path.is_file():
            raise FileNotFoundError(f"--results {folder}: no {RESULTS_JSON} there (the folder "
                                    "of contrastkit eval ... --output)")
        candidates.append(path)
    for path in candidates:
        if path.resolve() in seen:
            continue
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        evaluated = (record.get("checkpoint") or {}).get("sha256")
        if evaluated != sha256:
            if path.parent in [Path(f) for f in extra]:
                raise ValueError(f"--results {path.parent} evaluated another checkpoint "
                                 f"(SHA-256 {str(evaluated)[:12]}..., the exported one has "
                                 f"{sha256[:12]}...)")
            continue
        seen.add(path.resolve())
        found.append({"folder": str(path.parent), **record})
    return found


def _flat(metrics: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(metrics, dict):
        return [item for key, value in metrics.items()
                for item in _flat(value, f"{prefix}{key}/")]
    return [(prefix.rstrip("/"), metrics)]


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def hub_config(spec: dict, entry: dict, out_dim: int, timm_kwargs: dict | None) -> dict:
    """``config.json``: the backbone and the run (module doc); timm's fields for timm
    backbones."""
    views = entry.get("views") or {}
    stats = entry.get("normalization") or {}
    config: dict[str, Any] = {
        "library_name": "contrastkit", "contrastkit_version": __version__,
        "backbone": spec, "feature_dim": out_dim, "method": entry.get("method"),
        "data": entry.get("data") or {}, "input_size": views.get("size"),
        "normalize": views.get("normalize"), "image_mean": stats.get("mean"),
        "image_std": stats.get("std"),
    }
    model = timm_model_name(spec["name"])
    if model is not None:
        size = views.get("size")
        pretrained = {"num_classes": 0, **({"input_size": [3, size, size]} if size else {}),
                      **({"mean": stats["mean"], "std": stats["std"]} if stats else {})}
        config.update({"architecture": model, "num_classes": 0, "num_features": out_dim,
                       "model_args": timm_kwargs or {}, "pretrained_cfg": pretrained})
    return config


def model_card(config: dict, checkpoint: dict, results: list[dict], run_config: str | None,
               trained_at: str | None, commit: str | None) -> str:
    """``README.md``: Hub front matter, then what the model is and how it was made
    (``trained_at``: the commit of the code that trained it; ``commit``: of the exporting
    code; None when unknown)."""
    entry = checkpoint.get("contrastkit") or {}
    spec, method = config["backbone"], config.get("method") or "unknown method"
    data = config.get("data") or {}
    dataset = data.get("dataset") or "unknown data"
    timm_model = timm_model_name(spec["name"])
    tags = ["contrastkit", "self-supervised-learning", "contrastive-learning",
            "image-feature-extraction", *([method.lower()] if config.get("method") else [])]
    front = ["---", f"library_name: {'timm' if timm_model else 'contrastkit'}", "tags:",
             *[f"- {tag}" for tag in tags], "pipeline_tag: image-feature-extraction", "---", ""]
    schedule = entry.get("schedule") or {}
    epoch = checkpoint.get("epoch")
    epochs = (f"{int(epoch) + 1} of {schedule.get('max_epochs')} epochs"
              if isinstance(epoch, int) else "unknown")
    optimizer = schedule.get("optimizer") or {}
    backbone = spec["name"] + (f" ({json.dumps(spec.get('timm_kwargs'))})"
                               if spec.get("timm_kwargs") else "")
    classes = data.get("classes") or []
    lines = [
        *front, f"# {method}, {spec['name']}, pretrained on {dataset}", "",
        f"A backbone pretrained with {method} by contrastkit (self-supervised contrastive "
        "learning); the weights are the online backbone's, without projector.", "",
        "| | |", "|---|---|",
        f"| method | {method} |",
        f"| backbone | {backbone}; {config['feature_dim']} features |",
        f"| data | {dataset}" + (f", {len(classes)} classes" if classes else "") + " |",
        f"| input | {config.get('input_size')} px, normalisation "
        f"{config.get('normalize') or 'none'} |",
        f"| training | {epochs} (step {checkpoint.get('global_step', 'unknown')}); optimiser "
        f"{optimizer.get('name', 'unknown')}, base lr {optimizer.get('base_lr', 'unknown')} |",
        f"| trained at commit | {trained_at or 'not recorded'} |",
        f"| exported by | contrastkit {__version__}, commit {commit or 'unknown (no git checkout)'}"
        " |", "", "## Evaluation", ""]
    if results:
        lines += ["| protocol | metric | value | evaluation |", "|---|---|---|---|"]
        for record in results:
            protocol = record.get("protocol") or record.get("command") or "eval"
            for name, value in _flat(record.get("metrics") or {}):
                lines.append(f"| {protocol} | {name} | {_number(value)} | "
                             f"{Path(record['folder']).name} |")
    else:
        lines.append("No evaluation of this checkpoint was found in its run folder or in the "
                     "`RUN-eval` folder beside it. To list one here, evaluate the checkpoint "
                     "into that folder (`contrastkit eval knn --checkpoint CKPT --data NAME "
                     "--baselines --output RUN-eval/knn`, the command pretraining prints last) "
                     "and export again, or pass `--results DIR` to `contrastkit export`.")
    lines += ["", "## Use", "", "```python", "from contrastkit.checkpoints import load_backbone",
              "from huggingface_hub import snapshot_download", "",
              'backbone, spec = load_backbone(snapshot_download("USER/REPO"))  # or a local '
              "folder", "features = backbone(images)  # (N, "
              f"{config['feature_dim']}), images normalised as above", "```", ""]
    if timm_model:
        lines += ["With timm alone:", "", "```python", "import timm", "",
                  'model = timm.create_model("hf-hub:USER/REPO", pretrained=True)', "```", ""]
    if run_config:
        lines += ["## Training config", "", "```yaml", run_config.rstrip(), "```", ""]
    return "\n".join(lines)


def export_hub_folder(checkpoint: str | os.PathLike, output: str | os.PathLike,
                      overwrite: bool = False, results: list[str] | None = None) -> Path:
    """Write the Hub-format folder of ``checkpoint``'s backbone to ``output`` (module doc).

    Args:
        checkpoint: a contrastkit pretraining checkpoint (``.ckpt``; an exported backbone
            works too, with a card that knows less).
        output: the folder to write (new, empty, or with ``overwrite`` an earlier export).
        overwrite: replace an earlier export in ``output``.
        results: evaluation folders (``results.json``) of this checkpoint to list besides
            those found in its run folder and the ``RUN-eval`` folder beside it.

    Raises:
        FileNotFoundError: when ``checkpoint`` or a ``results`` folder is missing.
        FileExistsError: when ``output`` is not empty and ``overwrite`` is false, or holds
            other files.
        ValueError: for an unreadable checkpoint, or a ``results`` folder of another one.
        OSError: when the folder cannot be written (a full disk), naming it; an earlier
            export there is kept.
    """
    source = weights_file(checkpoint)  # a run folder: its checkpoints/last.ckpt
    output = Path(output)
    recover_export(output)
    check_output_folder(output, overwrite=overwrite, owned=HUB_FILES.__contains__,
                        what="export")
    backbone, spec = load_backbone(source)
    data = load_checkpoint_file(source) if source.suffix in (".ckpt", ".pth", ".pt") else {}
    settings = run_settings(read_metadata(source))
    entry = {**((data.get("contrastkit") or {}) if isinstance(data, dict) else {}),
             **(settings or {})}
    run = source.parent.parent if source.parent.name == "checkpoints" else None
    found = _results(run, [Path(r) for r in results or []], file_hash(source))
    run_config = run / "config.yaml" if run is not None else None
    spec_dict = asdict(spec)
    config = hub_config(spec_dict, entry, int(backbone.out_dim),
                        getattr(backbone, "timm_kwargs", None))
    identity = run_identity_of(source)
    card = model_card(config, data if isinstance(data, dict) else {}, found,
                      run_config.read_text() if run_config and run_config.is_file() else None,
                      (identity or {}).get("commit"), source_commit())
    state = backbone_state(backbone)
    metadata = {"format": "pt", SPEC_METADATA: json.dumps(spec_dict),
                **export_metadata(state, identity, settings)}
    config[EXPORT_RECORD] = {"files": sorted(HUB_FILES),
                             "weights_sha256": metadata[DIGEST_METADATA]}
    return write_export(output, {HUB_WEIGHTS: safetensors_bytes(state, metadata),
                                 HUB_CONFIG: (json.dumps(config, indent=2) + "\n").encode(),
                                 MODEL_CARD: card.encode()})
