"""Running through Slurm: the batch script (pure), job states and exit codes (pure).

The effectful half (sbatch, polling, scancel over SSH to the login node) is
``clusterctl.run.launchers.slurm``.
"""
