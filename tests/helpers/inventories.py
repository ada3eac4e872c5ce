"""The base two-node inventory the inventory tests edit (a paper-2020 cluster: V100s on InfiniBand)."""

from __future__ import annotations

BASE = """\
cluster:
  name: testcluster
  defaults:
    gpus:
      count: 4
      model: V100-SXM2-16GB
    fabric:
      kind: infiniband
      interface: ib0
      hca: mlx5_0
      rate_gbps: 100
nodes:
  - name: node1
    address: 10.0.0.1
    role: primary
    fabric:
      address: 192.168.11.1/24
  - name: node2
    address: 10.0.0.2
    fabric:
      address: 192.168.11.2/24
container:
  sshd_port: 50000
  mounts:
    - source: /srv/data
      target: /data
image:
  profile: paper-2020
"""
