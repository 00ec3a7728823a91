#!/usr/bin/env bash
# gpu-env.sh — source on the GPU machine (no package registry there): unpacks the Debian
# packages carried in .deps/ (see DEVICE notes in docs/development.md) and points CMake at them.
#   mkdir -p .deps && (cd .deps && apt-get download liblua5.4-dev liblua5.4-0 libsqlite3-dev \
#       libsqlite3-0 libcjson-dev libcjson1)      # once, on a development machine
mkdir -p /tmp/deps
for f in .deps/*.deb; do dpkg -x "$f" /tmp/deps; done
export CMAKE_PREFIX_PATH=/tmp/deps/usr
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
