"""The host-setup playbook rendered for the example clusters, without any host: exact commands,
skip reasons, and hostile values that stay inert."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from clusterctl.errors import InputError
from clusterctl.hosts.sshkeys import ensure_keypair
from clusterctl.inventory import Inventory, load_inventory
from clusterctl.paths import data_dir
from clusterctl.provision.playbook import (
    Playbook,
    Step,
    Upload,
    load_playbook,
    nodes_in_limit,
    render_step,
    select_steps,
)
from tests.helpers.strictjson import strict_loads

PLAYBOOK = data_dir("playbooks") / "host-setup.yml"


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "state"))


def _context(inv: Inventory) -> dict:
    from clusterctl.provision.plan import step_context

    return step_context(inv, {n.name: f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA{n.name}" for n in inv.nodes})


def _rendered(inventory: str, step: str, node_index: int = 0):
    inv = load_inventory(data_dir("inventories") / inventory)
    playbook = load_playbook(PLAYBOOK)
    (chosen,) = select_steps(playbook, [step])
    return render_step(chosen, inv.nodes[node_index], _context(inv))


def test_playbook_loads_and_steps_are_in_the_appendix_order() -> None:
    names = [s.name for s in load_playbook(PLAYBOOK).steps]
    assert (
        names.index("base-packages")
        < names.index("cluster-ssh")
        < names.index("mofed")
        < names.index("ipoib")
    )
    assert names.index("mofed") < names.index("gpudirect-rdma")


def test_paper_mofed_installs_the_whitepapers_version_without_firmware_update() -> None:
    r = _rendered("paper-c4140.yml", "mofed")
    assert r.skip_reason is None
    assert "want=4.7-3.2.9.0" in r.check
    assert "ofed_info -s" in r.check
    url = "https://content.mellanox.com/ofed/MLNX_OFED-4.7-3.2.9.0/MLNX_OFED_LINUX-4.7-3.2.9.0-ubuntu18.04-x86_64.tgz"
    assert url in r.apply
    assert "--without-fw-update" in r.apply
    # root's own directory (never world-writable /tmp), then a stale install directory cleaned first
    lines = r.apply.splitlines()
    mkdir = lines.index("install -d -m 0700 /var/lib/clusterctl")
    assert lines[mkdir + 1] == "rm -rf /var/lib/clusterctl/mofed && mkdir -p /var/lib/clusterctl/mofed"
    assert r.uploads == ()  # without provision.mofed_tarball_path nothing is pushed
    assert f"curl -fsSL {url} | tar -xz -C /var/lib/clusterctl/mofed" in r.apply


def _pushed_tarball_inventory(tmp_path: Path) -> Inventory:
    """paper-c4140.yml copied next to a tarball it names by a relative provision.mofed_tarball_path."""
    tarball = tmp_path / "MLNX_OFED_LINUX-4.7-3.2.9.0-ubuntu18.04-x86_64.tgz"
    tarball.write_bytes(b"a tarball")
    text = (data_dir("inventories") / "paper-c4140.yml").read_text()
    path = tmp_path / "paper.yml"
    path.write_text(f"{text}\nprovision:\n  mofed_tarball_path: {tarball.name}\n")
    return load_inventory(path)


def test_mofed_pushes_the_controller_tarball_and_installs_from_it(tmp_path: Path) -> None:
    inv = _pushed_tarball_inventory(tmp_path)
    (step,) = select_steps(load_playbook(PLAYBOOK), ["mofed"])
    r = render_step(step, inv.nodes[1], _context(inv))
    assert r.uploads == (("mofed_tarball", "/var/lib/clusterctl/mofed.tgz", 0o600),)
    assert "curl" not in r.apply and "https://" not in r.apply
    lines = r.apply.splitlines()
    extract = lines.index(
        "tar -xzf /var/lib/clusterctl/mofed.tgz -C /var/lib/clusterctl/mofed --strip-components=1"
    )
    install = lines.index("/var/lib/clusterctl/mofed/mlnxofedinstall --without-fw-update --all --force")
    clean = lines.index("rm -rf /var/lib/clusterctl/mofed && mkdir -p /var/lib/clusterctl/mofed")
    assert clean < extract < install
    # both the extracted directory and the pushed tarball go, whether the install succeeds or fails
    assert "trap 'rm -rf /var/lib/clusterctl/mofed /var/lib/clusterctl/mofed.tgz' EXIT" in lines[:extract]
    assert "want=4.7-3.2.9.0" in r.check  # the probe is unchanged: an equal version is kept


def test_the_tarball_is_handed_to_the_executor_as_a_path_not_its_bytes(tmp_path: Path) -> None:
    from clusterctl.provision.plan import step_files

    inv = _pushed_tarball_inventory(tmp_path)
    files = step_files(inv)
    assert files["mofed_tarball"] == tmp_path / "MLNX_OFED_LINUX-4.7-3.2.9.0-ubuntu18.04-x86_64.tgz"
    assert isinstance(files["mofed_tarball"], Path)  # streamed at upload time, never read whole
    assert "mofed_tarball" not in step_files(load_inventory(data_dir("inventories") / "paper-c4140.yml"))


def test_an_upload_whose_condition_is_false_is_left_out() -> None:
    inv = load_inventory(data_dir("inventories") / "paper-c4140.yml")
    step = Step.model_validate(
        {
            "name": "s",
            "description": "d",
            "check": "false",
            "apply": "true",
            "upload": [
                {"source": "a", "dest": "/tmp/{{ node.name }}-a", "when": "node.role == 'primary'"},
                {"source": "b", "dest": "/tmp/b", "mode": 0o644},
            ],
        }
    )
    assert render_step(step, inv.nodes[0], _context(inv)).uploads == (
        ("a", "/tmp/c4140-1-a", 0o600),
        ("b", "/tmp/b", 0o644),
    )
    assert render_step(step, inv.nodes[1], _context(inv)).uploads == (("b", "/tmp/b", 0o644),)
    with pytest.raises(ValueError, match="'when' is not a valid expression"):
        Upload.model_validate({"source": "a", "dest": "/tmp/a", "when": "node.role =="})


def test_modern_mofed_uses_its_own_version() -> None:
    r = _rendered("modern-h100.yml", "mofed")
    assert "want=24.10-1.1.4.0" in r.check and "(MLNX_OFED_LINUX|OFED-internal)" in r.check
    assert "MLNX_OFED_LINUX-24.10-1.1.4.0-ubuntu22.04-x86_64.tgz" in r.apply


@pytest.mark.parametrize(("inventory", "index", "iface", "address"), [
    ("paper-c4140.yml", 0, "ib0", "192.168.11.1/24"),
    ("paper-c4140.yml", 1, "ib0", "192.168.11.2/24"),
    ("modern-h100.yml", 1, "ibp26s0", "10.21.0.2/16"),
])  # fmt: skip
def test_ipoib_sets_and_persists_the_inventory_address(
    inventory: str, index: int, iface: str, address: str
) -> None:
    r = _rendered(inventory, "ipoib", index)
    assert f"ip -o -4 addr show dev {iface} | grep -qwF {address}" in r.check
    assert f"/etc/netplan/60-clusterctl-{iface}.yaml" in r.apply
    assert f"/etc/network/interfaces.d/60-clusterctl-{iface}" in r.apply
    assert f"ip addr replace {address} dev {iface}" in r.apply


def test_gpudirect_is_checked_by_registration_and_set_up_per_driver_generation() -> None:
    paper, modern = (
        _rendered("paper-c4140.yml", "gpudirect-rdma"),
        _rendered("modern-h100.yml", "gpudirect-rdma"),
    )
    for r in (paper, modern):
        # registered with MOFED's ib_core, not merely loaded: /sys/module/nvidia_peermem is no proof
        assert "test -f /sys/kernel/mm/memory_peers/nv_mem/version" in r.check
        assert "memory_peers/nv_mem_nc/version" in r.check and "/sys/module" not in r.check
        assert "registered || {" in r.apply
    # CUDA 10.0 (driver before R470): nv_peer_mem built from Mellanox's pinned source, as its README says
    assert "nv_peer_memory/archive/refs/tags/1.1-0.tar.gz" in paper.apply
    assert "./build_module.sh" in paper.apply and "dpkg-buildpackage -us -uc" in paper.apply
    assert "modprobe nv_peer_mem" in paper.apply and "nvidia_peermem" not in paper.apply
    assert "grep -qsx nv_peer_mem /etc/modules-load.d/clusterctl-peermem.conf" in paper.check
    # CUDA 12: the driver's nvidia-peermem, its DKMS modules rebuilt against MOFED when it registers nothing
    assert 'dkms install -m nvidia -v "$ver" -k "$(uname -r)"' in modern.apply
    assert modern.apply.index("dkms install") < modern.apply.rindex("modprobe nvidia_peermem")
    assert "nv_peer_memory" not in modern.apply


def test_the_driver_is_checked_never_installed() -> None:
    r = _rendered("modern-h100.yml", "nvidia-driver")
    assert "nvidia-smi -L" in r.check and "-ge 8 ]" in r.check
    assert "apt-get" not in r.apply and r.apply.rstrip().endswith("exit 1")
    assert "never installs a driver" in r.apply


def test_the_toolkit_repository_is_added_with_nvidias_pinned_key() -> None:
    r = _rendered("modern-h100.yml", "nvidia-runtime")
    assert "apt-cache show nvidia-container-toolkit" in r.apply  # only where the package is missing
    assert "want=C95B321B61E88C1809C4F759DDCAE044F796ECB0" in r.apply
    assert r.apply.index('[ "$got" != "$want" ]') < r.apply.index("nvidia-container-toolkit.list")
    assert "signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg" in r.apply


@pytest.mark.parametrize(
    ("fixture", "ok"),
    [
        ("gpud-8xrtx4090-535.154.05-fabric-na-idle-gen1.txt", True),  # no NVSwitch: nothing to do
        ("gpud-8xh100-535.161.08-fabric-completed.txt", False),  # HGX: fabric manager wanted
        ("gptq-doc-h100-sxm-vm-fabric-in-progress-grep.txt", False),  # fabric not initialised
    ],
)
def test_fabric_manager_is_wanted_exactly_on_nvswitch_systems(fixture: str, ok: bool, tmp_path: Path) -> None:
    """The step's probe run by a real shell over real `nvidia-smi -q` outputs (no GPU here: a stand-in
    nvidia-smi prints them; dpkg-query finds no fabric manager on this machine)."""
    from tests.fixtures import FIXTURES

    r = _rendered("modern-h100.yml", "fabric-manager")
    fake = tmp_path / "nvidia-smi"
    fake.write_text(
        f'#!/bin/sh\ncase "$1" in -q) tail -n +3 {FIXTURES / "nvidia_smi_q" / fixture} ;; *) echo 535.161.08 ;; esac\n'
    )
    fake.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    done = subprocess.run(["sh", "-c", r.check], env=env, capture_output=True, text=True, timeout=30)
    assert (done.returncode == 0) is ok, done.stderr


def test_subnet_manager_check_names_the_inventory_hcas() -> None:
    r = _rendered("modern-h100.yml", "ib-subnet-manager")
    assert 'wanted=" "\'mlx5_0 mlx5_1 mlx5_4 mlx5_5 mlx5_6 mlx5_7 mlx5_8 mlx5_9\'" "' in r.check
    assert "grep -q ACTIVE" in r.check
    assert "no subnet manager" in r.apply and "opensm" in r.apply and r.apply.rstrip().endswith("exit 1")
    assert _rendered("sandbox-example.yml", "ib-subnet-manager").skip_reason


@pytest.mark.parametrize("inventory", ["paper-c4140.yml", "modern-h100.yml"])
def test_every_rendered_command_is_valid_shell(inventory: str, tmp_path: Path) -> None:
    inv = load_inventory(data_dir("inventories") / inventory)
    for step in load_playbook(PLAYBOOK).steps:
        r = render_step(step, inv.nodes[0], _context(inv))
        for phase in ("check", "apply", "verify"):
            script = tmp_path / f"{step.name}-{phase}.sh"
            script.write_text(getattr(r, phase))
            checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
            assert checked.returncode == 0, (step.name, phase, checked.stderr)


def test_nvidia_runtime_never_restarts_under_running_gpu_containers() -> None:
    r = _rendered("paper-c4140.yml", "nvidia-runtime")
    assert "nvidia-ctk runtime configure --runtime=docker" in r.apply
    before_restart = r.apply.split("systemctl restart docker")[0]
    assert "{{.HostConfig.DeviceRequests}}" in before_restart and "exit 1" in before_restart


@pytest.mark.parametrize(
    "step",
    [
        "mofed",
        "ipoib",
        "gpudirect-rdma",
        "nvidia-runtime",
        "docker-memlock",
        "kernel-headers",
        "nvidia-driver",
        "fabric-manager",
        "ib-subnet-manager",
    ],
)
def test_hardware_steps_are_skipped_on_the_sandbox_with_a_reason(step: str) -> None:
    r = _rendered("sandbox-example.yml", step)
    assert r.skip_reason and len(r.skip_reason) > 10


def test_cluster_ssh_trusts_every_node_by_name_and_fabric_address() -> None:
    r = _rendered("paper-c4140.yml", "cluster-ssh")
    assert "c4140-2,192.168.11.2,10.10.0.12 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAc4140-2" in r.apply
    assert r.uploads == (("cluster_key", "/root/.ssh/clusterctl-paper-c4140", 0o600),)
    assert "BEGIN OPENSSH PRIVATE KEY" not in r.apply  # the key travels over SFTP, never on a command line
    hosts = _rendered("paper-c4140.yml", "hostnames")
    assert "'192.168.11.1 c4140-1' '192.168.11.2 c4140-2'" in hosts.apply


def test_hostile_values_stay_inert_in_a_real_shell(tmp_path: Path) -> None:
    """Even a node the validator never saw (built with model_construct) cannot inject shell."""
    inv = load_inventory(data_dir("inventories") / "paper-c4140.yml")
    marker = tmp_path / "pwned"
    node = inv.nodes[0]
    hostile_fabric = node.fabric.model_copy(update={"interface": f"ib0; touch {marker}"})
    hostile = node.model_copy(update={"fabric": hostile_fabric, "name": f"a;touch {marker}"})
    step = Step(
        name="probe", description="d", check="echo {{ node.fabric.interface }} {{ node.name }}", apply="true"
    )
    r = render_step(step, hostile, _context(inv))
    out = subprocess.run(["bash", "-c", r.check], capture_output=True, text=True, check=True).stdout
    assert not marker.exists()
    assert out.strip() == f"ib0; touch {marker} a;touch {marker}"
    assert shlex.split(r.check)[1] == f"ib0; touch {marker}"


def test_hostile_inventory_values_are_refused_before_any_rendering(tmp_path: Path) -> None:
    text = (
        (data_dir("inventories") / "paper-c4140.yml")
        .read_text()
        .replace("name: c4140-2", 'name: "a;rm -rf /"')
    )
    path = tmp_path / "hostile.yml"
    path.write_text(text)
    with pytest.raises(InputError, match=r"nodes\[1\]\.name"):
        load_inventory(path)


def test_nodes_in_limit_and_select_steps_refuse_unknown_names() -> None:
    inv = load_inventory(data_dir("inventories") / "paper-c4140.yml")
    assert [n.name for n in nodes_in_limit(inv, "c4140-2")] == ["c4140-2"]
    with pytest.raises(InputError, match=r"--limit 'c4140-9': no node named c4140-9 .*c4140-1, c4140-2"):
        nodes_in_limit(inv, "c4140-9")
    with pytest.raises(InputError, match="--limit ',': names no node"):
        nodes_in_limit(inv, ",")
    with pytest.raises(InputError, match="no such step"):
        select_steps(load_playbook(PLAYBOOK), ["reboot"])


def test_playbook_errors_name_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yml"
    path.write_text("name: x\nsteps:\n  - name: a\n    description: d\n    check: 'true'\n    aply: 'true'\n")
    with pytest.raises(InputError, match=r"bad.yml, line 6, field steps\[0\].aply"):
        load_playbook(path)
    path.write_text(
        "name: x\nsteps:\n  - {name: a, description: d, check: 'true', apply: 'true', depends_on: [b]}\n"
    )
    with pytest.raises(InputError, match="not an earlier step"):
        load_playbook(path)


def test_cluster_key_is_generated_not_borrowed(tmp_path: Path) -> None:
    from clusterctl.provision.plan import step_files

    inv = load_inventory(data_dir("inventories") / "paper-c4140.yml")
    key = step_files(inv)["cluster_key"]
    assert isinstance(key, bytes)
    admin = ensure_keypair(tmp_path / "admin" / "id_ed25519", "admin")
    assert b"OPENSSH PRIVATE KEY" in key
    assert admin.split()[1].encode() not in key
    state_key = Path(tmp_path / "state" / "clusters" / "paper-c4140" / "ssh" / "id_ed25519")
    assert state_key.stat().st_mode & 0o777 == 0o600


def test_playbook_model_rejects_unknown_keys() -> None:
    with pytest.raises(ValueError):
        Playbook.model_validate(
            {
                "name": "x",
                "steps": [{"name": "a", "description": "d", "check": "t", "apply": "t", "sudo": True}],
            }
        )


def test_provision_plan_prints_every_step_per_node_without_connecting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:

    from clusterctl.cli import main
    from clusterctl.provision import executor

    def no_connection(*args: object, **kwargs: object) -> None:
        raise AssertionError("provision --plan connected to a node")

    monkeypatch.setattr(executor, "connect", no_connection)
    plans = {}
    for name in ("paper-c4140", "modern-h100"):
        path = data_dir("inventories") / f"{name}.yml"
        assert main(["provision", "--plan", "-i", str(path), "--json"]) == 0
        plans[name] = strict_loads(capsys.readouterr().out)["plan"]
    for name, plan in plans.items():
        assert len(plan) == 2  # both nodes
        steps = {s["step"]: s for s in plan[0]["steps"]}
        assert set(steps) >= {"nvidia-driver", "fabric-manager", "nvidia-runtime", "mofed", "gpudirect-rdma"}
        assert "memory_peers/nv_mem/version" in steps["gpudirect-rdma"]["check"], name
        assert "C95B321B61E88C1809C4F759DDCAE044F796ECB0" in steps["nvidia-runtime"]["apply"], name
        assert (
            "nvidia-smi -L" in steps["nvidia-driver"]["check"]
            and "Fabric" in steps["fabric-manager"]["check"]
        )
    paper = {s["step"]: s for s in plans["paper-c4140"][0]["steps"]}
    modern = {s["step"]: s for s in plans["modern-h100"][0]["steps"]}
    assert "dpkg-buildpackage" in paper["gpudirect-rdma"]["apply"]  # nv_peer_mem built from source
    assert "dkms install -m nvidia" in modern["gpudirect-rdma"]["apply"]  # rebuilt after MOFED
    order = [s["step"] for s in plans["modern-h100"][0]["steps"]]
    assert order.index("mofed") < order.index("gpudirect-rdma")
    # the human form: per node, the steps' commands, offline
    assert main(["provision", "--plan", "-i", str(data_dir("inventories") / "modern-h100.yml")]) == 0
    text = capsys.readouterr().out
    assert text.startswith("provision plan (offline: no node was contacted")
    assert "hgx-02" in text and "dkms install -m nvidia" in text
