#!/usr/bin/env bash
# Make sure the programs the project runs are installed: with apt when root, otherwise one
# line naming what to install. Arguments are program names; kubectl is checked, not
# installed (Debian does not package it), and its tests say why they are skipped.
set -euo pipefail

declare -A package_of=([redis-server]=redis-server [prometheus]=prometheus [chromium]=chromium [wrk]=wrk)
missing=()
for program in "$@"; do
  if [[ $program == postgresql ]]; then
    # The server's programs are not on PATH: Debian keeps them per major version.
    compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null && continue
    missing+=(postgresql)
    continue
  fi
  command -v "$program" >/dev/null 2>&1 && continue
  if [[ -n "${package_of[$program]:-}" ]]; then
    missing+=("${package_of[$program]}")
  else
    echo "note: $program is not installed; the tests that need it are skipped with that reason" >&2
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -ne 0 ]]; then
  echo "missing system packages: run 'sudo apt-get install -y ${missing[*]}' and try again" >&2
  exit 1
fi
echo "installing ${missing[*]} with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}" >/dev/null
