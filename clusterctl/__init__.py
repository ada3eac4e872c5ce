"""clusterctl: a containerised Horovod/MPI benchmark cluster from one inventory file."""

__version__ = "0.1.0"
