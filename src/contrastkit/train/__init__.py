"""Pretraining engine: Lightning module, data module, callbacks and the pretrain command."""
