#!/usr/bin/env bash
# ephemera runner bootstrap: the user data of every runner instance.
#
# template.yaml embeds this file verbatim in the launch template (make user-data writes
# it there; make lint-infra and a test fail when the copy differs), after a line that
# exports the deployment's settings:
#   EPHEMERA_DEPLOYMENT      deployment name
#   EPHEMERA_JIT_TABLE       the DynamoDB table holding JIT configs (default
#                            $EPHEMERA_DEPLOYMENT-jit), one item per instance ARN
#   EPHEMERA_RUNNER_USER     the non-root user the runner runs as (created if missing)
#   EPHEMERA_RUNNER_DIR      where the Actions runner lives; used as is when run.sh is
#                            there already (runner preinstalled in the AMI)
#   EPHEMERA_RUNNER_VERSION  the runner release to download otherwise ("latest" or 2.x.y)
#   EPHEMERA_JIT_WAIT        seconds to wait for the JIT config before giving up
# and, for tests (tests/bootstrap/), where it looks and what it touches: EPHEMERA_IMDS_URL,
# EPHEMERA_GITHUB_URL, EPHEMERA_OS_RELEASE, EPHEMERA_CONSOLE, EPHEMERA_LOG, and the retry
# bounds EPHEMERA_TRIES, EPHEMERA_PAUSE, EPHEMERA_JIT_TRIES, EPHEMERA_JIT_PAUSE.
#
# Amazon Linux 2023 (x86_64, arm64) and Ubuntu 22.04/24.04: it installs what the runner
# needs (libicu, lttng-ust, OpenSSL, Kerberos, zlib), git and Docker (running, with the
# runner user in its group), then reads the JIT config, starts the runner with it as the
# runner user, and powers off when the runner exits.
#
# The JIT config comes from the JIT table, never from user data or tags: the instance role
# may get and delete only the item keyed by this instance's ARN, and it is read once and
# deleted at once. Neither it nor the metadata token is ever printed.
# Every failure prints one line, "ephemera-bootstrap: FAILED <step>: <reason>", on the
# console (the EC2 console output) and in the log. Whatever happens, the instance powers
# off at the end, and its shutdown behaviour (terminate) ends it; the reaper cleans up
# records of runners that never came online.
set -euo pipefail

deployment="${EPHEMERA_DEPLOYMENT:-}"
jit_table="${EPHEMERA_JIT_TABLE:-$deployment-jit}"
runner_user="${EPHEMERA_RUNNER_USER:-runner}"
runner_dir="${EPHEMERA_RUNNER_DIR:-/opt/actions-runner}"
runner_version="${EPHEMERA_RUNNER_VERSION:-latest}"
jit_wait="${EPHEMERA_JIT_WAIT:-600}"
jit_pause="${EPHEMERA_JIT_PAUSE:-2}"
jit_tries="${EPHEMERA_JIT_TRIES:-$((jit_wait / 2 + 1))}"
tries="${EPHEMERA_TRIES:-10}"
pause="${EPHEMERA_PAUSE:-3}"
imds="${EPHEMERA_IMDS_URL:-http://169.254.169.254}/latest"
github="${EPHEMERA_GITHUB_URL:-https://github.com}"
os_release="${EPHEMERA_OS_RELEASE:-/etc/os-release}"
console="${EPHEMERA_CONSOLE:-/dev/console}"
log_file="${EPHEMERA_LOG:-/var/log/ephemera-bootstrap.log}"
export PATH="$PATH:/usr/local/bin:/snap/bin"

step=start
failed=""

# To stderr, so that what a function prints is not taken for its answer.
log() {
  printf '%s ephemera-bootstrap: %s\n' "$(date -u +%FT%TZ)" "$*" >&2
}

# One line on the console and on stderr (which the log keeps), then out: the EXIT trap
# powers off.
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
    ( fail "exit status $status" )
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

[ -n "$deployment" ] || fail "EPHEMERA_DEPLOYMENT is not set"
[ "$runner_user" != root ] || fail "the runner must not run as root"

# ---- instance metadata (IMDSv2 only: a session token, then reads with it)
step=imds
token=""
imds_token() {
  token="$(curl -sSf --connect-timeout 2 --max-time 10 -X PUT "$imds/api/token" \
    -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')" && [ -n "$token" ] || {
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
# The token first, on its own, so that its failure says so.
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
instance_id="$(metadata meta-data/instance-id)" || fail "no instance id from IMDS"
region="$(metadata meta-data/placement/region)" || fail "no region from IMDS"
partition="$(metadata meta-data/services/partition)" || fail "no partition from IMDS"
document="$(metadata dynamic/instance-identity/document)" ||
  fail "no instance identity document from IMDS"
unset token
account="$(printf '%s' "$document" | sed -n 's/.*"accountId" *: *"\([0-9]*\)".*/\1/p')"
[ -n "$account" ] || fail "no accountId in the instance identity document"
# The key is what the role's credentials carry as ec2:SourceInstanceARN.
instance_arn="arn:$partition:ec2:$region:$account:instance/$instance_id"
key="{\"instance_arn\":{\"S\":\"$instance_arn\"}}"
log "instance $instance_id in $region ($(uname -m))"

# ---- packages: the runner's dependencies, git, Docker
step=packages
os_id=""
os_version=""
os_like=""
if [ -r "$os_release" ]; then
  os_id="$(sed -n 's/^ID=//p' "$os_release" | tr -d '"')"
  os_version="$(sed -n 's/^VERSION_ID=//p' "$os_release" | tr -d '"')"
  os_like="$(sed -n 's/^ID_LIKE=//p' "$os_release" | tr -d '"')"
fi
case "$os_id $os_like" in
  amzn* | *fedora* | *rhel*) family=dnf ;;
  ubuntu* | debian* | *debian*) family=apt ;;
  *) fail "unsupported OS '$os_id $os_version' in $os_release (Amazon Linux 2023 or Ubuntu)" ;;
esac
log "installing the runner's dependencies, git and Docker on $os_id $os_version ($family)"
if [ "$family" = dnf ]; then
  # The runner's installdependencies.sh does not know Amazon Linux 2023: its list here.
  retry dnf install -y libicu lttng-ust openssl-libs krb5-libs zlib git docker tar gzip \
    shadow-utils sudo || fail "dnf install failed $tries times"
else
  export DEBIAN_FRONTEND=noninteractive
  case "$os_version" in
    22.04) icu=libicu70 ;;
    24.04) icu=libicu74 ;;
    *) icu="" ;; # installdependencies.sh picks one
  esac
  # cloud-init and unattended-upgrades hold the dpkg lock at boot: wait for it.
  apt_get() { apt-get -o DPkg::Lock::Timeout=300 -q "$@"; }
  retry apt_get update || fail "apt-get update failed $tries times"
  # shellcheck disable=SC2086 # $icu is one package name or none
  retry apt_get install -y --no-install-recommends ca-certificates curl tar git \
    docker.io sudo libkrb5-3 zlib1g $icu || fail "apt-get install failed $tries times"
fi
if ! command -v aws >/dev/null 2>&1; then
  # Ubuntu images have no AWS CLI; its snap is AWS's documented install.
  step=aws-cli
  timeout 600 snap wait system seed.loaded || true
  retry snap install aws-cli --classic || fail "could not install the AWS CLI"
fi

step=runner-user
if ! id "$runner_user" >/dev/null 2>&1; then
  useradd --create-home --shell /bin/bash "$runner_user" ||
    fail "could not create the user $runner_user"
fi
step=docker
systemctl enable --now docker || fail "could not start Docker"
usermod -aG docker "$runner_user" || fail "could not add $runner_user to the docker group"

# ---- the Actions runner: preinstalled, or downloaded
step=runner-download
if [ -x "$runner_dir/run.sh" ]; then
  log "using the runner preinstalled in $runner_dir (it updates itself if GitHub asks)"
else
  case "$(uname -m)" in
    aarch64 | arm64) arch=arm64 ;;
    x86_64) arch=x64 ;;
    *) fail "unsupported machine $(uname -m)" ;;
  esac
  if [ "$runner_version" = latest ]; then
    # The release page redirects to the newest tag; no API call, no rate limit.
    latest_url() {
      curl -sSfL --connect-timeout 5 --max-time 60 -o /dev/null -w '%{url_effective}' \
        "$github/actions/runner/releases/latest"
    }
    latest="$(retry latest_url)" || fail "could not find the latest runner release"
    runner_version="${latest##*/v}"
    case "$runner_version" in
      [0-9]*.[0-9]*.[0-9]*) ;;
      *) fail "the latest runner release is not a version: '$runner_version'" ;;
    esac
  fi
  url="$github/actions/runner/releases/download/v$runner_version/actions-runner-linux-$arch-$runner_version.tar.gz"
  log "downloading the Actions runner $runner_version ($arch)"
  mkdir -p "$runner_dir"
  tarball="$runner_dir.tar.gz"
  retry curl -sSfL --connect-timeout 5 --max-time 600 -o "$tarball" "$url" ||
    fail "could not download $url"
  tar -xzf "$tarball" -C "$runner_dir" || fail "could not unpack $url"
  rm -f "$tarball"
fi
if [ "$family" = apt ] && [ -x "$runner_dir/bin/installdependencies.sh" ]; then
  # The runner's own list for Ubuntu (lttng-ust, OpenSSL, Kerberos, zlib, an ICU).
  step=runner-dependencies
  if ! retry "$runner_dir/bin/installdependencies.sh"; then
    [ -n "$icu" ] || fail "installdependencies.sh failed, and no ICU is known for $os_id $os_version"
    log "installdependencies.sh failed; going on with $icu and the packages above"
  fi
fi
chown -R "$runner_user:" "$runner_dir" || fail "could not give $runner_dir to $runner_user"

# ---- the JIT config: read once, deleted at once
step=jit-config
log "waiting for the JIT config of $instance_arn in $jit_table"
jit_config=""
deadline=$((SECONDS + jit_wait))
for ((i = 1; i <= jit_tries; i++)); do
  # An absent item prints None.
  if jit_config="$(aws dynamodb get-item --region "$region" --table-name "$jit_table" \
    --key "$key" --consistent-read --projection-expression jit_config \
    --query Item.jit_config.S --output text 2>/dev/null)" &&
    [ -n "$jit_config" ] && [ "$jit_config" != None ]; then
    break
  fi
  jit_config=""
  if [ "$SECONDS" -ge "$deadline" ] || [ "$i" -eq "$jit_tries" ]; then
    break
  fi
  if [ $((i % 10)) -eq 1 ]; then
    log "no JIT config yet (attempt $i of $jit_tries)"
  fi
  sleep "$jit_pause"
done
[ -n "$jit_config" ] ||
  fail "no JIT config in $jit_table after $i attempts and ${SECONDS}s (limit ${jit_wait}s)"
# One use only: nobody may read it again, not even this instance.
delete_jit() {
  aws dynamodb delete-item --region "$region" --table-name "$jit_table" --key "$key" \
    >/dev/null
}
retry delete_jit || log "could not delete the JIT config of $instance_arn (the reaper will)"

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
