#!/bin/sh
# web-vendor.sh fetches the console's one third-party library, uPlot, from the
# npm registry at a pinned version and copies its browser build into
# internal/platform/web/assets/vendor/. The result is committed, so `go build` works
# on a fresh clone without npm; run this (make web) only to change versions.
set -eu

UPLOT_VERSION=1.6.32

root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/internal/platform/web/assets/vendor"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cd "$tmp"
npm pack --silent "uplot@$UPLOT_VERSION" >/dev/null
tar -xzf "uplot-$UPLOT_VERSION.tgz"

mkdir -p "$dest"
cp package/dist/uPlot.iife.min.js "$dest/uPlot.iife.min.js"
cp package/dist/uPlot.min.css "$dest/uPlot.min.css"
cp package/LICENSE "$dest/uPlot.LICENSE"
printf 'uPlot %s from the npm registry (npm pack uplot@%s); MIT, see uPlot.LICENSE.\n' \
	"$UPLOT_VERSION" "$UPLOT_VERSION" >"$dest/README"
echo "vendored uPlot $UPLOT_VERSION into $dest"
