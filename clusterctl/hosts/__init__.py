"""Reaching the nodes: the connectors every stage uses, importing no stage.

SSH sessions (Fabric, ``ssh``), files written over SFTP (``sftp``), the Docker engines over SSH
(``docker_remote``), exec in a node's benchmark container (``container_exec``), SSH keys and
known_hosts lines (``sshkeys``), the cluster's own SSH material for the containers (``cluster_keys``).
"""

import logging

# paramiko logs a failed handshake (a wrong banner, a reset) with its own traceback on its
# "paramiko.transport" logger; with no handler anywhere, Python's last-resort handler printed that
# on stderr beside clusterctl's one-line ConnectError. The failure reaches the user once, as that.
logging.getLogger("paramiko").addHandler(logging.NullHandler())
