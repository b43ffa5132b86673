#!/usr/bin/env bash
# ephemera runner bootstrap (settings: the EPHEMERA_* below; docs/deploying.md).
# `make user-data` copies it into template.yaml, `make image-component` into the image.
#   bootstrap.sh install  the image recipe: packages, git, Docker, the runner user, the
#                         runner (the bucket's newest, or the pin; SHA-256 checked), and a
#                         marker file saying so.
#   bootstrap.sh [start]  the user data: installs what the marker lacks (all of it on a
#                         stock image; a runner older than the bucket's newest is replaced),
#                         reads and removes this instance's JIT config (curl --aws-sigv4, no
#                         AWS CLI), runs the runner once, ships its log and the runner's
#                         _diag logs to CloudWatch Logs, powers off. A JIT item saying
#                         prepare: leaves its resume, powers off (docs/design.md,
#                         "Stopped pool", which cites the rules of what follows).
#   bootstrap.sh resume   that resume, at the next boot: from Docker's start on, once.
# Needs bash, coreutils, grep, sed, tar, curl 7.86+. A failure prints one line,
# "ephemera-bootstrap: FAILED <step>: <reason>", on the console. The JIT config, the
# token and the role's keys are never printed.
set -euo pipefail

phase="${1:-start}"
deployment="${EPHEMERA_DEPLOYMENT:-}"
jit_table="${EPHEMERA_JIT_TABLE:-$deployment-jit}"
runner_user="${EPHEMERA_RUNNER_USER:-runner}"
runner_dir="${EPHEMERA_RUNNER_DIR:-/opt/actions-runner}"
runner_version="${EPHEMERA_RUNNER_VERSION:-latest}"
runner_sudo="${EPHEMERA_RUNNER_SUDO:-passwordless}"
bucket="${EPHEMERA_RUNNER_BUCKET_URL:-}"
bucket="${bucket%/}"
jit_wait="${EPHEMERA_JIT_WAIT:-600}"
jit_pause="${EPHEMERA_JIT_PAUSE:-2}"
jit_tries="${EPHEMERA_JIT_TRIES:-$((jit_wait / 2 + 1))}"
tries="${EPHEMERA_TRIES:-10}"
pause="${EPHEMERA_PAUSE:-3}"
imds="${EPHEMERA_IMDS_URL:-http://169.254.169.254}/latest"
github="${EPHEMERA_GITHUB_URL:-https://github.com}"
github="${github%/}"
os_release="${EPHEMERA_OS_RELEASE:-/etc/os-release}"
console="${EPHEMERA_CONSOLE:-/dev/console}"
log_file="${EPHEMERA_LOG:-/var/log/ephemera-bootstrap.log}"
log_group="${EPHEMERA_LOG_GROUP-/ephemera/$deployment/runners}"
log_every="${EPHEMERA_LOG_EVERY:-60}"
resume="${EPHEMERA_PER_BOOT_DIR:-/var/lib/cloud/scripts/per-boot}/ephemera-resume"
# Written by install when done: start trusts it, not dnf or apt.
marker="$runner_dir/.ephemera-installed"
step=start
failed=""
swap_ms=""
image_version=""
shipper=""
shipped="$(mktemp -d)"
prepare=""
ask=""
fetch=(curl -sSfL --connect-timeout 5 --max-time 600)

log() { printf '%s ephemera-bootstrap: %s\n' "$(date -u +%FT%TZ)" "$*" >&2; }

# One line on the console and stderr (the log), then out through the EXIT trap.
fail() {
  failed=1
  [ ! -w "$console" ] || echo "ephemera-bootstrap: FAILED $step: $*" >>"$console" || true
  log "FAILED $step: $*"
  exit 1
}

finish() {
  local code=$?
  trap - EXIT
  set +e
  # A command that failed under set -e: still one FAILED line.
  [ "$code" -eq 0 ] || [ -n "$failed" ] || (fail "exit status $code")
  [ "$phase" = start ] || [ "$phase" = resume ] || exit "$code"
  [ -z "$shipper" ] || { : >"$shipped/stop" && wait "$shipper"; }
  # A failed prepare host stays up: with its behaviour stop, it would pass for prepared.
  local stay=""
  [ "$code" -eq 0 ] || [ "$phase" != start ] || ! preparing || stay=1
  log "exiting with status $code; ${stay:+not }powering off"
  [ -z "${logs_url:-}" ] || ship
  # The launch template sets InstanceInitiatedShutdownBehavior=terminate.
  [ -n "$stay" ] || poweroff || shutdown -h now || systemctl poweroff
  exit "$code"
}
trap finish EXIT
trap 'exit 143' TERM INT HUP
# The log's lines so far are the bake's (install's), not this boot's to ship.
[ "$phase" = install ] || [ ! -f "$log_file" ] || grep -c '' "$log_file" >"$shipped/${log_file//\//_}" || true
exec > >(tee -a "$log_file") 2>&1

# "$@" up to $tries times, $pause s apart; false when every attempt failed.
retry() {
  local i
  for ((i = 1; i <= tries; i++)); do
    "$@" && return 0
    log "$step: attempt $i of $tries failed"
    [ "$i" -eq "$tries" ] || sleep "$pause"
  done
  return 1
}

# String "$1" of the JSON on stdin, if plain (no escapes: base64, ids, ARNs, codes).
json() { tr -d '\n' | sed -n "s/.*\"$1\"[[:space:]]*:[[:space:]]*\"\\([^\"\\\\]*\\)\".*/\\1/p"; }

case "$phase" in install | start | resume) ;; *) fail "unknown phase '$phase'" ;; esac
[ "$phase" = install ] || [ -n "$deployment" ] || fail "EPHEMERA_DEPLOYMENT is not set"
[ "$runner_user" != root ] || fail "the runner must not run as root"
# Every signed call is curl --aws-sigv4, which signs the x-amz-* headers given to it from
# curl 7.86.0 on (curl#7966), as SigV4 wants: an older curl (Ubuntu 22.04's 7.81.0) is
# refused, named, before any signed call, at the bake and at boot (docs/deploying.md,
# "curl 7.86 or later", with the sources).
step=curl
{ [[ "$(curl -V)" =~ ^curl\ (([0-9]+)\.([0-9]+)[^ ]*) ]] && ((BASH_REMATCH[2] > 7 || BASH_REMATCH[3] > 85)); } ||
  fail "curl ${BASH_REMATCH[1]:-?} does not sign x-amz-* headers (7.86+ does): Ubuntu 22.04 and older"

# ---- IMDSv2: a session token, then reads with it
token=""
imds_token() {
  token="$(curl -sSf --connect-timeout 2 --max-time 10 -X PUT "$imds/api/token" \
    -H 'X-aws-ec2-metadata-token-ttl-seconds: 21600')" && [ -n "$token" ] || { token="" && false; }
}
# One read of path $1 into $value; a failed one drops the token, so the next attempt gets
# a fresh one (in the caller's subshell).
imds_read() {
  { [ -n "$token" ] || imds_token; } && value="$(curl -sSf --connect-timeout 2 --max-time 10 \
    -H "X-aws-ec2-metadata-token: $token" "$imds/$1")" && [ -n "$value" ] || { token="" && false; }
}
# path -> value, in $tries attempts (logged as step "imds: reading <path>").
metadata() {
  local value="" step="imds: reading $1"
  retry imds_read "$1" && printf '%s' "$value"
}
imds_start() {
  step=imds
  retry imds_token || fail "no IMDSv2 token from $imds after $tries attempts"
  region="$(metadata meta-data/placement/region)" || fail "no region from IMDS"
}

# ---- AWS requests signed with the instance role's credentials
key_id="" secret="" session=""
credentials() {
  local role doc
  role="$(metadata meta-data/iam/security-credentials/)" || return 1
  doc="$(metadata "meta-data/iam/security-credentials/${role%%$'\n'*}")" || return 1
  key_id="$(printf '%s' "$doc" | json AccessKeyId)"
  secret="$(printf '%s' "$doc" | json SecretAccessKey)"
  session="$(printf '%s' "$doc" | json Token)"
  [ -n "$key_id" ] && [ -n "$secret" ] && [ -n "$session" ]
}
# curl for service $1; the keys on stdin, as a command line is readable by all.
signed() {
  local service="$1"
  shift
  printf 'user = "%s:%s"\nheader = "x-amz-security-token: %s"\n' "$key_id" "$secret" "$session" |
    curl -K - --aws-sigv4 "aws:amz:$region:$service" "$@"
}
# S3 GET; S3 wants the payload's hash: a GET's is the empty string's.
s3_get() {
  signed s3 -sSf --connect-timeout 5 --max-time 600 \
    -H 'x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' "$@"
}
# DynamoDB operation $1, body $2 -> $status, $body; false only when nothing answered.
dynamodb() {
  local out
  out="$(signed dynamodb -sS --connect-timeout 5 --max-time 30 \
    -H 'Content-Type: application/x-amz-json-1.0' -H "X-Amz-Target: DynamoDB_20120810.$1" \
    --data-binary "$2" -w '\n%{http_code}' "$dynamodb_url")" || return 1
  status="${out##*$'\n'}"
  body="${out%$'\n'*}"
}
# "AccessDeniedException: <message> (HTTP 400)" of the last answer.
aws_error() {
  local type message
  type="$(printf '%s' "$body" | json __type)"
  message="$(printf '%s' "$body" | json '[Mm]essage')"
  printf '%s: %s (HTTP %s)' "${type##*#}" "${message:0:300}" "$status"
}

# ---- logs: this log and the runner's _diag logs, to this instance's stream (named by its
# id) of the deployment's group. Best effort: a refused shipment is a line here, never a
# failed boot, and what it held goes again at the next round (at least once).
# CreateLogStream once a boot (an existing stream is this boot's); then, each round, the
# lines added since the last, each file in calls of 128 lines of 2,000 characters at most,
# one timestamp a call: within CreateLogStream's quota and PutLogEvents' limits, as
# docs/operating.md ("A runner's logs") gives them with their sources.
# The body is JSON, so UTF-8 (RFC 8259, 8.1): a line that is not has its bytes above 127
# made '?', and costs no other line. The JIT config never leaves: any run of 200+ base64
# characters (or JSON-escaped ones, \/ and \u002B), and what follows --jitconfig, is
# [redacted] first. EPHEMERA_LOG_GROUP='' ships nothing.
cwlogs() {
  local out
  out="$(signed logs -sS --connect-timeout 5 --max-time 30 -H "X-Amz-Target: Logs_20140328.$1" \
    -H 'Content-Type: application/x-amz-json-1.1' --data-binary "@$shipped/body" \
    -w '\n%{http_code}' "$logs_url")" || { log "logs: no answer from $logs_url" && return 1; }
  status="${out##*$'\n'}"
  body="${out%$'\n'*}"
  [ "$status" = 200 ] || [[ "$(aws_error)" = ResourceAlreadyExists* ]] ||
    { log "logs: $(aws_error) from $logs_url ($1)" && false; }
}
# Lines on stdin -> ,{"timestamp":$t,"message":"<$1: line, redacted, cut, JSON-escaped>"}
# (characters counted in UTF-8, so a cut never splits one)
events() {
  tr '\000-\011\013-\037' ' ' | LC_ALL=C.UTF-8 sed '/^.*$/!s/^/\x01/' |
    LC_ALL=C sed '/^\x01/{s///;s/[\x80-\xff]/?/g}' | LC_ALL=C.UTF-8 sed -E -e '/^ *$/d' \
    -e 's/[A-Za-z0-9+\/=_\\-]{200,}/[redacted]/g' -e 's/(--jitconfig)[ =]+[^ ]+/\1 [redacted]/g' \
    -e 's/^(.{2000}).*/\1/' -e 's/[\\"]/\\&/g' -e "s|.*|,{\"timestamp\":$t,\"message\":\"$1: &\"}|"
}
ship() {
  local f k n b stream="\"logGroupName\":\"$log_group\",\"logStreamName\":\"$instance_id\""
  credentials || return 0
  t="$(date +%s%3N)"
  echo "{$stream}" >"$shipped/body"
  [ -e "$shipped/stream" ] || { cwlogs CreateLogStream && : >"$shipped/stream"; } || return 0
  for f in "$log_file" "$runner_dir"/_diag/*.log; do
    k="$shipped/${f//\//_}"
    n="$(cat "$k" 2>/dev/null)" || n=0
    while [ -f "$f" ] && sed -n "$((n + 1)),$((n + 128))p" "$f" >"$shipped/lines" && [ -s "$shipped/lines" ]; do
      b="$(grep -c '' "$shipped/lines")"
      events "${f##*/}" <"$shipped/lines" | sed '1s/^,//' >"$shipped/batch"
      if [ -s "$shipped/batch" ]; then
        { echo "{$stream,\"logEvents\":[" && cat "$shipped/batch" && echo ']}'; } >"$shipped/body"
        cwlogs PutLogEvents || return 0
      fi
      n=$((n + b))
      echo "$n" >"$k"
    done
  done
}

# ---- packages: required in one transaction; optional (lttng-ust, .NET tracing only)
# one by one, best effort
apt_get() {
  # cloud-init and unattended-upgrades hold the dpkg lock at boot: wait for it.
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 -q "$@"
}
install_packages() {
  local optional=lttng-ust package pm=(dnf install -y)
  step=packages
  log "installing the runner's dependencies, git and Docker on $os ($family)"
  if [ "$family" = dnf ]; then
    # The runner's installdependencies.sh does not know Amazon Linux 2023.
    retry "${pm[@]}" libicu openssl-libs krb5-libs zlib git docker tar gzip shadow-utils \
      sudo || fail "dnf install failed $tries times"
  else
    pm=(apt_get install -y --no-install-recommends) optional=liblttng-ust1 package=""
    case "$os" in
      *" 22.04") package=libicu70 ;;
      *" 24.04") package=libicu74 optional=liblttng-ust1t64 ;;
    esac
    retry apt_get update || fail "apt-get update failed $tries times"
    # shellcheck disable=SC2086 # one ICU package or none
    retry "${pm[@]}" ca-certificates curl tar git docker.io sudo libkrb5-3 zlib1g $package ||
      fail "apt-get install failed $tries times"
  fi
  for package in $optional; do
    "${pm[@]}" "$package" || log "optional package $package not installed; going on"
  done
  step=runner-user
  id "$runner_user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$runner_user" ||
    fail "could not create the user $runner_user"
  step=docker
  systemctl enable --now docker || fail "could not start Docker"
  usermod -aG docker "$runner_user" || fail "could not add $runner_user to group docker"
}

# ---- the runner: from the deployment's bucket (runner/, filled by the scheduled sync),
# its SHA-256 checked on every download. Never from GitHub's API: 60 unauthenticated
# requests an hour per address, shared behind a NAT gateway (docs/deploying.md).
# Sets $newest: the bucket's latest-<arch>, "<version> <sha256>", or "" if unreadable.
bucket_newest() {
  newest=""
  [ -n "$bucket" ] || return 0
  credentials && newest="$(retry s3_get "$bucket/latest-$arch")" || true
  newest="${newest%%$'\n'*}"
  [[ "$newest" =~ ^[0-9]+\.[0-9]+\.[0-9]+\ [0-9a-f]{64}$ ]] ||
    { log "no runner from $bucket/latest-$arch ('${newest:0:80}'): the pinned runner" && newest=""; }
}
# The bucket's copy of $runner_version when the bucket answers (the sum from latest-<arch>
# or <name>.sha256), else the pin's sum from the launch and the tarball from GitHub's
# release download (a download, not an API call).
download_runner() {
  local url sum sum_from pinned="EPHEMERA_RUNNER_SHA256_${arch^^}" tarball="$runner_dir.tar.gz" actual started
  local get=(s3_get)
  step=runner-download
  started="$(date +%s%3N)"
  [[ "$runner_version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
    fail "the runner version is not 2.x.y: '$runner_version'"
  name="actions-runner-linux-$arch-$runner_version.tar.gz"
  url="$bucket/$name"
  if [ "${newest% *}" = "$runner_version" ]; then
    sum="${newest#* }" sum_from="$bucket/latest-$arch"
  elif [ -n "$newest" ] && sum="$(retry s3_get "$url.sha256")"; then
    sum_from="$url.sha256"
  else
    sum="${!pinned:-}" sum_from="$pinned${bucket:+ ($bucket unreadable)}" get=("${fetch[@]}")
    url="$github/actions/runner/releases/download/v$runner_version/$name"
  fi
  sum="${sum%%[[:space:]]*}" sum="${sum,,}"
  [[ "$sum" =~ ^[0-9a-f]{64}$ ]] || fail "no SHA-256 for $name from $sum_from"
  mkdir -p "$runner_dir"
  log "downloading the Actions runner $runner_version ($arch) from $url"
  retry "${get[@]}" -o "$tarball" "$url" || fail "could not download $url"
  actual="$(sha256sum "$tarball" | cut -d' ' -f1)"
  if [ "$actual" != "$sum" ]; then
    rm -f "$tarball"
    fail "checksum mismatch for $url: SHA-256 $actual, published $sum ($sum_from)"
  fi
  # Another version's files (an older bake) would mix with these.
  rm -rf "${runner_dir:?}/bin" "${runner_dir:?}/externals"
  tar -xzf "$tarball" -C "$runner_dir" || fail "could not unpack $url"
  rm -f "$tarball"
  swap_ms=$(($(date +%s%3N) - started))
  log "runner $runner_version in $runner_dir (SHA-256 $actual, ${swap_ms} ms)"
}

# ---- install: what the marker does not vouch for
install_missing() {
  local like packages="" baked=""
  step=packages
  # shellcheck source=/dev/null
  os="$(. "$os_release" && echo "${ID:-} ${VERSION_ID:-}:${ID_LIKE:-}")" || os=unknown
  like="${os#*:}" os="${os%%:*}"
  case "$os $like" in
    amzn* | *fedora* | *rhel*) family=dnf ;;
    ubuntu* | debian* | *debian*) family=apt ;;
    *) fail "unsupported OS '$os' in $os_release" ;;
  esac
  case "$(uname -m)" in
    aarch64 | arm64) arch=arm64 ;;
    x86_64) arch=x64 ;;
    *) fail "unsupported machine $(uname -m)" ;;
  esac
  if [ -r "$marker" ]; then
    grep -qx "packages=$family" "$marker" && packages=1
    baked="$(sed -n 's/^runner=//p' "$marker")"
    [ -x "$runner_dir/run.sh" ] && [ "${baked#* }" = "$arch" ] || baked=""
  fi
  image_version="${baked% *}"
  # "latest": the bucket's newest, else the image's runner, else this script's pin. A
  # runner older than the server's updates itself once a job is assigned ("Communicating
  # with self-hosted runners", https://docs.github.com/en/actions/hosting-your-own-runners/managing-self-hosted-runners/communicating-with-self-hosted-runners):
  # an image behind the bucket gets the bucket's runner here, before it starts.
  [ "$runner_version" != latest ] && [ "$baked" = "$runner_version $arch" ] || bucket_newest
  [ "$runner_version" != latest ] || runner_version="${newest% *}"
  [ -n "$runner_version" ] || runner_version="${image_version:-2.336.0}"
  if [ -n "$packages" ] && [ "$baked" = "$runner_version $arch" ]; then
    log "packages and runner $runner_version in the image: nothing to install"
    return 0
  fi
  if [ -n "$packages" ]; then log "packages in the image ($family)"; else install_packages; fi
  step=runner-download
  if [ "$baked" = "$runner_version $arch" ]; then
    log "runner $runner_version in the image"
  elif [ -x "$runner_dir/run.sh" ] && [ ! -r "$marker" ]; then
    log "using the runner preinstalled in $runner_dir"
    runner_version=unknown
  else
    download_runner
    baked="$runner_version $arch"
  fi
  if [ -z "$packages" ] && [ "$family" = apt ] && [ -x "$runner_dir/bin/installdependencies.sh" ]; then
    # The runner's own list for Ubuntu (lttng-ust, OpenSSL, Kerberos, zlib, an ICU).
    step=runner-dependencies
    retry "$runner_dir/bin/installdependencies.sh" ||
      log "installdependencies.sh failed; going on"
  fi
  step=runner-download
  chown -R "$runner_user:" "$runner_dir" || fail "could not give $runner_dir to $runner_user"
  { echo "packages=$family" && [ -z "$baked" ] || echo "runner=$baked"; } >"$marker"
}

# ---- a stopped pool's host: its JIT item says prepare (BOOL true), no config yet
is_prepare() { [[ "${body//[[:space:]]/}" == *'"prepare":{"BOOL":true}'* ]]; }
# As its item said, or for a failure before the read ($ask), as it says now.
preparing() { [ -n "$prepare" ] || { [ -n "$ask" ] && credentials && dynamodb GetItem "$item" && is_prepare; }; }
# The resume: cloud-init runs scripts/per-boot at every boot, user data once.
# shellcheck disable=SC2015 # fail when any step fails
prepared() {
  prepare=1 step=prepare
  { printf '#!/bin/bash\nset -- resume %s\n' "$runner_version $image_version" && cat "$0"; } >"$resume" &&
    chmod 700 "$resume" || fail "cannot write $resume"
  log prepared
  exit 0
}

if [ "$phase" = install ]; then
  region=""
  [ -z "$bucket" ] || imds_start
  install_missing
  log installed
  exit 0
fi

# ---- start: who this instance is
imds_start
instance_id="$(metadata meta-data/instance-id)" || fail "no instance id from IMDS"
partition="$(metadata meta-data/services/partition)" || fail "no partition from IMDS"
domain="$(metadata meta-data/services/domain)" || fail "no services domain from IMDS"
account="$(metadata dynamic/instance-identity/document | json accountId)" || true
[ -n "$account" ] || fail "no account id from IMDS"
# The key is what the role's credentials carry as ec2:SourceInstanceARN.
instance_arn="arn:$partition:ec2:$region:$account:instance/$instance_id"
key="{\"TableName\":\"$jit_table\",\"Key\":{\"instance_arn\":{\"S\":\"$instance_arn\"}}"
# The whole item: PREPARE is a DynamoDB reserved word.
item="$key,\"ConsistentRead\":true}" ask=1
dynamodb_url="${EPHEMERA_DYNAMODB_URL:-https://dynamodb.$region.$domain}"
[ -z "$log_group" ] || logs_url="${EPHEMERA_LOGS_URL:-https://logs.$region.$domain}"
log "instance $instance_id in $region ($(uname -m))"

if [ "$phase" = resume ]; then
  rm -f "$0"
  runner_version="${2:-unknown}" image_version="${3:-}"
else
  install_missing
fi
step=docker
systemctl start docker || fail "could not start Docker"

# ---- the runner user's sudo: passwordless, as on GitHub-hosted runners (workflows run
# `sudo apt-get ...`), or none. Written at every boot, so a stack update of RunnerSudo
# reaches baked images too. sudo reads /etc/sudoers.d (#includedir on Amazon Linux and
# Ubuntu), needs the file not writable (umask 337: 0440) and skips a file whose name has
# a "." or ends in "~" (sudoers(5)).
step=sudo
s="${EPHEMERA_SUDOERS_DIR:-/etc/sudoers.d}/90-ephemera-runner"
rm -f "$s" || fail "cannot remove $s"
case "$runner_sudo" in
  passwordless) (umask 337 && echo "$runner_user ALL=(ALL) NOPASSWD:ALL" >"$s") || fail "cannot write $s" ;;
  none) ;;
  *) fail "EPHEMERA_RUNNER_SUDO is '$runner_sudo', not passwordless or none" ;;
esac

# ---- the JIT config: read once, removed at once; an AWS error fails at once, but for
# throttling and the service's own faults (retried, as an absent item is)
step=jit-config
credentials || fail "no role credentials from IMDS"
log "waiting for the JIT config of $instance_arn"
jit_config=""
ask=""
deadline=$((SECONDS + jit_wait))
for ((i = 1; i <= jit_tries; i++)); do
  if ! dynamodb GetItem "$item"; then
    log "jit-config: no answer from $dynamodb_url (attempt $i of $jit_tries)"
  elif [ "$status" = 200 ]; then
    # An absent item is "{}".
    jit_config="$(printf '%s' "$body" | json 'jit_config"[[:space:]]*:[[:space:]]*{[[:space:]]*"S')"
    [ -z "$jit_config" ] || break
    [[ "$body" != *'"jit_config"'* ]] || fail "the item's jit_config is not a plain string"
    ! is_prepare || [ "$phase" = resume ] || prepared
    [ $((i % 10)) -ne 1 ] || log "no JIT config yet (attempt $i of $jit_tries)"
  else
    case "$(aws_error)" in
      ExpiredToken*) credentials || fail "no fresh role credentials from IMDS" ;;
      # (InternalServerError, ServiceUnavailable: 5xx, below)
      Throttling* | ProvisionedThroughput* | RequestLimit* | LimitExceeded*) log "jit-config: $(aws_error) (attempt $i)" ;;
      *) [ "$status" -ge 500 ] || fail "$(aws_error) from $dynamodb_url on $jit_table"
        log "jit-config: $(aws_error) (attempt $i)" ;;
    esac
  fi
  [ "$SECONDS" -lt "$deadline" ] && [ "$i" -lt "$jit_tries" ] || break
  sleep "$jit_pause"
done
body=""
[ -n "$jit_config" ] || fail "no JIT config in $jit_table after $i attempts and ${SECONDS}s (limit ${jit_wait}s)"
# The tombstone also says which runner runs the job, the one the image had (if baked), and
# how long this boot's download, check and unpack of a runner took (if any).
stamp=", runner_version=:v" stamp_values=",\":v\":{\"S\":\"$runner_version\"}"
[ -z "$image_version" ] || stamp+=", runner_image_version=:i" stamp_values+=",\":i\":{\"S\":\"$image_version\"}"
[ -z "$swap_ms" ] || stamp+=", runner_swap_ms=:w" stamp_values+=",\":w\":{\"N\":\"$swap_ms\"}"
tombstone() {
  dynamodb UpdateItem "$key,\"UpdateExpression\":\"REMOVE jit_config SET jit_read_at=:t$stamp\",\
\"ConditionExpression\":\"attribute_exists(jit_config)\",\"ExpressionAttributeValues\":{\":t\":{\"N\":\"$t\"}$stamp_values}}" || return 1
  [ "$status" = 200 ] || [[ "$(aws_error)" = ConditionalCheck* ]] || { log "jit-config: $(aws_error)" && return 1; }
}
t="$(date +%s)"
retry tombstone || log "could not remove the JIT config (the reaper will)"
token="" key_id="" secret="" session=""

# ---- the runner, as the runner user, once
step=runner
log "starting the runner as $runner_user"
cd "$runner_dir"
if [ -n "${logs_url:-}" ]; then
  (until [ -e "$shipped/stop" ]; do
    ship
    for ((i = 0; i < log_every; i++)); do [ -e "$shipped/stop" ] || sleep 1; done
  done) >>"$log_file" 2>&1 &
  shipper=$!
fi
rc=0
sudo -u "$runner_user" -H -- ./run.sh --jitconfig "$jit_config" || rc=$?
unset jit_config
[ "$rc" -eq 0 ] || fail "the runner exited with status $rc"
log "runner exited with status 0"
