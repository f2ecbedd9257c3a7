"""The tiny pretraining run the evaluation tests share (``tiny_run`` in ``tests/conftest.py``)."""

#: ``contrastkit pretrain`` arguments of the tiny run: SimCLR, a 16-d convnet with a 2-layer
#: projector (batch norm) to 8-d, 2 epochs on 128 digits.
TINY_PRETRAIN = [
    "--data.dataset", "digits", "--data.batch_size", "32", "--data.subset", "128",
    "--data.monitor_bank_size", "128", "--model.views.size", "8",
    "--trainer.accelerator", "cpu", "--trainer.devices", "1", "--trainer.max_epochs", "2",
    "--trainer.enable_progress_bar", "false", "--trainer.log_every_n_steps", "1",
    "--model.method", "contrastkit.methods.SimCLR",
    "--model.method.backbone", '{"name": "small_convnet", "width": 8, "out_dim": 16}',
    "--model.method.projector", '{"hidden_dim": 12, "out_dim": 8, "batch_norm": "all"}',
]
