#!/usr/bin/env bash
# Debian packages the lab needs: EGL/Mesa for offscreen rendering, Chromium for the browser tests.
# Installs only what is missing; needs root (or sudo). Safe to run again.
set -euo pipefail
pkgs=(libegl1 libgles2 libgl1 libgl1-mesa-dri libglx-mesa0 libosmesa6 chromium fonts-dejavu-core)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing Debian packages: ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null; then SUDO=sudo; else
    echo "error: need root to install ${missing[*]} (run: apt-get install -y ${missing[*]})" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
