#!/usr/bin/env bash
# Makes the image's base without a registry: Debian 12 (bookworm, glibc 2.36, the Dockerfile's
# debian:bookworm-slim) from Debian's packages with debootstrap, trimmed of apt's caches and
# lists, documentation and locales, packed once into a tarball cached outside the checkout;
# prints the tarball's path on its last line. A rerun finds it there (delete it to rebuild).
# About 30 s here the first time; needs root (debootstrap) and Debian's mirror.
set -euo pipefail

SUITE="${XSCHED_BASE_SUITE:-bookworm}"
MIRROR="${XSCHED_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CACHE="${XSCHED_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/xsched}"
TARBALL="$CACHE/debian-$SUITE-minbase.tar.gz"

if [ -s "$TARBALL" ] && gzip -t "$TARBALL" 2>/dev/null; then
  echo "$TARBALL"
  exit 0
fi
command -v debootstrap >/dev/null 2>&1 || { echo "needs debootstrap (apt-get install debootstrap)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "debootstrap needs root" >&2; exit 1; }

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
debootstrap --variant=minbase "$SUITE" "$WORK/root" "$MIRROR" >"$WORK/log" 2>&1 \
  || { tail -20 "$WORK/log" >&2; exit 1; }
rm -rf "$WORK/root"/var/cache/apt/* "$WORK/root"/var/lib/apt/lists/* \
  "$WORK/root"/usr/share/doc/* "$WORK/root"/usr/share/man/* "$WORK/root"/usr/share/info/* \
  "$WORK/root"/usr/share/locale/* "$WORK/root"/var/log/*
mkdir -p "$CACHE"
tar --numeric-owner -C "$WORK/root" -c . | gzip -1 >"$TARBALL.tmp"
mv "$TARBALL.tmp" "$TARBALL"
echo "$TARBALL"
