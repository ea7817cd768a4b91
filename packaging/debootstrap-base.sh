#!/usr/bin/env bash
# Makes a Debian base image from this machine's own apt configuration and
# imports it into Docker, for building packaging/Dockerfile where no base
# image can be pulled:
#
#   packaging/debootstrap-base.sh [IMAGE]     # default nekro-base:local
#   docker build --network host --build-arg BASE=nekro-base:local -f packaging/Dockerfile .
#
# The mirror and suite are read from /etc/apt at run time (deb822 .sources
# files or sources.list), so nothing here names a mirror. Needs root,
# debootstrap, and a docker CLI reaching an engine (DOCKER_HOST).
set -euo pipefail
image="${1:-nekro-base:local}"

# The first "deb" source of the main archive: its URI and first suite.
uri="" suite=""
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  uri=$(awk '$1 == "URIs:" {print $2; exit}' "$f")
  suite=$(awk '$1 == "Suites:" {print $2; exit}' "$f")
  [ -n "$uri" ] && [ -n "$suite" ] && break
done
if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
  read -r uri suite < <(awk '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } print $i, $(i+1); exit }' /etc/apt/sources.list)
fi
[ -n "$uri" ] && [ -n "$suite" ] || { echo "debootstrap-base: no deb source found in /etc/apt" >&2; exit 1; }
# The security and updates suites are not a base: strip a -security or -updates suffix.
suite="${suite%-security}"; suite="${suite%-updates}"

command -v debootstrap >/dev/null || { echo "debootstrap-base: install debootstrap (apt-get install debootstrap)" >&2; exit 1; }
root=$(mktemp -d /tmp/nekro-rootfs-XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "debootstrap-base: $suite from $uri into $root" >&2
debootstrap --variant=minbase "$suite" "$root" "$uri" >&2
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import - "$image" >/dev/null
echo "debootstrap-base: imported $image" >&2
