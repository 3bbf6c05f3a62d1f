"""The `world` process (seed 002): entities, a knowledge graph, bi-temporal facts and the goal
table in its own LMDB environment. Imports protocol/ and services/runtime only; nothing but the
CLI imports it."""
