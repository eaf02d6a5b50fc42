#!/usr/bin/env bash
# Creates, or reuses, the virtual environment with torch 2.x from PyPI that
# rocksdcp's torch 2.x tests and benchmarks run in.
#
#   scripts/torch2-venv.sh            # creates it, or checks it is up to date
#   scripts/torch2-venv.sh --python   # prints its python if it is up to date,
#                                     # else exits 1 (CMake asks this way)
#
# Where: $ROCKSDCP_TORCH2_VENV, else ~/.cache/rocksdcp/torch2-venv
# ($XDG_CACHE_HOME when set): outside the clone, so that every clone and
# build of the machine shares one. PyPI's torch for x86-64 is a CUDA build
# of several GB (it runs on the CPU): it is downloaded once per machine,
# not once per build. What it installs is scripts/torch2-requirements.txt,
# every package pinned; the environment is made anew only when that file
# changes (a copy of it in the environment says what it holds).
#
# It is built on Debian's python3 (python3-venv, scripts/install-deps.sh),
# the interpreter the build's Python package is compiled for, so that the
# same extension module loads under torch 1.13 (Debian's) and torch 2.x.
# Nothing goes into the system Python.
#
# ROCKSDCP_NO_TORCH2=1 skips it: the build then runs no torch 2.x tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

venv="${ROCKSDCP_TORCH2_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/rocksdcp/torch2-venv}"
requirements=scripts/torch2-requirements.txt
stamp="$venv/rocksdcp-requirements.txt"
ready() { [ -x "$venv/bin/python" ] && cmp -s "$requirements" "$stamp"; }

if [ "${1:-}" = --python ]; then
  if [ "${ROCKSDCP_NO_TORCH2:-0}" != 1 ] && ready; then
    echo "$venv/bin/python"
    exit 0
  fi
  exit 1
fi
if [ "${ROCKSDCP_NO_TORCH2:-0}" = 1 ]; then
  echo "torch2-venv: ROCKSDCP_NO_TORCH2=1; no torch 2.x environment" >&2
  exit 0
fi
if ready; then
  echo "torch2-venv: $venv is up to date"
  exit 0
fi

start=$SECONDS
echo "torch2-venv: creating $venv from $requirements (torch 2.x: several GB the first time)"
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
/usr/bin/python3 -m venv "$venv"
# Quiet: pip's progress bars would fill a CI log.
"$venv/bin/python" -m pip install --quiet --no-input --disable-pip-version-check \
  --requirement "$requirements"
cp "$requirements" "$stamp"
echo "torch2-venv: $venv ready in $((SECONDS - start)) s"
