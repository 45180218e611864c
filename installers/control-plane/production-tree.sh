#!/usr/bin/env bash
# Turns a built checkout (after `npm ci`, whose `prepare` runs the build) into the production tree, in place:
# the dev and optional dependencies (test tools, the local chain binary, esbuild's binary) are pruned, and the
# native addons compiled here keep only their .node files (not the compiler's intermediate objects). The
# image's build stage runs this; its runtime stage then copies the package manifests, node_modules and
# control-plane/dist. test/production-tree.test.ts runs it on a copy of a checkout and boots the result.
#
#   installers/control-plane/production-tree.sh [checkout] [npm prune options, e.g. --offline]
set -euo pipefail
cd "${1:-.}"
shift || true
[[ -f control-plane/dist/main.js ]] || { echo "production-tree.sh: control-plane/dist is missing: run npm run build first" >&2; exit 1; }
npm prune --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund "$@"
shopt -s nullglob
for gyp in node_modules/*/binding.gyp node_modules/@*/*/binding.gyp; do
  build=$(dirname "$gyp")/build
  [[ -d $build/Release ]] || continue
  find "$build" -mindepth 1 -maxdepth 1 ! -name Release -exec rm -rf {} +
  find "$build/Release" -mindepth 1 -maxdepth 1 ! -name '*.node' -exec rm -rf {} +
done
# What the pruning leaves behind: empty scope folders, and tool caches of a checkout that ran its tests.
rm -rf node_modules/.cache node_modules/.vite node_modules/.vite-temp
find node_modules -mindepth 1 -maxdepth 2 -type d -empty -delete
