#!/bin/sh
# PID 1 of a sandbox node: per-node host keys, the node's own Docker engine, then sshd in the foreground.
set -eu

# Keys are made here, not in the image, so that no two nodes share a host key.
ssh-keygen -A >/dev/null

# The node's engine keeps its data on the volume mounted at /var/lib/docker. A pid file left by a
# previous run of this container (restart) would stop it from starting.
rm -f /var/run/docker.pid
dockerd >/var/log/dockerd.log 2>&1 &

exec /usr/sbin/sshd -D -e
