"""Running through Slurm: the batch script, the login node, job states and exit codes, and the job's
snapshots read back (pure); ``drain.py``, `check health --slurm-drain` (its scontrol argv pure, run on
the login node over SSH).

The backend half (sbatch, polling, scancel over SSH to the login node) is
``clusterctl.run.backends.slurm``; nothing here imports the backends. The step that starts the ranks is
the launcher's (``clusterctl.run.launchers.srun`` by default).
"""
