"""The science of openbaleen. Nothing in this package imports Prefect: flows and tasks adapt it
to orchestration, so every function here runs and tests on its own.

- ``corpus``, ``claims``, ``demo_world``: reading corpora and HoVer claims, the seeded demo world;
- ``retrieval``: FLIPR (modeling, tokenization, scoring, codec, index, search), BM25, fusion;
- ``condensing``: condenser stage 1 and 2 and the reader (models, input layouts, calibration);
- ``engine``: the hop loop that verifies claims;
- ``training``: latent hop ordering and the trainers of every model;
- ``metrics``, ``verdicts``, ``results``: HoVer's metrics, per-claim rows, results files;
- ``dataset``, ``pipeline``: the corpus and claims in memory and the training and evaluation
  flows' steps over them, for a machine without Prefect or a store (the GPU benchmark).
"""
