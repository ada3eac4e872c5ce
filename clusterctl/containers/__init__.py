"""The up stage: the benchmark containers on the nodes.

``plan`` (pure: what ``up`` would start on a node and how it compares with what runs there),
``gate`` (the sshd login gate a started container must pass) and ``lifecycle`` (``up`` with its
survey, reconcile and cleanup, ``plan_up`` for ``up --dry-run``, ``down``, ``status``). Exec in a
running container is a connector: ``clusterctl.hosts.container_exec``.
"""
