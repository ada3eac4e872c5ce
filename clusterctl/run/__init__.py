"""The run stage: a workload's job, started by a launcher on a backend, judged and recorded.

Pure: ``plan.py`` and ``sweep.py`` build jobs; ``preflight.py`` is the collective run's jobs and
verdict; ``launchers/`` renders a job as one program's command (``mpirun``, ``srun``); ``judge.py``
judges one run into a ``RunRecord``; ``slurm/`` is the pure Slurm half (batch script, login node, job
states, the job's snapshots).
Effectful: ``backends/`` (the contract in ``__init__``; ``ssh``, ``slurm``) prepares, starts, follows,
cancels and collects a job; ``context.py`` resolves the backend, the workload and the preflight once;
``rundir.py`` writes the run directory; ``conductor.py`` is the conductor, the one place a job is run.

What checks the cluster through runs (`check pairs`, `check health`'s collectives, baselines, Slurm
drains and health checks) is ``clusterctl.check``, a layer above.
"""
