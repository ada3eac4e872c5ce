"""The run stage: a workload's launch plan, run by a launcher, judged and recorded.

``plan.py`` and ``sweep.py`` build launch plans (pure); ``preflight.py`` is the collective run's plan and
verdict (pure); ``slurm/`` is the pure Slurm half (batch script, job states, the job's snapshots);
``launchers/`` starts, follows, cancels and collects a plan (``ssh``, ``slurm``); ``runner.py`` is the
conductor, the one place a plan is run.
"""
