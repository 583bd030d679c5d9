#!/usr/bin/env bash
# Installs what building and testing tessera needs on a fresh Debian machine: the one
# list of system packages. The README's two commands call it, and so does `.ci/run`.
#
#   bash scripts/setup.sh          what the main job needs: building the workspace
#   bash scripts/setup.sh --tests  that, and what the test suite runs against
#
# It installs only what is missing (a second run does nothing), with apt-get when it is
# root and with sudo otherwise; without either it says which packages to install and
# stops.
#
# Why each package:
# - gcc, libgomp1: the CPU backend compiles the C it generates with the system C
#   compiler and OpenMP, at run time.
# Nothing else is needed to build: no dependency has a C or C++ build step (the cost
# models' gradient-boosted trees are Rust, crates/costmodel/src/gbdt).
# - (--tests) pocl-opencl-icd, ocl-icd-opencl-dev: PoCL, the CPU's OpenCL device, and
#   the ICD loader, so that the OpenCL tests run for real without a GPU.
# - (--tests) python3 with pip, tests/onnx/requirements.txt (onnx, onnxruntime, numpy):
#   the ONNX tests compare with onnxruntime on models a Python script builds.
# - (--tests) the nvidia-cuda-nvrtc-cu12 and nvidia-cuda-nvcc-cu12 wheels: NVRTC and
#   ptxas, which compile and assemble the CUDA backend's kernels without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."

tests=false
for arg in "$@"; do
  case "$arg" in
    --tests) tests=true ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument '$arg' (known: --tests)" >&2; exit 2 ;;
  esac
done

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup.sh: cargo is not installed: install the Rust toolchain (https://rustup.rs), rustc >= 1.85" >&2
  exit 1
fi

packages=(gcc libgomp1)
if $tests; then
  packages+=(pocl-opencl-icd ocl-icd-opencl-dev python3 python3-pip)
fi

missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
# A python3 that is not Debian's (pyenv, a venv) serves as well as Debian's.
if command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then
  filtered=()
  for pkg in "${missing[@]}"; do
    case "$pkg" in python3|python3-pip) ;; *) filtered+=("$pkg") ;; esac
  done
  missing=("${filtered[@]}")
fi

if [ "${#missing[@]}" -gt 0 ]; then
  if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    echo "setup.sh: this is not a Debian-like system: install the equivalents of: ${missing[*]}" >&2
    exit 1
  fi
  if [ "$(id -u)" -eq 0 ]; then
    sudo=()
  elif command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "setup.sh: missing packages: ${missing[*]}; run as root or install them: apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "setup.sh: installing ${missing[*]}" >&2
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if $tests; then
  pip_install() {
    python3 -m pip install --quiet --disable-pip-version-check "$@" 2>/dev/null \
      || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages "$@"
  }
  if ! python3 -c "import onnx, onnxruntime, numpy" >/dev/null 2>&1; then
    pip_install -r tests/onnx/requirements.txt
  fi
  if ! python3 -c "import nvidia.cuda_nvrtc, nvidia.cuda_nvcc" >/dev/null 2>&1; then
    pip_install nvidia-cuda-nvrtc-cu12 nvidia-cuda-nvcc-cu12
  fi
fi
