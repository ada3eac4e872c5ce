"""How fast `clusterctl image push` delivers the cpu image, per transport, against OpenSSH in the same run.

For each node count N (default 1, 2, 4), on a fresh sandbox (fresh registry storage too), with the
image built first (untimed):
- OpenSSH baselines to node1 (first count only): `docker save IMAGE | ssh node docker load` and
  `docker save IMAGE | ssh node 'cat >/dev/null'` (the sandbox's key and known_hosts);
- the first delivery with each transport (`image push --transport T --json`, nodes emptied first;
  the registry's includes its one push, compression and all): seconds, MB/s (image size / seconds),
  bytes moved per node (what went over the wire: zstd-compressed where the stream compressed) and how
  each node got it (`compression`), every node verified; `stream-plain` is the stream transport with
  `delivery.stream.compression: none` (the docker API's plain stream), to compare in the same run;
- the no-op delivery (every node holds the image);
- the payload-only re-delivery: one file added to the payload, rebuilt, delivered with each transport
  (library call, in this process): bytes moved per node and seconds.
Nothing is asserted: targets are reported, not enforced.

Usage: .venv/bin/python bench/delivery.py [--nodes 1,2,4] [--transports registry,stream[,stream-plain]]
       [--baselines load,cat] [--no-payload-only] [--json FILE]
       [--sandbox-state DIR]  (one count: that running sandbox, left up, instead of a fresh one; its
                               nodes are emptied of the image all the same)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import docker
from _sandbox import Bench, arguments, print_table, sandbox, write_json


def _empty_nodes(bench: Bench, reference: str) -> None:
    """Remove ``reference`` and every unused layer from each node's engine (a first delivery again)."""
    for i in range(1, bench.nodes + 1):
        container = f"clusterctl-{bench.name}-node{i}"
        subprocess.run(
            ["docker", "exec", container, "docker", "rmi", "-f", reference], capture_output=True, check=False
        )
        subprocess.run(
            ["docker", "exec", container, "docker", "image", "prune", "-af"], capture_output=True, check=True
        )


def _openssh(bench: Bench, reference: str, remote: str) -> float:
    """Seconds of `docker save REFERENCE | ssh node1 REMOTE` with the sandbox's key and known_hosts."""
    from clusterctl.inventory import load_inventory

    node = load_inventory(bench.inventory_path).nodes[0]
    ssh = [
        "ssh", "-i", str(node.ssh.identity_file), "-o", f"UserKnownHostsFile={node.ssh.known_hosts}",
        "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", f"root@{node.address}", remote,
    ]  # fmt: skip
    start = time.perf_counter()
    save = subprocess.Popen(["docker", "save", reference], stdout=subprocess.PIPE)
    subprocess.run(ssh, stdin=save.stdout, check=True, capture_output=True)
    save.stdout.close()
    if save.wait() != 0:
        raise RuntimeError("docker save failed")
    return time.perf_counter() - start


def _push_args(bench: Bench, transport: str) -> list[str]:
    """`image push` arguments for ``transport``; ``stream-plain``: the stream, zstd off in a copy of the
    sandbox's inventory (next to it, so its relative paths still hold)."""
    if transport != "stream-plain":
        return ["--transport", transport]
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    document = yaml.load(bench.inventory_path.read_text())
    document.setdefault("delivery", {})["stream"] = {"compression": "none"}
    plain = bench.inventory_path.with_name("inventory-stream-plain.yml")
    with plain.open("w") as out:
        yaml.dump(document, out)
    return ["-i", str(plain), "--transport", "stream"]


def _payload_only(bench: Bench, transport: str) -> dict[str, float]:
    """Rebuild with one file added to the payload and deliver that image with ``transport`` (in this
    process); the image record is put back to the original image afterwards."""
    from clusterctl.image import render
    from clusterctl.image.build import build_image
    from clusterctl.image.distribute import distribute
    from clusterctl.image.record import record_path
    from clusterctl.inventory import load_inventory
    from clusterctl.paths import payload_files

    os.environ["CLUSTERCTL_STATE_DIR"] = str(bench.state_dir)
    inventory = load_inventory(bench.inventory_path)
    saved = record_path(inventory).read_text()
    with tempfile.TemporaryDirectory() as tmp:
        changed = Path(tmp) / "payload"
        changed.mkdir()
        for script in payload_files():
            shutil.copy2(script, changed / script.name)
        (changed / "changed_marker.py").write_text("# one changed line\n")
        original, render.payload_files = render.payload_files, lambda: sorted(changed.glob("*.py"))
        try:
            build_image(inventory)
        finally:
            render.payload_files = original
    try:
        start = time.perf_counter()
        _, results = distribute(inventory, transport=transport)
        took = time.perf_counter() - start
    finally:
        record_path(inventory).write_text(saved)
    failed = {n: r.error for n, r in results.items() if not r.ok}
    if failed:
        raise RuntimeError(f"payload-only delivery ({transport}) failed: {failed}")
    return {"seconds": took, "bytes_per_node": max(r.bytes_sent for r in results.values())}


def _ways(nodes: dict[str, dict[str, object]]) -> str:
    """How the nodes got the image, e.g. ``zstd x2`` or ``zstd x1, none x1`` (``-``: not said)."""
    ways = [str(r["compression"] or "-") for r in nodes.values()]
    return ", ".join(f"{way} x{ways.count(way)}" for way in sorted(set(ways)))


def measure(
    nodes: int,
    transports: list[str],
    baselines: list[str],
    payload_only: bool = True,
    existing: Path | None = None,
) -> dict[str, object]:
    """Every figure for one node count, on a fresh sandbox (or ``existing``'s, emptied first all the same)."""
    with sandbox(nodes, "bench-dlv", existing) as bench:
        bench.clusterctl("image", "build")
        from clusterctl.image.record import read_image_record
        from clusterctl.inventory import load_inventory

        os.environ["CLUSTERCTL_STATE_DIR"] = str(bench.state_dir)
        record = read_image_record(load_inventory(bench.inventory_path))
        size = docker.from_env().images.get(record.image_id).attrs["Size"]
        figures: dict[str, object] = {"image_bytes": size}
        if "cat" in baselines:
            figures["openssh_cat_s"] = _openssh(bench, record.reference, "cat >/dev/null")
        if "load" in baselines:
            _empty_nodes(bench, record.reference)
            figures["openssh_load_s"] = _openssh(bench, record.reference, "docker load")
        for transport in transports:
            _empty_nodes(bench, record.reference)
            took, result = bench.json("image", "push", *_push_args(bench, transport))
            nodes_json = result["nodes"]
            failed = {n: r["error"] for n, r in nodes_json.items() if r["status"] == "failed"}
            figures[f"{transport}_first_s"] = took
            figures[f"{transport}_first_bytes_per_node"] = max(r["bytes_moved"] for r in nodes_json.values())
            figures[f"{transport}_first_failed"] = failed
            figures[f"{transport}_first_nodes"] = {
                n: {"bytes_moved": r["bytes_moved"], "compression": r.get("compression")}
                for n, r in nodes_json.items()
            }
            figures[f"{transport}_noop_s"], _ = bench.json("image", "push", *_push_args(bench, transport))
            if payload_only and transport != "stream-plain":  # the stream moves the whole image either way
                figures[f"{transport}_payload_only"] = _payload_only(bench, transport)
        return figures


def main() -> None:
    """Measure every node count, print the tables, write the JSON."""
    parser = arguments(__doc__, "1,2,4", repeats=False)
    parser.add_argument(
        "--transports", default="registry,stream", help="Transports (default registry,stream)."
    )
    parser.add_argument(
        "--baselines",
        default="load,cat",
        help="OpenSSH baselines, first count only: load (docker save | ssh docker load), cat (the same "
        "into cat >/dev/null: the wire's ceiling); default load,cat.",
    )
    parser.add_argument(
        "--no-payload-only",
        action="store_true",
        help="Skip the payload-only re-delivery (long on many nodes).",
    )
    args = parser.parse_args()
    counts = [int(n) for n in args.nodes.split(",")]
    transports = args.transports.split(",")
    figures: dict[int, dict[str, object]] = {}
    for i, n in enumerate(counts):  # the JSON is rewritten after each count: a later failure keeps it
        figures[n] = measure(
            n,
            transports,
            baselines=args.baselines.split(",") if i == 0 else [],
            payload_only=not args.no_payload_only,
            existing=args.sandbox_state,
        )
        write_json(args.json, {"figures": {str(k): f for k, f in figures.items()}})
    first = figures[counts[0]]
    mb = first["image_bytes"] / 1e6
    ssh_rows = [
        [what, first[key], mb / first[key]]
        for what, key in (
            ("docker save | ssh node 'cat >/dev/null'", "openssh_cat_s"),
            ("docker save | ssh node docker load", "openssh_load_s"),
        )
        if key in first
    ]
    if ssh_rows:
        print_table(f"OpenSSH to node1, image {mb:,.0f} MB", ["what", "seconds", "MB/s"], ssh_rows)
    rows = []
    for n in counts:
        for t in transports:
            f = figures[n]
            failed = f[f"{t}_first_failed"]
            rows.append(
                [
                    n,
                    t,
                    f[f"{t}_first_s"],
                    mb / f[f"{t}_first_s"],
                    f"{f[f'{t}_first_bytes_per_node'] / 1e6:,.0f} MB",
                    _ways(f[f"{t}_first_nodes"]),
                    f"{len(failed)} failed" if failed else "all verified",
                    f[f"{t}_noop_s"],
                    (
                        f"{f[f'{t}_payload_only']['bytes_per_node'] / 1e6:,.2f} MB in {f[f'{t}_payload_only']['seconds']:.1f} s"
                        if f"{t}_payload_only" in f
                        else "not measured"
                    ),
                ]
            )
    print_table(
        "clusterctl image push (CLI, start-up included; payload-only: library call)",
        [
            "nodes",
            "transport",
            "first s",
            "MB/s",
            "moved/node",
            "compression",
            "nodes",
            "no-op s",
            "payload-only re-delivery/node",
        ],
        rows,
    )
    write_json(args.json, {"figures": {str(n): f for n, f in figures.items()}})


if __name__ == "__main__":
    main()
