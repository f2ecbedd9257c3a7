"""Sources: what a dataset is, per format, each item a uint8 image (or clip, or sentence) and
its label. The registry (``registry``: a name and a split -> a dataset) opens them for
pretraining and evaluation alike; ``images`` and ``video`` hold the image and video datasets,
``text`` / ``sts`` the sentence corpora, ``voc07`` and ``transfer_sets`` the evaluation sets,
``shards`` / ``stream`` the packed tar shards, ``wrappers`` the load-size resize, class
selection and subsets around any of them.
"""
