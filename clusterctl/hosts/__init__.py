"""Reaching the nodes: SSH sessions (Fabric) and their Docker engines (docker SDK over SSH)."""

import logging

# paramiko logs a failed handshake (a wrong banner, a reset) with its own traceback on its
# "paramiko.transport" logger; with no handler anywhere, Python's last-resort handler printed that
# on stderr beside clusterctl's one-line ConnectError. The failure reaches the user once, as that.
logging.getLogger("paramiko").addHandler(logging.NullHandler())
