#!/usr/bin/env bash
# Installs the svc node agent (`svc-node`) on an operator host, from a checkout of this repository.
#
#   sudo installers/node-agent/install.sh --url https://gateway.example --key-file ./node.key
#   sudo SVC_NODE_KEY=nk-svc_... installers/node-agent/install.sh --url https://gateway.example
#
# What it does (each step is printed; --dry-run prints them and writes nothing):
#   1. checks its inputs: Node 20.19+, the checkout (with `npm ci` done, which builds the agent), the URL
#      and the node key;
#   2. creates the system user and group svc-node (not under a --prefix other than /: see below; a dry
#      run prints the useradd command either way);
#   3. copies the agent into <prefix>/opt/svc-node: the built agent (node-agent/dist, JavaScript with source
#      maps, from `npm run build`), its launcher and package.json, and its run-time dependency closure from
#      the checkout's node_modules (runtime-deps.mjs lists it; 48 MB with node-pty trimmed to what Linux
#      loads, not the workspace's 300+ MB), owned by root and read-only to the agent;
#   4. writes the wrapper <prefix>/usr/local/bin/svc-node;
#   5. creates <prefix>/etc/svc-node (0700) and the data dir <prefix>/var/lib/svc-node (0700), and writes
#      <prefix>/etc/svc-node/agent.json (0600) by running the agent's own `svc-node enroll`, then hands
#      both to svc-node;
#   6. installs the systemd unit <prefix>/etc/systemd/system/svc-node.service;
#   7. enables and (re)starts it, unless --no-start, a --prefix other than /, or systemd is not running.
#
# The node key is read from --key-file or the SVC_NODE_KEY environment variable, never from an argument:
# arguments are world-readable (ps, /proc/<pid>/cmdline) and land in shell history, while a 0600 file or
# the environment (/proc/<pid>/environ is readable only by the same user and root) are not. The script
# hands the key to `svc-node enroll` the same way, in its environment; it never prints it.
#
# Dependencies are copied from the checkout rather than fetched with `npm ci --omit=dev` in /opt: the host
# needs no registry access at install time and gets exactly the versions the checkout was tested with.
# Run `npm ci` in the checkout first (on the same OS and CPU architecture: node-pty and secp256k1 are native).
#
# --prefix <dir> installs into a staging root (the tests do): every path written is under <dir>; the
# wrapper and agent.json name the prefixed paths so the tree runs in place; the unit is copied verbatim.
# The svc-node user is not created there (it would land in the host's /etc/passwd; `useradd --root`
# needs a whole root file system under the prefix), so files stay owned by whoever runs the script.
set -euo pipefail

readonly SERVICE_USER=svc-node
readonly UNIT=svc-node.service
readonly MIN_NODE=20.19
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)

usage() {
  cat <<'EOF'
Usage: install.sh --url <control-plane origin> (--key-file <path> | env SVC_NODE_KEY) [options]

  --url <origin>      the control plane, e.g. https://gateway.example
  --key-file <path>   file holding the nk-svc_ node key from `svc nodes enroll` (or set SVC_NODE_KEY);
                      never given as an argument, which every user on the host could read with ps
  --prefix <dir>      install under <dir> instead of / (a staging root; implies --no-start)
  --source <dir>      the repository checkout to install from (default: the one holding this script)
  --node <path>       the node binary the agent runs with (default: `node` on PATH)
  --no-start          do not enable or start the systemd unit
  --dry-run           print what would be done; write nothing
  -h, --help          this text

Reinstalling over an existing install keeps its agent.json when no key is given (an upgrade).
EOF
}

say() { printf '==> %s\n' "$*"; }
note() { printf '    %s\n' "$*"; }
warn() { printf 'install.sh: warning: %s\n' "$*" >&2; }
die() {
  local code=$1
  shift
  printf 'install.sh: error: %s\n' "$*" >&2
  exit "$code"
}
usage_error() { die 2 "$* (see --help)"; }

url="" key_file="" prefix="/" source_dir="" node_bin="" no_start=0 dry_run=0
while (($# > 0)); do
  case $1 in
    --url | --key-file | --prefix | --source | --node)
      (($# >= 2)) || usage_error "$1 needs a value"
      case $1 in
        --url) url=$2 ;;
        --key-file) key_file=$2 ;;
        --prefix) prefix=$2 ;;
        --source) source_dir=$2 ;;
        --node) node_bin=$2 ;;
      esac
      shift 2
      ;;
    --url=*) url=${1#*=}; shift ;;
    --key-file=*) key_file=${1#*=}; shift ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --source=*) source_dir=${1#*=}; shift ;;
    --node=*) node_bin=${1#*=}; shift ;;
    --key | --key=*)
      usage_error "the node key is not taken as an argument: every user on this host can read arguments (ps, /proc/<pid>/cmdline) and your shell keeps them in its history; put it in a 0600 file for --key-file, or in SVC_NODE_KEY"
      ;;
    --no-start) no_start=1; shift ;;
    --dry-run) dry_run=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage_error "unknown argument: $1" ;;
  esac
done

# ---- 1. inputs -------------------------------------------------------------------------------------
[[ $prefix == /* ]] || usage_error "--prefix must be an absolute path, got: $prefix"
[[ $prefix != *[\'[:space:]]* ]] || usage_error "--prefix must not contain quotes or white space"
prefix=${prefix%/}            # "" for the real root
at() { printf '%s%s' "$prefix" "$1"; }
system_root=0
[[ -z $prefix ]] && system_root=1

opt_dir=$(at /opt/svc-node)
bin_path=$(at /usr/local/bin/svc-node)
config_dir=$(at /etc/svc-node)
config_file=$config_dir/agent.json
data_dir=$(at /var/lib/svc-node)
unit_dir=$(at /etc/systemd/system)
unit_path=$unit_dir/$UNIT
dropin_dir=$unit_path.d

# The key: from the file or the environment, read with shell builtins only (it is never an argument of
# any command), trimmed, checked against the node-key format, never echoed.
key="" key_from=""
if [[ -n $key_file ]]; then
  [[ -f $key_file && -r $key_file ]] || usage_error "cannot read key file $key_file"
  key=$(<"$key_file")
  key_from="key file $key_file"
  key_mode=$(stat -c %a -- "$key_file")
  if (((8#$key_mode & 8#077) != 0)); then warn "$key_file is readable by other users (mode $key_mode); chmod 600 it"; fi
elif [[ -n ${SVC_NODE_KEY:-} ]]; then
  key=$SVC_NODE_KEY
  key_from="SVC_NODE_KEY"
fi
unset SVC_NODE_KEY # not inherited by the commands below; enroll gets it explicitly
if [[ -n $key ]]; then
  if [[ $key =~ ^[[:space:]]*([^[:space:]]+)[[:space:]]*$ ]]; then key=${BASH_REMATCH[1]}; fi
  [[ $key =~ ^nk-svc_[A-Za-z0-9_-]{43}$ ]] ||
    usage_error "the $key_from does not hold a node key (nk-svc_ followed by 43 base64url characters, as printed by \`svc nodes enroll\`)"
fi

keep_config=0
if [[ -z $key ]]; then
  if [[ -f $config_file && -z $url ]]; then
    keep_config=1
  elif [[ -f $config_file ]]; then
    usage_error "changing the control-plane URL of an existing install needs the node key again: give --key-file or SVC_NODE_KEY"
  else
    usage_error "no node key: give --key-file <path> (a 0600 file holding the nk-svc_ key that \`svc nodes enroll\` printed) or set SVC_NODE_KEY; it is never taken as an argument, which other users could read with ps"
  fi
fi
if ((keep_config == 0)); then
  [[ -n $url ]] || usage_error "--url <control-plane origin> is required, e.g. --url https://gateway.example"
  [[ $url =~ ^https?://[^/?#[:space:]]+/?$ ]] || usage_error "--url must be an http(s) origin such as https://gateway.example, got: $url"
  url=${url%/}
  if [[ $url == http://* && ! $url =~ ^http://(localhost|127\.[0-9.]+|\[::1\])(:[0-9]+)?$ ]]; then
    warn "$url is plain http: the node key travels in clear text; use https outside a trusted network"
  fi
fi

if [[ -z $source_dir ]]; then source_dir=$(cd "$here/../.." && pwd -P); fi
[[ -d $source_dir ]] || usage_error "--source $source_dir is not a directory"
source_dir=$(cd "$source_dir" && pwd -P)
for f in node-agent/package.json node-agent/bin/svc-node.js node-agent/src/cli.ts; do
  [[ -f $source_dir/$f ]] || die 1 "$source_dir is not a checkout of the svc repository (no $f)"
done
[[ -d $source_dir/node_modules ]] || die 1 "$source_dir/node_modules is missing: run \`npm ci\` in $source_dir first"
[[ -f $source_dir/node-agent/dist/svc-node.js ]] || die 1 "$source_dir/node-agent/dist is missing: run \`npm run build\` in $source_dir first"

if [[ -z $node_bin ]]; then node_bin=$(command -v node || true); fi
[[ -n $node_bin ]] || die 1 "node is not on PATH: install Node.js $MIN_NODE or newer (or give --node <path>)"
node_bin=$(readlink -f -- "$node_bin")
[[ -x $node_bin ]] || die 1 "$node_bin is not executable"
[[ $node_bin != *\'* ]] || die 1 "the node path must not contain a quote: $node_bin"
node_version=$("$node_bin" -p 'process.versions.node')
if ! "$node_bin" -e 'const [a,b]=process.argv[1].split(".").map(Number),[x,y]=process.versions.node.split(".").map(Number);process.exit(x>a||(x===a&&y>=b)?0:1)' "$MIN_NODE"; then
  die 1 "$node_bin is Node.js $node_version; the agent needs $MIN_NODE or newer"
fi
if ((system_root)) && [[ $node_bin =~ ^/(root|home|run/user)/ ]]; then
  die 1 "$node_bin is under a home directory, which the unit hides (ProtectHome=yes) and the svc-node user cannot read: install Node.js system-wide (e.g. /usr/bin/node) or give --node <path>"
fi
if ((system_root && !dry_run)) && [[ $(id -u) -ne 0 ]]; then
  die 1 "installing into / needs root: run it with sudo (or use --prefix <dir> to stage into a directory)"
fi

deps_text=$("$node_bin" "$here/runtime-deps.mjs" "$source_dir") || die 1 "cannot list the agent's run-time dependencies in $source_dir"
mapfile -t deps <<<"$deps_text"

run() {
  if ((dry_run)); then
    printf '    would run:'
    printf ' %q' "$@"
    printf '\n'
  else
    "$@"
  fi
}

owner=""
if ((system_root)); then owner=$SERVICE_USER; fi

say "installing the svc node agent from $source_dir (Node.js $node_version at $node_bin)${prefix:+ under $prefix}"
((dry_run)) && note "dry run: nothing is written"

# ---- 2. user ---------------------------------------------------------------------------------------
useradd_cmd=(useradd --system --user-group --home-dir /var/lib/svc-node --no-create-home
  --shell /usr/sbin/nologin --comment "svc node agent" "$SERVICE_USER")
if ((system_root)); then
  if id -u "$SERVICE_USER" >/dev/null 2>&1; then
    say "system user $SERVICE_USER exists"
  else
    say "creating system user and group $SERVICE_USER"
    run "${useradd_cmd[@]}"
  fi
else
  say "skipping the $SERVICE_USER system user under --prefix $prefix (it belongs in the host's /etc/passwd); files stay owned by $(id -un)"
  # The plan still shows the step, so a staged (dry) run reviews everything an install into / does.
  if ((dry_run)); then
    printf '    an install into / would run:'
    printf ' %q' "${useradd_cmd[@]}"
    printf '\n'
  fi
fi

# ---- 3. code ---------------------------------------------------------------------------------------
say "copying the agent and ${#deps[@]} run-time packages into $opt_dir"
stage=$opt_dir.new.$$
if ((dry_run)); then
  note "would copy node-agent/{package.json,bin,dist} and:"
  note "${deps[*]}"
else
  trap 'rm -rf -- "$stage"' EXIT
  rm -rf -- "$stage"
  mkdir -p -- "$stage"
  # Owned by root and not writable by the agent: it runs with docker-group rights, so its code must not
  # be modifiable by the user it runs as (nor by whoever owns the checkout).
  # node-pty's sources and its prebuilt binaries for macOS and Windows (60 MB) are not loaded on Linux: only
  # its lib/ and the addon it compiled (build/Release) are.
  tar -C "$source_dir" --exclude='build.json' --exclude=node_modules/node-pty/prebuilds --exclude=node_modules/node-pty/deps \
    --exclude=node_modules/node-pty/third_party --exclude=node_modules/node-pty/src --exclude=node_modules/node-pty/scripts \
    --exclude=node_modules/node-pty/typings --exclude='node_modules/node-pty/lib/*.test.js' \
    --owner=0 --group=0 --mode='u+rwX,go+rX,go-w' -cf - \
    node-agent/package.json node-agent/bin node-agent/dist "${deps[@]}" |
    tar -C "$stage" -xf -
  commit=$(git -C "$source_dir" rev-parse HEAD 2>/dev/null || echo unknown)
  printf 'source=%s\ncommit=%s\nnode=%s\n' "$source_dir" "$commit" "$node_bin" >"$stage/INSTALL-INFO"
  chmod -R u+rwX,go+rX,go-w -- "$stage"
  if [[ -e $opt_dir ]]; then
    rm -rf -- "$opt_dir.old"
    mv -- "$opt_dir" "$opt_dir.old"
  fi
  mv -- "$stage" "$opt_dir"
  rm -rf -- "$opt_dir.old"
  trap - EXIT
fi

# ---- 4. wrapper ------------------------------------------------------------------------------------
say "writing $bin_path"
if ((!dry_run)); then
  mkdir -p -- "$(dirname "$bin_path")"
  cat >"$bin_path.tmp.$$" <<EOF
#!/bin/sh
# svc-node: the svc node agent, installed by installers/node-agent/install.sh.
# The configuration defaults to the system one (--config-dir or SVC_NODE_CONFIG_DIR override it).
: "\${SVC_NODE_CONFIG_DIR:=$config_dir}"
export SVC_NODE_CONFIG_DIR
exec '$node_bin' '$opt_dir/node-agent/bin/svc-node.js' "\$@"
EOF
  chmod 0755 -- "$bin_path.tmp.$$"
  mv -f -- "$bin_path.tmp.$$" "$bin_path"
fi

# ---- 5. configuration and data ---------------------------------------------------------------------
say "creating $config_dir (0700) and $data_dir (0700)"
run install -d -m 0700 ${owner:+-o "$owner" -g "$owner"} -- "$config_dir" "$data_dir"
if ((keep_config)); then
  say "keeping the existing $config_file (no node key given)"
else
  say "writing $config_file (0600) with \`svc-node enroll\` (node key from the $key_from)"
  if ((dry_run)); then
    note "would run: SVC_NODE_KEY=<the key> $bin_path enroll --config-dir $config_dir --url $url --data-dir $data_dir"
  else
    SVC_NODE_KEY=$key "$bin_path" enroll --config-dir "$config_dir" --url "$url" --data-dir "$data_dir" | sed 's/^/    /'
  fi
fi
if [[ -n $owner ]]; then
  run chown "$owner:$owner" -- "$config_dir" "$data_dir"
  run chown "$owner:$owner" -- "$config_file"
fi
run chmod 0600 -- "$config_file"
key=""

# ---- 6. unit ---------------------------------------------------------------------------------------
say "installing $unit_path"
run install -d -m 0755 -- "$unit_dir"
run install -m 0644 -- "$here/$UNIT" "$unit_path"
if ((system_root)); then
  if getent group docker >/dev/null; then
    if [[ -e $dropin_dir/10-no-docker.conf ]]; then run rm -f -- "$dropin_dir/10-no-docker.conf"; fi
  else
    warn "no docker group on this host: the agent cannot run sandboxes until Docker is installed"
    note "adding $dropin_dir/10-no-docker.conf, which clears SupplementaryGroups=docker so the unit starts;"
    note "after installing Docker: rm it, then systemctl daemon-reload && systemctl restart $UNIT"
    if ((!dry_run)); then
      install -d -m 0755 -- "$dropin_dir"
      printf '[Service]\n# Docker is not installed yet; see installers/node-agent/install.sh.\nSupplementaryGroups=\n' >"$dropin_dir/10-no-docker.conf"
    fi
  fi
fi

# ---- 7. start --------------------------------------------------------------------------------------
started=0
if ((!system_root)); then
  say "not starting: installed under --prefix $prefix"
elif [[ ! -d /run/systemd/system ]]; then
  say "not starting: systemd is not running on this host; run \`$bin_path run\` under your supervisor"
else
  run systemctl daemon-reload
  if ((no_start)); then
    say "not starting (--no-start): systemctl enable --now $UNIT when ready"
  else
    say "enabling and (re)starting $UNIT"
    run systemctl enable "$UNIT"
    run systemctl restart "$UNIT"
    started=1
  fi
fi

say "done"
cat <<EOF
    next:
      - an admin approves the node before it takes work:  svc nodes approve <node_id>
      - $( ((started)) && echo "systemctl status $UNIT; journalctl -u $UNIT -f" || echo "start it: systemctl enable --now $UNIT (or run $bin_path run in the foreground)")
      - sudo $bin_path status
EOF
