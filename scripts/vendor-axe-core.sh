#!/usr/bin/env bash
# Vendor axe-core (the accessibility checker the browser tests run) from the npm registry
# into static/vendor/axe-core/: the pages and the tests load no script from a CDN.
# Usage: scripts/vendor-axe-core.sh [version]; then update AXE_CORE_SHA256 in
# tests/e2e/test_accessibility.py with the sha256 it prints.
set -euo pipefail
version="${1:-4.14.1}"
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "axe-core@$version" >/dev/null && tar xzf "axe-core-$version.tgz")
mkdir -p "$root/static/vendor/axe-core"
cp "$work/package/axe.min.js" "$work/package/LICENSE" "$root/static/vendor/axe-core/"
echo "$version" > "$root/static/vendor/axe-core/VERSION"
sha256sum "$root/static/vendor/axe-core/axe.min.js"
