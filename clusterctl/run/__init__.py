"""The run stage: a workload's launch plan, run by a launcher, judged and recorded.

Pure: ``plan.py`` and ``sweep.py`` build launch plans; ``preflight.py`` is the collective run's plan and
verdict; ``judge.py`` judges one run into a ``RunRecord``; ``slurm/`` is the pure Slurm half (batch
script, login node, job states, the job's snapshots).
Effectful: ``launchers/`` (the contract in ``__init__``; ``ssh``, ``slurm``) starts, follows, cancels
and collects a plan; ``context.py`` resolves the launcher, the workload and the preflight once;
``rundir.py`` writes the run directory; ``runner.py`` is the conductor, the one place a plan is run.

What checks the cluster through runs (`check pairs`, `check health`'s collectives, baselines, Slurm
drains and health checks) is ``clusterctl.check``, a layer above.
"""
