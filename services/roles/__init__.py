"""The agent roles, one module per role process: perceiver (R1), planner (R2) with its dispatcher
and memory calibration, metaval (R4b), ggs (R7) with its pure loss math, spawner, and the effector
(one process per subtask) with executor (R3), agent-validator (R4a) and verifier (Law 0).
Imports protocol/, services.runtime and services.safety only."""
