"""contrastkit: contrastive representation learning, exact and fast.

Implements the objectives of SCE (Denize et al.), "Understanding the Behaviour of
Contrastive Loss" (Wang & Liu), DySTreSS (Manna et al.) and SINCERE (Feeney & Hughes),
with their baselines, data pipelines, training and evaluation.
"""

__version__ = "0.1.0"
