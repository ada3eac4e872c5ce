"""The error hierarchy. The CLI maps these to exit codes in one place (``clusterctl.cli.main``).

Library code raises; it never prints or exits. Every message names what failed, where (file, field,
host) and what to do next.
"""


class ClusterctlError(Exception):
    """Base of every error clusterctl reports to a user. ``exit_code`` is what the CLI exits with."""

    exit_code = 1


class InputError(ClusterctlError):
    """Bad input or environment: a file, a flag, a missing engine. Nothing was run on any host."""

    exit_code = 2


class InventoryError(InputError):
    """An inventory file that cannot be read or does not validate."""


class EnvironmentProblem(InputError):
    """The local environment cannot do what was asked (no Docker engine, a name clash, ...)."""


class ConnectError(ClusterctlError):
    """A host could not be reached, or its host key was unknown or changed."""


class StepError(ClusterctlError):
    """A step on a host failed."""


class RunFailed(ClusterctlError):
    """A benchmark or a check ran and failed."""
