#!/usr/bin/env bash
# Builds the sandbox image from Debian packages, with no image registry:
#   default:  svc-sandbox:latest  debootstrap --variant=minbase bookworm + python3 + nodejs (Debian's),
#                                 user `sandbox` (uid 1000), /workspace owned by it, then `docker import`.
#   --small:  svc-sandbox:small   busybox-static only (sh and the busybox applets), built in seconds; for tests.
# Idempotent: an existing image is kept unless --force. Prints the image id and size.
#
# Usage: build.sh [--small] [--force] [--tag NAME:TAG] [--mirror URL] [--suite SUITE]
# Needs root, docker, and (default mode) debootstrap; (--small) apt-get and dpkg.
# The Debian mirror defaults to the one apt already uses here (/etc/apt/sources.list*), else deb.debian.org.
set -euo pipefail

small=0
force=0
tag=''
mirror="${SVC_DEBIAN_MIRROR:-}"
suite='bookworm'

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "build.sh: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --small) small=1 ;;
    --force) force=1 ;;
    --tag) [ $# -ge 2 ] || die '--tag needs a value'; tag="$2"; shift ;;
    --mirror) [ $# -ge 2 ] || die '--mirror needs a value'; mirror="$2"; shift ;;
    --suite) [ $# -ge 2 ] || die '--suite needs a value'; suite="$2"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
  shift
done

if [ -z "$tag" ]; then
  if [ "$small" = 1 ]; then tag='svc-sandbox:small'; else tag='svc-sandbox:latest'; fi
fi

[ "$(id -u)" = 0 ] || die 'run as root (debootstrap/dpkg -x must create root-owned files)'
command -v docker >/dev/null || die 'docker is not installed'
docker info >/dev/null 2>&1 || die 'the Docker engine is not reachable'

report() {
  local id size
  id="$(docker image inspect -f '{{.Id}}' "$tag")"
  size="$(docker image inspect -f '{{.Size}}' "$tag")"
  echo "image: $tag"
  echo "id: $id"
  echo "size_bytes: $size"
}

if [ "$force" = 0 ] && docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag already exists (use --force to rebuild)"
  report
  exit 0
fi

# The first mirror apt uses for "$suite" (deb822 .sources stanzas or one-line .list entries).
apt_mirror() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk -v s="$suite" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ } if ($(i + 1) == s) { print $i; exit } }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v s="$suite" '
      function flush() { if (uri != "" && found && !done) { print uri; done = 1 } uri = ""; found = 0 }
      /^[[:space:]]*$/ { flush(); next }
      /^URIs:/ { uri = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == s) found = 1 }
      END { flush() }' "$f"
  done
}

if [ -z "$mirror" ]; then
  mirror="$(apt_mirror | head -n 1)"
  [ -n "$mirror" ] || mirror='http://deb.debian.org/debian'
fi

work="$(mktemp -d /tmp/svc-sandbox-image.XXXXXX)"
root="$work/rootfs"
mkdir -p "$root"
cleanup() {
  if mountpoint -q "$root/proc" 2>/dev/null; then umount "$root/proc" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

started=$(date +%s)

# Users, the workspace and /tmp, common to both images.
finish_rootfs() {
  mkdir -p "$root/workspace" "$root/tmp" "$root/etc" "$root/proc" "$root/sys" "$root/dev"
  chown 1000:1000 "$root/workspace"
  chmod 0755 "$root/workspace"
  chmod 1777 "$root/tmp"
  # Docker bind-mounts these at run time; they must exist in the image.
  : >"$root/etc/hostname"
  : >"$root/etc/hosts"
  rm -f "$root/etc/resolv.conf"
  : >"$root/etc/resolv.conf"
}

import_rootfs() {
  # --numeric-owner keeps uid 1000 on /workspace whatever this host's passwd says.
  tar --numeric-owner -C "$root" -c . | docker import \
    --change 'USER sandbox' \
    --change 'WORKDIR /workspace' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV HOME=/workspace' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'LABEL svc.sandbox.image=1' \
    --change "LABEL svc.sandbox.variant=$1" \
    --change 'CMD ["sh"]' \
    --message "svc sandbox image ($1), built by installers/sandbox-image/build.sh" \
    - "$tag" >/dev/null
}

if [ "$small" = 1 ]; then
  echo "building $tag from busybox-static (apt-get download + dpkg -x)"
  debs="$work/debs"
  mkdir -p "$debs"
  # apt drops to the _apt user to download; let it write here.
  chmod 0711 "$work"
  chown _apt "$debs" 2>/dev/null || true
  (cd "$debs" && apt-get download -q busybox-static >/dev/null) || die 'apt-get download busybox-static failed (try apt-get update)'
  pkg="$(find "$debs" -name 'busybox-static_*.deb' | head -n 1)"
  [ -n "$pkg" ] || die 'busybox-static was not downloaded'
  dpkg -x "$pkg" "$work/pkg"
  mkdir -p "$root/bin" "$root/usr/bin" "$root/sbin" "$root/usr/sbin"
  cp "$work/pkg/bin/busybox" "$root/bin/busybox"
  chmod 0755 "$root/bin/busybox"
  # One symlink per applet (busybox --list-full gives e.g. "usr/bin/wget").
  "$root/bin/busybox" --list-full | while read -r applet; do
    [ -e "$root/$applet" ] || ln -s /bin/busybox "$root/$applet"
  done
  mkdir -p "$root/etc"
  printf 'root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:sandbox:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
  printf 'root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n' >"$root/etc/group"
  finish_rootfs
  import_rootfs small
else
  command -v debootstrap >/dev/null || die 'debootstrap is not installed (apt-get install debootstrap)'
  echo "building $tag: debootstrap --variant=minbase $suite from $mirror"
  debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 30 "$work/debootstrap.log" >&2; die 'debootstrap failed'; }
  echo "deb $mirror $suite main" >"$root/etc/apt/sources.list"
  # No service starts inside the chroot.
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 0755 "$root/usr/sbin/policy-rc.d"
  mount -t proc proc "$root/proc"
  echo 'installing python3 and nodejs'
  chroot "$root" /usr/bin/env DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 sh -c \
    'apt-get update -q && apt-get install -y -q --no-install-recommends python3 nodejs' >"$work/apt.log" 2>&1 \
    || { tail -n 30 "$work/apt.log" >&2; die 'installing python3 and nodejs failed'; }
  chroot "$root" sh -c 'getent group sandbox >/dev/null || groupadd -g 1000 sandbox'
  chroot "$root" sh -c 'id sandbox >/dev/null 2>&1 || useradd -u 1000 -g 1000 -d /workspace -M -s /bin/sh sandbox'
  umount "$root/proc"
  rm -f "$root/usr/sbin/policy-rc.d"
  chroot "$root" apt-get clean
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/log/*.log \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/*
  finish_rootfs
  import_rootfs full
  echo "check: $(docker run --rm --network none "$tag" sh -c 'id -u; python3 --version; node --version' | tr '\n' ' ')"
fi

echo "built in $(($(date +%s) - started)) s"
report
