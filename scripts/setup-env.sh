#!/usr/bin/env bash
# Prepare a Debian/Ubuntu machine for clusterctl's local sandbox and its tests.
#
# Idempotent: every step probes first and changes only what is missing.
#   1. a running Docker engine (installs docker.io when absent; starts dockerd when not running)
#   2. the default base image (CLUSTERCTL_BASE_IMAGE): pulled where a registry answers, otherwise
#      built with debootstrap from this machine's configured Debian mirror and `docker import`ed
#      under the same name
#   3. the host programs the tests run: mpirun (openmpi-bin; the payload tests launch real ranks here,
#      and the Horovod wheel links its MPI library), ssh (openssh-client; the sandbox tests log in),
#      the linter shellcheck, and chromium (headless: the HTML report's test opens the page in it)
#   4. the wheelhouse the `cpu` image and scripts/dev-env.sh install from (CLUSTERCTL_WHEELHOUSE):
#      the PyTorch CPU wheel, its and Horovod's dependencies at the versions
#      requirements/wheelhouse.txt locks, and a Horovod wheel built here against that PyTorch (C++17)
#   5. NVIDIA DALI at the versions requirements/dali.txt locks (hash-checked), in a directory of its own
#      (CLUSTERCTL_DALI_DIR), not in .venv: tests/test_dali_cpu.py runs the payload's DALI pipeline on
#      DALI's CPU backend with it. About 450 MB downloaded and 1 GB on disk, once per machine: the
#      directory is kept while the lock file's hash matches the one it was installed from.
#
# Settings (environment): CLUSTERCTL_BASE_IMAGE (default debian:bookworm-slim),
# CLUSTERCTL_WHEELHOUSE (default ~/.cache/clusterctl/wheelhouse), CLUSTERCTL_TORCH_VERSION (2.13.0),
# CLUSTERCTL_HOROVOD_VERSION (0.28.1), CLUSTERCTL_TORCH_INDEX (PyTorch's CPU wheel index),
# CLUSTERCTL_SKIP_WHEELHOUSE=1 to skip step 4, CLUSTERCTL_DALI_DIR (default ~/.cache/clusterctl/dali-cpu),
# CLUSTERCTL_SKIP_DALI=1 to skip step 5.
set -euo pipefail

BASE_IMAGE="${CLUSTERCTL_BASE_IMAGE:-debian:bookworm-slim}"
WHEELHOUSE="${CLUSTERCTL_WHEELHOUSE:-$HOME/.cache/clusterctl/wheelhouse}"
TORCH_VERSION="${CLUSTERCTL_TORCH_VERSION:-2.13.0}"
HOROVOD_VERSION="${CLUSTERCTL_HOROVOD_VERSION:-0.28.1}"
TORCH_INDEX="${CLUSTERCTL_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
PYTHON="${PYTHON:-python3}"
WHEELHOUSE_LOCK="$(cd "$(dirname "$0")/.." && pwd)/requirements/wheelhouse.txt"
DALI_DIR="${CLUSTERCTL_DALI_DIR:-$HOME/.cache/clusterctl/dali-cpu}"
DALI_LOCK="$(cd "$(dirname "$0")/.." && pwd)/requirements/dali.txt"

log() { printf '[setup-env] %s\n' "$*" >&2; }
die() { printf '[setup-env] error: %s\n' "$*" >&2; exit 2; }

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

apt_install() {
  local missing=()
  for pkg in "$@"; do dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || die "apt-get not found: install ${missing[*]} with your package manager"
  log "installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

engine_answers() { timeout 10 docker info >/dev/null 2>&1; }

ensure_docker() {
  if engine_answers; then log "docker engine: running"; return; fi
  command -v dockerd >/dev/null || apt_install docker.io
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
    as_root systemctl start docker || true
  fi
  if ! engine_answers; then
    log "starting dockerd in the background (log: /var/log/clusterctl-dockerd.log)"
    as_root sh -c 'nohup dockerd >/var/log/clusterctl-dockerd.log 2>&1 &'
  fi
  for _ in $(seq 1 60); do engine_answers && { log "docker engine: running"; return; }; sleep 1; done
  die "the Docker engine did not answer within 60 s; see /var/log/clusterctl-dockerd.log"
}

debian_mirror() {
  # The first Debian mirror named in this machine's apt sources (deb822 or one-line format).
  local m
  m=$(grep -hsE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
      | grep -v -- '-security' | grep -oE 'https?://[^ ]+/debian/?' | head -n1 || true)
  echo "${m:-http://deb.debian.org/debian}"
}

ensure_base_image() {
  if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then log "base image $BASE_IMAGE: present"; return; fi
  if timeout 120 docker pull "$BASE_IMAGE" >/dev/null 2>&1; then log "base image $BASE_IMAGE: pulled"; return; fi
  local suite="${BASE_IMAGE#*:}"; suite="${suite%%-*}"
  case "$suite" in bookworm|bullseye|trixie) ;; *) die "no registry answered for $BASE_IMAGE and debootstrap can only build Debian suites (bookworm, bullseye, trixie)";; esac
  apt_install debootstrap
  local mirror rootfs
  mirror=$(debian_mirror)
  rootfs=$(mktemp -d /tmp/clusterctl-rootfs.XXXXXX)
  log "no registry answered: building $BASE_IMAGE with debootstrap ($suite from $mirror; a few minutes)"
  as_root debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >/tmp/clusterctl-debootstrap.log 2>&1 \
    || die "debootstrap failed; see /tmp/clusterctl-debootstrap.log"
  as_root rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  as_root tar -C "$rootfs" -c . | docker import -c 'CMD ["bash"]' - "$BASE_IMAGE" >/dev/null
  as_root rm -rf "$rootfs"
  log "base image $BASE_IMAGE: imported"
}

ensure_wheelhouse() {
  mkdir -p "$WHEELHOUSE"
  if ! ls "$WHEELHOUSE"/torch-"$TORCH_VERSION"*.whl >/dev/null 2>&1; then
    # PyPI's Linux torch is the CUDA build (gigabytes of nvidia-* wheels). The +cpu build comes from
    # pip's find-links when a local copy exists (no network asked), else from PyPI + PyTorch's CPU index.
    log "wheelhouse: fetching torch==$TORCH_VERSION+cpu"
    "$PYTHON" -m pip download -q --no-deps --no-index --only-binary=:all: -d "$WHEELHOUSE" "torch==$TORCH_VERSION+cpu" 2>/dev/null \
      || "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --extra-index-url "$TORCH_INDEX" -d "$WHEELHOUSE" \
           "torch==$TORCH_VERSION+cpu"
  fi
  # torch's and Horovod's dependencies, and what the payload imports besides torch (numpy, pillow), at the
  # versions requirements/wheelhouse.txt locks (torch and Horovod themselves come from no index).
  "$PYTHON" -m pip download -q --no-deps --only-binary=:all: -d "$WHEELHOUSE" \
    -r <(grep -vE '^(torch|horovod)==' "$WHEELHOUSE_LOCK")
  if ls "$WHEELHOUSE"/horovod-"$HOROVOD_VERSION"-*.whl >/dev/null 2>&1; then
    log "wheelhouse: horovod $HOROVOD_VERSION present"
  else
    build_horovod
  fi
  log "wheelhouse: $WHEELHOUSE"
}

build_horovod() {
  # Horovod 0.28.1 (its last release) sets C++14; PyTorch 2.x headers need C++17.
  # Built in a venv of its own: a distro Python refuses system-wide pip installs (PEP 668).
  apt_install cmake g++ make libopenmpi-dev openmpi-bin
  local venv="$HOME/.cache/clusterctl/horovod-build-venv" src
  [ -x "$venv/bin/python" ] || "$PYTHON" -m venv "$venv" 2>/dev/null || { apt_install python3-venv; "$PYTHON" -m venv "$venv"; }
  "$venv/bin/python" -m pip install -q --no-index --find-links "$WHEELHOUSE" "torch==$TORCH_VERSION+cpu"
  "$venv/bin/python" -m pip install -q setuptools wheel packaging cloudpickle psutil pyyaml cffi
  src=$(mktemp -d /tmp/clusterctl-horovod.XXXXXX)
  "$PYTHON" -m pip download -q --no-deps --no-binary=:all: -d "$src" "horovod==$HOROVOD_VERSION"
  tar -C "$src" -xzf "$src"/horovod-"$HOROVOD_VERSION".tar.gz
  grep -rl --include=CMakeLists.txt -e 'CMAKE_CXX_STANDARD 14' -e 'std=c++14' "$src/horovod-$HOROVOD_VERSION" \
    | xargs sed -i -e 's/CMAKE_CXX_STANDARD 14/CMAKE_CXX_STANDARD 17/' -e 's/std=c++14/std=c++17/g'
  log "wheelhouse: building horovod $HOROVOD_VERSION against torch (about 6 minutes on 2 cores; log /tmp/clusterctl-horovod-build.log)"
  (cd "$src/horovod-$HOROVOD_VERSION" && \
    HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 \
    HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 HOROVOD_GPU_OPERATIONS='' MAKEFLAGS="-j$(nproc)" \
    "$venv/bin/python" -m pip wheel --no-build-isolation --no-deps -w "$WHEELHOUSE" . >/tmp/clusterctl-horovod-build.log 2>&1) \
    || die "horovod build failed; see /tmp/clusterctl-horovod-build.log"
  rm -rf "$src"
}

# The image registry `image push --transport registry` starts for the length of one push (CNCF
# Distribution 2.8). The package also installs a system service on :5000 without TLS: it stays off.
ensure_registry() {
  apt_install docker-registry
  if [ -d /run/systemd/system ] && systemctl is-enabled docker-registry >/dev/null 2>&1; then
    as_root systemctl disable --now docker-registry >/dev/null 2>&1 || true
  fi
}

# DALI beside .venv: installed into a fresh directory, which replaces the old one only once complete
# (an interrupted install leaves the old one, or none, never half of one); the stamp names the lock.
ensure_dali() {
  local want have
  want="$(sha256sum "$DALI_LOCK" | cut -d' ' -f1)"
  have="$(cat "$DALI_DIR/.clusterctl-lock-sha256" 2>/dev/null || true)"
  if [ "$want" = "$have" ]; then log "dali: $DALI_DIR"; return; fi
  log "dali: installing requirements/dali.txt into $DALI_DIR"
  rm -rf "$DALI_DIR.new"
  "$PYTHON" -m pip install -q --root-user-action=ignore --no-compile --no-deps --require-hashes --only-binary=:all: \
    --target "$DALI_DIR.new" -r "$DALI_LOCK" || die "the DALI install failed (requirements/dali.txt)"
  echo "$want" >"$DALI_DIR.new/.clusterctl-lock-sha256"
  rm -rf "$DALI_DIR"
  mv "$DALI_DIR.new" "$DALI_DIR"
  log "dali: $DALI_DIR"
}

ensure_docker
ensure_base_image
apt_install openmpi-bin openssh-client
# The linter shellcheck: tests lint the Slurm batch scripts clusterctl renders (tests/test_slurm_script.py).
apt_install shellcheck
# chromium: tests open `clusterctl report --html`'s page in a real headless browser (tests/test_report_html.py).
apt_install chromium
ensure_registry
[ "${CLUSTERCTL_SKIP_WHEELHOUSE:-0}" = 1 ] || ensure_wheelhouse
[ "${CLUSTERCTL_SKIP_DALI:-0}" = 1 ] || ensure_dali
log "ready"
