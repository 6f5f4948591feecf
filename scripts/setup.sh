#!/usr/bin/env bash
# Installs every Debian package mmlab needs to build, test and benchmark.
set -euo pipefail
pkgs=(build-essential g++ clang clang-14 libclang-rt-14-dev cmake ninja-build git
      libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev libfmt-dev nlohmann-json3-dev
      gnuplot-nox python3 liburing-dev pkgconf parallel
      xfsprogs btrfs-progs)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
