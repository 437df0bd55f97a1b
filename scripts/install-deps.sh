#!/usr/bin/env bash
# Installs the system packages the tests and the examples need on Debian or
# Ubuntu: lavapipe (Vulkan on the CPU), EGL + llvmpipe (wgpu's GL backend),
# the X11, Wayland and xkbcommon libraries a window needs at run time, and
# weston (Wayland's reference compositor, which the Wayland window test runs
# headless). Nothing here is needed at build time.
set -euo pipefail
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq \
    mesa-vulkan-drivers libegl-mesa0 libgl1-mesa-dri \
    libx11-6 libxcursor1 libxi6 libxrandr2 libxkbcommon-x11-0 \
    libwayland-client0 libwayland-cursor0 libxkbcommon0 weston >/dev/null
echo "installed: lavapipe, EGL/llvmpipe, X11 and Wayland runtime libraries, weston"
