#!/usr/bin/env bash
# ephemera runner bootstrap, in two phases:
#   bootstrap.sh install   what a runner host needs, once: the image recipe runs it, so a
#                          baked image has it all (and a marker file saying so).
#   bootstrap.sh start     the user data of every runner instance (no argument means start):
#                          on a baked image it makes no package-manager call and no download;
#                          on a stock image it first installs what is missing. Then it reads
#                          the instance's JIT config, runs the runner once, and powers off.
#
# template.yaml embeds this file verbatim in the launch template, after a line that
# exports the deployment's settings:
#   EPHEMERA_DEPLOYMENT      deployment name (start)
#   EPHEMERA_JIT_TABLE       the DynamoDB table holding JIT configs (default
#                            $EPHEMERA_DEPLOYMENT-jit), one item per instance ARN
#   EPHEMERA_RUNNER_USER     the non-root user the runner runs as (created if missing)
#   EPHEMERA_RUNNER_DIR      where the Actions runner lives
#   EPHEMERA_RUNNER_VERSION  the pinned runner release, 2.x.y ("latest": the image's, or
#                            GitHub's newest when the image has none)
#   EPHEMERA_RUNNER_SHA256_X64, EPHEMERA_RUNNER_SHA256_ARM64
#                            the release's published SHA-256 of each tarball; when unset,
#                            the sum comes from "<tarball>.sha256" beside the tarball in the
#                            bucket, or else from the release notes on GitHub
#   EPHEMERA_RUNNER_BUCKET_URL  https://<bucket>.s3.<region>.amazonaws.com/<prefix>: the
#                            deployment's copy of the runner (signed GETs with the instance
#                            role); unset: GitHub
#   EPHEMERA_GITHUB_URL      https://github.com, or a GHES host serving actions/runner
#                            releases (its API at <host>/api/v3)
#   EPHEMERA_JIT_WAIT        seconds to wait for the JIT config before giving up
# and, for tests (tests/bootstrap/), where it looks and what it touches: EPHEMERA_IMDS_URL,
# EPHEMERA_GITHUB_API_URL, EPHEMERA_DYNAMODB_URL, EPHEMERA_OS_RELEASE, EPHEMERA_CONSOLE,
# EPHEMERA_LOG, and the retry bounds EPHEMERA_TRIES, EPHEMERA_PAUSE, EPHEMERA_JIT_TRIES,
# EPHEMERA_JIT_PAUSE.
#
# Amazon Linux 2023 (x86_64, arm64) and Ubuntu 22.04/24.04. Needs bash, coreutils, sed,
# tar and curl 7.75+ (for --aws-sigv4), nothing else: no AWS CLI, no snap, no jq, no
# Python. The JIT config comes from the JIT table, never from user data or tags: the
# instance role may get and delete only the item keyed by this instance's ARN, and it is
# read once and deleted at once. Neither it, the metadata token nor the role's credentials
# are ever printed. Every failure prints one line, "ephemera-bootstrap: FAILED <step>:
# <reason>", on the console (the EC2 console output) and in the log. At the end of start,
# whatever happened, the instance powers off, and its shutdown behaviour (terminate) ends
# it; the reaper cleans up records of runners that never came online.
set -euo pipefail

phase="${1:-start}"
deployment="${EPHEMERA_DEPLOYMENT:-}"
jit_table="${EPHEMERA_JIT_TABLE:-$deployment-jit}"
runner_user="${EPHEMERA_RUNNER_USER:-runner}"
runner_dir="${EPHEMERA_RUNNER_DIR:-/opt/actions-runner}"
runner_version="${EPHEMERA_RUNNER_VERSION:-2.336.0}"
bucket_url="${EPHEMERA_RUNNER_BUCKET_URL:-}"
bucket_url="${bucket_url%/}"
jit_wait="${EPHEMERA_JIT_WAIT:-600}"
jit_pause="${EPHEMERA_JIT_PAUSE:-2}"
jit_tries="${EPHEMERA_JIT_TRIES:-$((jit_wait / 2 + 1))}"
tries="${EPHEMERA_TRIES:-10}"
pause="${EPHEMERA_PAUSE:-3}"
imds="${EPHEMERA_IMDS_URL:-http://169.254.169.254}/latest"
github="${EPHEMERA_GITHUB_URL:-https://github.com}"
github="${github%/}"
if [ "$github" = https://github.com ]; then
  github_api="${EPHEMERA_GITHUB_API_URL:-https://api.github.com}"
else
  github_api="${EPHEMERA_GITHUB_API_URL:-$github/api/v3}"
fi
os_release="${EPHEMERA_OS_RELEASE:-/etc/os-release}"
console="${EPHEMERA_CONSOLE:-/dev/console}"
log_file="${EPHEMERA_LOG:-/var/log/ephemera-bootstrap.log}"
# Written by install once all of it is done; start trusts it instead of asking dnf or apt.
marker="$runner_dir/.ephemera-installed"
export PATH="$PATH:/usr/local/bin"

step=start
failed=""

# To stderr, so that what a function prints is not taken for its answer.
log() {
  printf '%s ephemera-bootstrap: %s\n' "$(date -u +%FT%TZ)" "$*" >&2
}

# One line on the console and on stderr (which the log keeps), then out: the EXIT trap
# powers off (start).
fail() {
  failed=1
  local line="ephemera-bootstrap: FAILED $step: $*"
  if [ -w "$console" ]; then
    printf '%s\n' "$line" >>"$console" 2>/dev/null || true
  fi
  printf '%s %s\n' "$(date -u +%FT%TZ)" "$line" >&2
  exit 1
}

finish() {
  local status=$?
  trap - EXIT
  set +e
  if [ "$status" -ne 0 ] && [ -z "$failed" ]; then
    # A command failed under set -e: still one FAILED line.
    failed=1
    (fail "exit status $status")
  fi
  if [ "$phase" != start ]; then
    log "$phase: exiting with status $status"
    exit "$status"
  fi
  log "exiting with status $status; powering off"
  # The launch template sets InstanceInitiatedShutdownBehavior=terminate.
  poweroff || shutdown -h now || systemctl poweroff
  exit "$status"
}
trap finish EXIT
trap 'exit 143' TERM INT HUP

# Everything this script says goes to the console (cloud-init's output) and the log.
exec > >(tee -a "$log_file") 2>&1

# Runs "$@" up to $tries times, $pause seconds apart; false when every attempt failed.
retry() {
  local i
  for ((i = 1; i <= tries; i++)); do
    if "$@"; then
      return 0
    fi
    log "$step: attempt $i of $tries failed"
    if [ "$i" -lt "$tries" ]; then
      sleep "$pause"
    fi
  done
  return 1
}

# The string value of "$1" in the JSON object on stdin, when it is a plain one (no escapes:
# all this script reads is base64, key ids, ARNs and error codes).
json_string() {
  tr -d '\n' | sed -n "s/.*\"$1\"[[:space:]]*:[[:space:]]*\"\\([^\"\\\\]*\\)\".*/\\1/p"
}
# The same for the string attribute "$1" of a DynamoDB item ("name":{"S":"value"}).
item_string() {
  json_string "$1\"[[:space:]]*:[[:space:]]*{[[:space:]]*\"S"
}

case "$phase" in
  install | start) ;;
  *) fail "unknown phase '$phase' (install or start)" ;;
esac
[ "$phase" = install ] || [ -n "$deployment" ] || fail "EPHEMERA_DEPLOYMENT is not set"
[ "$runner_user" != root ] || fail "the runner must not run as root"

# ---- instance metadata (IMDSv2 only: a session token, then reads with it)
token=""
imds_token() {
  token="$(curl -sSf --connect-timeout 2 --max-time 10 -X PUT "$imds/api/token" \
    -H 'X-aws-ec2-metadata-token-ttl-seconds: 21600')" && [ -n "$token" ] || {
    token=""
    return 1
  }
}
# path -> its value, $tries attempts; an attempt that fails fetches a fresh token for the
# next (in the caller's subshell: the script's own token stays as it was).
metadata() {
  local value="" i
  for ((i = 1; i <= tries; i++)); do
    if { [ -n "$token" ] || imds_token; } &&
      value="$(curl -sSf --connect-timeout 2 --max-time 10 \
        -H "X-aws-ec2-metadata-token: $token" "$imds/$1")" && [ -n "$value" ]; then
      printf '%s' "$value"
      return 0
    fi
    token=""
    log "imds: reading $1, attempt $i of $tries failed"
    if [ "$i" -lt "$tries" ]; then
      sleep "$pause"
    fi
  done
  return 1
}
# The token first, on its own, so that its failure says so; then the region.
imds_start() {
  local i
  step=imds
  for ((i = 1; i <= tries; i++)); do
    if imds_token; then
      break
    fi
    log "imds: token, attempt $i of $tries failed"
    if [ "$i" -lt "$tries" ]; then
      sleep "$pause"
    fi
  done
  [ -n "$token" ] || fail "no IMDSv2 token from $imds after $tries attempts"
  region="$(metadata meta-data/placement/region)" || fail "no region from IMDS"
}

# ---- signed AWS requests: curl's --aws-sigv4 with the instance role's credentials
key_id=""
secret_key=""
session_token=""
# The role's current credentials from IMDS, into the shell's own variables.
credentials() {
  local role document
  role="$(metadata meta-data/iam/security-credentials/)" || return 1
  role="${role%%$'\n'*}"
  document="$(metadata "meta-data/iam/security-credentials/$role")" || return 1
  key_id="$(printf '%s' "$document" | json_string AccessKeyId)"
  secret_key="$(printf '%s' "$document" | json_string SecretAccessKey)"
  session_token="$(printf '%s' "$document" | json_string Token)"
  [ -n "$key_id" ] && [ -n "$secret_key" ] && [ -n "$session_token" ]
}
# curl "$@", signed for service $1, the keys given on stdin (a command line is readable
# by every process on the host).
signed_curl() {
  local service="$1"
  shift
  printf 'user = "%s:%s"\nheader = "x-amz-security-token: %s"\n' \
    "$key_id" "$secret_key" "$session_token" |
    curl -K - --aws-sigv4 "aws:amz:$region:$service" "$@"
}
# DynamoDB's JSON protocol: operation $1 with body $2; sets aws_status and aws_body.
# False only when no HTTP answer came.
aws_status=""
aws_body=""
dynamodb() {
  local out
  out="$(signed_curl dynamodb -sS --connect-timeout 5 --max-time 30 -X POST \
    -H 'Content-Type: application/x-amz-json-1.0' \
    -H "X-Amz-Target: DynamoDB_20120810.$1" --data-binary "$2" \
    -w '\n%{http_code}' "$dynamodb_url")" || return 1
  aws_status="${out##*$'\n'}"
  aws_body="${out%$'\n'*}"
}
# The error code of the last answer ("AccessDeniedException"), and its message.
aws_error() {
  local type message
  type="$(printf '%s' "$aws_body" | json_string __type)"
  message="$(printf '%s' "$aws_body" | json_string '[Mm]essage')"
  printf '%s: %s (HTTP %s)' "${type##*#}" "${message:0:300}" "$aws_status"
}
# Throttling and the service's own faults pass; the request's own errors do not.
transient() {
  case "$1" in
    ThrottlingException* | ProvisionedThroughputExceededException* | RequestLimitExceeded* | \
      InternalServerError* | ServiceUnavailable* | LimitExceededException*) return 0 ;;
  esac
  [ "$aws_status" -ge 500 ]
}

# ---- packages: the runner's dependencies, git, Docker
os_family() {
  local id="" version="" like=""
  os_name="unknown"
  if [ -r "$os_release" ]; then
    id="$(sed -n 's/^ID=//p' "$os_release" | tr -d '"')"
    version="$(sed -n 's/^VERSION_ID=//p' "$os_release" | tr -d '"')"
    like="$(sed -n 's/^ID_LIKE=//p' "$os_release" | tr -d '"')"
  fi
  os_version="$version"
  os_name="$id $version"
  case "$id $like" in
    amzn* | *fedora* | *rhel*) family=dnf ;;
    ubuntu* | debian* | *debian*) family=apt ;;
    *) return 1 ;;
  esac
}
apt_get() {
  # cloud-init and unattended-upgrades hold the dpkg lock at boot: wait for it.
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 -q "$@"
}
# The required ones in one transaction (any missing fails it); the optional ones (the
# runner does without lttng-ust: it is only for .NET's tracing) one by one, best effort.
install_packages() {
  local optional package icu=""
  step=packages
  log "installing the runner's dependencies, git and Docker on $os_name ($family)"
  if [ "$family" = dnf ]; then
    # The runner's installdependencies.sh does not know Amazon Linux 2023: its list here.
    retry dnf install -y libicu openssl-libs krb5-libs zlib git docker tar gzip \
      shadow-utils sudo || fail "dnf install failed $tries times"
    optional="lttng-ust"
  else
    case "$os_version" in
      22.04) icu=libicu70 optional=liblttng-ust1 ;;
      24.04) icu=libicu74 optional=liblttng-ust1t64 ;;
      *) optional=liblttng-ust1 ;; # installdependencies.sh picks an ICU
    esac
    retry apt_get update || fail "apt-get update failed $tries times"
    # shellcheck disable=SC2086 # $icu is one package name or none
    retry apt_get install -y --no-install-recommends ca-certificates curl tar git \
      docker.io sudo libkrb5-3 zlib1g $icu || fail "apt-get install failed $tries times"
  fi
  for package in $optional; do
    if [ "$family" = dnf ]; then
      dnf install -y "$package" || log "optional package $package not installed; going on"
    else
      apt_get install -y --no-install-recommends "$package" ||
        log "optional package $package not installed; going on"
    fi
  done
  step=runner-user
  if ! id "$runner_user" >/dev/null 2>&1; then
    useradd --create-home --shell /bin/bash "$runner_user" ||
      fail "could not create the user $runner_user"
  fi
  step=docker
  systemctl enable --now docker || fail "could not start Docker"
  usermod -aG docker "$runner_user" || fail "could not add $runner_user to the docker group"
}

# ---- the Actions runner: a pinned release, its published SHA-256 checked every time
# S3 wants the payload's hash in a header: a GET's is the empty string's.
empty_sha256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
# Sets expected_sha256 and sum_source, or is false.
published_sha256() {
  local pinned="EPHEMERA_RUNNER_SHA256_${arch^^}" text=""
  expected_sha256="${!pinned:-}"
  sum_source="$pinned"
  if [ -z "$expected_sha256" ] && [ -n "$bucket_url" ]; then
    sum_source="$bucket_url/$runner_name.sha256"
    text="$(retry signed_curl s3 -sSf --connect-timeout 5 --max-time 60 \
      -H "x-amz-content-sha256: $empty_sha256" "$sum_source")" ||
      return 1
    expected_sha256="${text%%[[:space:]]*}"
  elif [ -z "$expected_sha256" ]; then
    # The release notes list each tarball's sum between these comments.
    sum_source="the release notes of v$runner_version ($github_api)"
    text="$(retry curl -sSf --connect-timeout 5 --max-time 60 \
      -H 'Accept: application/vnd.github+json' \
      "$github_api/repos/actions/runner/releases/tags/v$runner_version")" || return 1
    expected_sha256="$(printf '%s' "$text" | tr -d '\n' |
      sed -nE "s/.*BEGIN SHA linux-$arch --(>|\\\\u003e)([0-9a-fA-F]{64}).*/\\2/p")"
  fi
  expected_sha256="$(printf '%s' "$expected_sha256" | tr 'A-F' 'a-f')"
  [[ "$expected_sha256" =~ ^[0-9a-f]{64}$ ]]
}
download_runner() {
  local url tarball actual
  step=runner-download
  if [ "$runner_version" = latest ]; then
    [ -z "$bucket_url" ] || fail "EPHEMERA_RUNNER_VERSION=latest with a bucket: pin a version"
    # The release page redirects to the newest tag; no API call, no rate limit.
    latest_url() {
      curl -sSfL --connect-timeout 5 --max-time 60 -o /dev/null -w '%{url_effective}' \
        "$github/actions/runner/releases/latest"
    }
    url="$(retry latest_url)" || fail "could not find the latest runner release"
    runner_version="${url##*/v}"
  fi
  [[ "$runner_version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
    fail "the runner version is not 2.x.y: '$runner_version'"
  runner_name="actions-runner-linux-$arch-$runner_version.tar.gz"
  published_sha256 || fail "no published SHA-256 for $runner_name from $sum_source"
  mkdir -p "$runner_dir"
  tarball="$runner_dir.tar.gz"
  log "downloading the Actions runner $runner_version ($arch)"
  if [ -n "$bucket_url" ]; then
    url="$bucket_url/$runner_name"
    retry signed_curl s3 -sSf --connect-timeout 5 --max-time 600 -o "$tarball" \
      -H "x-amz-content-sha256: $empty_sha256" "$url" ||
      fail "could not download $url"
  else
    url="$github/actions/runner/releases/download/v$runner_version/$runner_name"
    retry curl -sSfL --connect-timeout 5 --max-time 600 -o "$tarball" "$url" ||
      fail "could not download $url"
  fi
  actual="$(sha256sum "$tarball" | cut -d' ' -f1)"
  if [ "$actual" != "$expected_sha256" ]; then
    rm -f "$tarball"
    fail "checksum mismatch for $url: SHA-256 $actual, published $expected_sha256 ($sum_source)"
  fi
  # A runner of another version (an older bake) goes: its files would mix with these.
  rm -rf "${runner_dir:?}/bin" "${runner_dir:?}/externals"
  tar -xzf "$tarball" -C "$runner_dir" || fail "could not unpack $url"
  rm -f "$tarball"
  log "runner $runner_version unpacked in $runner_dir (SHA-256 $actual)"
}

# ---- install: whatever the marker does not already vouch for
install_missing() {
  local packages_done="" runner_line=""
  step=packages
  os_family || fail "unsupported OS '$os_name' in $os_release (Amazon Linux 2023 or Ubuntu)"
  case "$(uname -m)" in
    aarch64 | arm64) arch=arm64 ;;
    x86_64) arch=x64 ;;
    *) fail "unsupported machine $(uname -m)" ;;
  esac
  if [ -r "$marker" ]; then
    grep -qx "packages=$family" "$marker" && packages_done=1
    runner_line="$(sed -n 's/^runner=//p' "$marker")"
  fi
  if [ -n "$packages_done" ] && [ -x "$runner_dir/run.sh" ] && [ -n "$runner_line" ] &&
    { [ "$runner_line" = "$runner_version $arch" ] ||
      { [ "$runner_version" = latest ] && [ "${runner_line#* }" = "$arch" ]; }; }; then
    log "packages and runner ${runner_line% *} installed in the image: nothing to install"
    return 0
  fi
  if [ -n "$packages_done" ]; then
    log "packages installed in the image ($family)"
  else
    install_packages
  fi
  step=runner-download
  if [ -x "$runner_dir/run.sh" ] && [ -n "$runner_line" ] &&
    [ "$runner_line" = "$runner_version $arch" ]; then
    log "runner $runner_version installed in the image"
  elif [ -x "$runner_dir/run.sh" ] && [ ! -r "$marker" ]; then
    runner_line=""
    log "using the runner preinstalled in $runner_dir (it updates itself if GitHub asks)"
  else
    [ -z "$bucket_url" ] || credentials || fail "no instance role credentials from IMDS"
    download_runner
    runner_line="$runner_version $arch"
  fi
  if [ -z "$packages_done" ] && [ "$family" = apt ] &&
    [ -x "$runner_dir/bin/installdependencies.sh" ]; then
    # The runner's own list for Ubuntu (lttng-ust, OpenSSL, Kerberos, zlib, an ICU).
    step=runner-dependencies
    retry "$runner_dir/bin/installdependencies.sh" ||
      log "installdependencies.sh failed; going on with the packages above"
  fi
  step=runner-download
  chown -R "$runner_user:" "$runner_dir" || fail "could not give $runner_dir to $runner_user"
  {
    printf 'packages=%s\n' "$family"
    if [ -n "$runner_line" ]; then printf 'runner=%s\n' "$runner_line"; fi
  } >"$marker"
}

if [ "$phase" = install ]; then
  region=""
  if [ -n "$bucket_url" ]; then
    imds_start
  fi
  install_missing
  log "installed: $(tr '\n' ' ' <"$marker")"
  exit 0
fi

# ---- start: who this instance is
imds_start
instance_id="$(metadata meta-data/instance-id)" || fail "no instance id from IMDS"
partition="$(metadata meta-data/services/partition)" || fail "no partition from IMDS"
domain="$(metadata meta-data/services/domain)" || fail "no services domain from IMDS"
document="$(metadata dynamic/instance-identity/document)" ||
  fail "no instance identity document from IMDS"
account="$(printf '%s' "$document" | json_string accountId)"
[ -n "$account" ] || fail "no accountId in the instance identity document"
# The key is what the role's credentials carry as ec2:SourceInstanceARN.
instance_arn="arn:$partition:ec2:$region:$account:instance/$instance_id"
dynamodb_url="${EPHEMERA_DYNAMODB_URL:-https://dynamodb.$region.$domain}"
log "instance $instance_id in $region ($(uname -m))"

install_missing
step=docker
systemctl start docker || fail "could not start Docker"

# ---- the JIT config: read once, deleted at once
step=jit-config
credentials || fail "no instance role credentials from IMDS"
log "waiting for the JIT config of $instance_arn in $jit_table"
key="{\"TableName\":\"$jit_table\",\"Key\":{\"instance_arn\":{\"S\":\"$instance_arn\"}}"
jit_config=""
deadline=$((SECONDS + jit_wait))
for ((i = 1; i <= jit_tries; i++)); do
  if ! dynamodb GetItem "$key,\"ConsistentRead\":true,\"ProjectionExpression\":\"jit_config\"}"; then
    log "jit-config: no answer from $dynamodb_url (attempt $i of $jit_tries)"
  elif [ "$aws_status" = 200 ]; then
    # An absent item is "{}".
    jit_config="$(printf '%s' "$aws_body" | item_string jit_config)"
    [ -n "$jit_config" ] && break
    case "$aws_body" in
      *'"jit_config"'*) fail "the item's jit_config is not a plain string" ;;
    esac
    if [ $((i % 10)) -eq 1 ]; then
      log "no JIT config yet (attempt $i of $jit_tries)"
    fi
  elif [[ "$(aws_error)" == ExpiredToken* ]]; then
    credentials || fail "no fresh instance role credentials from IMDS"
  elif transient "$(aws_error)"; then
    log "jit-config: $(aws_error) (attempt $i of $jit_tries)"
  else
    fail "$(aws_error) from $dynamodb_url on $jit_table"
  fi
  if [ "$SECONDS" -ge "$deadline" ] || [ "$i" -eq "$jit_tries" ]; then
    break
  fi
  sleep "$jit_pause"
done
aws_body=""
[ -n "$jit_config" ] ||
  fail "no JIT config in $jit_table after $i attempts and ${SECONDS}s (limit ${jit_wait}s)"
# One use only: nobody may read it again, not even this instance.
delete_jit() {
  dynamodb DeleteItem "$key}" || return 1
  [ "$aws_status" = 200 ] || {
    log "jit-config: delete: $(aws_error)"
    return 1
  }
}
retry delete_jit || log "could not delete the JIT config of $instance_arn (the reaper will)"
unset token key_id secret_key session_token

# ---- the runner, as the runner user, once
step=runner
log "starting the runner as $runner_user"
cd "$runner_dir"
status=0
sudo -u "$runner_user" -H -- ./run.sh --jitconfig "$jit_config" || status=$?
unset jit_config
if [ "$status" -ne 0 ]; then
  fail "the runner exited with status $status"
fi
log "runner exited with status 0"
