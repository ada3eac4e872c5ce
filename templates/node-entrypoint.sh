#!/bin/sh
# PID 1 of a sandbox node: per-node host keys, the node's own Docker engine, then sshd in the foreground.
set -eu

# Keys are made here, not in the image, so that no two nodes share a host key.
ssh-keygen -A >/dev/null

# The node's engine keeps its data on the volume mounted at /var/lib/docker. Pid files left by a
# previous run of this container (restart) would stop it from starting: dockerd's own, and its
# containerd's, whose number another process of this run may now have (dockerd then waits for that
# process's socket and gives up).
rm -f /var/run/docker.pid /var/run/docker/containerd/containerd.pid
dockerd >/var/log/dockerd.log 2>&1 &

# Slurm, where `sandbox up --slurm` configured it: after a restart of this container the daemons it
# ran come back (munge first; slurmctld where slurm.conf is, the controller; slurmd with the conf
# server `sandbox up` recorded). A daemon that will not start is said, and sshd starts all the same.
if [ -s /etc/munge/munge.key ]; then
  # The GPU-shaped node's device nodes (a restart gives the container a fresh /dev).
  if [ -s /etc/slurm/clusterctl-gpus ]; then
    i=0
    while [ "$i" -lt "$(cat /etc/slurm/clusterctl-gpus)" ]; do
      [ -e "/dev/nvidia$i" ] || mknod -m 0666 "/dev/nvidia$i" c 195 "$i" || echo "node-entrypoint: mknod /dev/nvidia$i failed" >&2
      i=$((i + 1))
    done
  fi
  runuser -u munge -- /usr/sbin/munged || echo "node-entrypoint: munged did not start" >&2
  if [ -s /etc/slurm/slurm.conf ]; then
    slurmctld || echo "node-entrypoint: slurmctld did not start" >&2
  fi
  if [ -s /etc/slurm/clusterctl-conf-server ]; then
    (ulimit -l unlimited 2>/dev/null || true; slurmd --conf-server "$(cat /etc/slurm/clusterctl-conf-server)") || echo "node-entrypoint: slurmd did not start" >&2
  fi
fi

exec /usr/sbin/sshd -D -e
