"""Running through Slurm, pure: the batch script, the login node, job states and exit codes, and the
job's snapshots read back. Draining nodes and the Slurm health check are the check stage's
(``clusterctl.check``).

The backend half (sbatch, polling, scancel over SSH to the login node) is
``clusterctl.run.backends.slurm``; nothing here imports the backends. The step that starts the ranks is
the launcher's (``clusterctl.run.launchers.srun`` by default).
"""
