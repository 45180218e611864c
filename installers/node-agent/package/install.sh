#!/usr/bin/env bash
# Installs the svc node agent from its tarball, with nothing else on the host (it carries its Node.js):
#
#   sudo tar -xzf svc-node-<version>-linux-x64.tar.gz -C /opt
#   sudo /opt/svc-node/install.sh --url https://gateway.example --key-file ./node.key
#
# It creates the svc-node system user, links /usr/local/bin/svc-node to this tree's launcher, creates
# /etc/svc-node and /var/lib/svc-node (0700, owned by svc-node), writes /etc/svc-node/agent.json with the
# agent's own `svc-node enroll` (the key read from --key-file or SVC_NODE_KEY, never an argument), installs
# the systemd unit and starts it. Run again with a newer tree extracted over this one, without a key, to
# upgrade: agent.json is kept and the service restarted.
set -euo pipefail

readonly user=svc-node unit=svc-node.service
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)

usage() {
  cat <<'USAGE'
Usage: install.sh --url <control-plane origin> (--key-file <path> | env SVC_NODE_KEY) [--no-start]
       install.sh            (again, after extracting a newer tarball: keeps agent.json, restarts)
USAGE
}
die() {
  printf 'install.sh: error: %s\n' "$*" >&2
  exit 1
}
say() { printf '==> %s\n' "$*"; }

url="" key_file="" no_start=0
while (($# > 0)); do
  case $1 in
    --url) (($# >= 2)) || die "--url needs a value"; url=$2; shift 2 ;;
    --url=*) url=${1#*=}; shift ;;
    --key-file) (($# >= 2)) || die "--key-file needs a value"; key_file=$2; shift 2 ;;
    --key-file=*) key_file=${1#*=}; shift ;;
    --key | --key=*) die "the node key is not taken as an argument (ps and shell history show arguments): use --key-file or SVC_NODE_KEY" ;;
    --no-start) no_start=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done

[[ $(id -u) -eq 0 ]] || die "run it as root (sudo)"
[[ -x $here/bin/svc-node && -x $here/runtime/node ]] || die "$here is not an extracted svc-node tarball"
[[ $here != /root/* && $here != /home/* ]] || die "$here is under a home directory, which the unit hides (ProtectHome=yes): extract into /opt"
bin=$here/bin/svc-node
"$bin" --version >/dev/null || die "$bin does not run on this host"

if ! getent passwd "$user" >/dev/null; then
  say "creating system user $user"
  useradd --system --user-group --home-dir /var/lib/svc-node --no-create-home --shell /usr/sbin/nologin --comment "svc node agent" "$user"
fi
say "linking /usr/local/bin/svc-node -> $bin"
mkdir -p /usr/local/bin
ln -sfn "$bin" /usr/local/bin/svc-node
install -d -m 0700 -o "$user" -g "$user" /etc/svc-node /var/lib/svc-node

if [[ -n $key_file || -n ${SVC_NODE_KEY:-} ]]; then
  [[ -n $url ]] || die "--url <control-plane origin> is required with a key"
  say "writing /etc/svc-node/agent.json (0600) with svc-node enroll"
  if [[ -n $key_file ]]; then
    "$bin" enroll --config-dir /etc/svc-node --url "$url" --key-file "$key_file" --data-dir /var/lib/svc-node
  else
    "$bin" enroll --config-dir /etc/svc-node --url "$url" --data-dir /var/lib/svc-node
  fi
  unset SVC_NODE_KEY
elif [[ -f /etc/svc-node/agent.json ]]; then
  [[ -z $url ]] || die "changing the control-plane URL needs the node key again (--key-file)"
  say "keeping /etc/svc-node/agent.json"
else
  die "no node key: give --key-file <path> (a 0600 file with the nk-svc_ key) or set SVC_NODE_KEY"
fi
chown "$user:$user" /etc/svc-node/agent.json
chmod 0600 /etc/svc-node/agent.json

say "installing /etc/systemd/system/$unit"
install -m 0644 "$here/$unit" "/etc/systemd/system/$unit"
dropin=/etc/systemd/system/$unit.d/10-no-docker.conf
if getent group docker >/dev/null; then
  rm -f "$dropin"
else
  printf 'install.sh: warning: no docker group: sandboxes stay off until Docker is installed (then run install.sh again)\n' >&2
  mkdir -p "$(dirname "$dropin")"
  printf '[Service]\nSupplementaryGroups=\n' >"$dropin"
fi
if [[ -d /run/systemd/system ]]; then
  systemctl daemon-reload
  if ((no_start)); then
    say "not starting (--no-start): systemctl enable --now $unit"
  else
    systemctl enable "$unit"
    systemctl restart "$unit"
    say "started: systemctl status $unit; svc-node doctor"
  fi
else
  say "systemd is not running here: run \`svc-node run\` as $user under your supervisor"
fi
