"""`clusterctl accept`: a running cluster taken from health to a verdict, one pass/fail per criterion.

Pure halves: ``criteria`` (the thresholds a user writes in a small YAML file, defaulting to the figures
shipped per hardware type), ``plan`` (the steps in order, each with its bound) and ``verdict`` (each
criterion judged from what a step measured). The effectful half, ``conduct``, runs the steps by calling
the same package functions `check health`, `check topology`, `check pairs`, `run` and `report` call.
"""
