#!/usr/bin/env bash
# Installs the Debian 12 packages Octo builds with. Used by deploy/quickstart.sh
# and .ci/run; run as root or with sudo available.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libboost-dev libboost-context-dev liburing-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev libssl-dev openssl time curl
)
# The HTTP API's end-to-end test drives octod with the openai npm client:
# Node.js and npm, from Debian unless a node is already installed.
if ! command -v node >/dev/null 2>&1; then packages+=(nodejs npm); fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
else
  echo "install-deps: all packages present"
fi
