"""The check stage's runs and Slurm's side of `check health`: what checks the cluster by running on it,
above the run stage it runs through.

``pairs.py`` (`check pairs`: the collective on node groups through the run conductor; the pure search
and judgement are ``clusterctl.diagnostics.pairs``), ``health_collective.py`` (`check health
--level`'s one-node collective on every node), ``site_baseline.py`` (`baseline save`). Slurm: pure,
``drain.py`` (the drain reason and the ``scontrol update`` argv) and ``healthcheck.py`` (the
HealthCheckProgram script `check slurm-hc` renders); effectful, ``scontrol.py`` (that argv run on the
login node over SSH).
"""
