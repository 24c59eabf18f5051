#!/usr/bin/env bash
# Installs everything kiln needs to build and test on Debian 12. Idempotent; silent when all is
# present. Usage: scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

DEBIAN_PACKAGES=(
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev
  libfmt-dev nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
  libprotobuf-dev protobuf-compiler libonnx-dev libflatbuffers-dev flatbuffers-compiler
  libopenblas-dev libxnnpack-dev libpthreadpool-dev libcpuinfo-dev libdnnl-dev zlib1g-dev
  python3-onnx python3-numpy python3-torch python3-torchvision python3-pil time
  libgraphviz-dev chromium pybind11-dev python3-pytest python3-tqdm libonnx-testdata
)

missing=()
for pkg in "${DEBIAN_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
# Node.js may come from Debian (nodejs + npm) or a vendor package that bundles npm.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi
if ((${#missing[@]})); then
  echo "setup: installing ${#missing[@]} Debian packages: ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# npm packages pinned in package-lock.json (onnxruntime-node's install script would try to
# download a CUDA provider: skip it, the CPU provider ships in the package).
if [[ -f package-lock.json ]]; then
  stamp=node_modules/.kiln-lock-stamp
  if [[ ! -f $stamp ]] || ! cmp -s package-lock.json "$stamp"; then
    echo "setup: installing npm packages from package-lock.json"
    ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund --loglevel=error >/dev/null
    cp package-lock.json "$stamp"
  fi
fi
