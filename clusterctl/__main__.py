"""`python -m clusterctl` runs the command line."""

from clusterctl.cli import entry

entry()
