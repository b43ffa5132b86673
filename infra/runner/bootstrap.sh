#!/usr/bin/env bash
# ephemera runner bootstrap: the user data of every runner instance.
#
# template.yaml embeds this file verbatim in the launch template, after a line that
# exports the deployment's settings (a test checks that the two copies agree):
#   EPHEMERA_DEPLOYMENT      deployment name
#   EPHEMERA_JIT_TABLE       the DynamoDB table holding JIT configs (default
#                            $EPHEMERA_DEPLOYMENT-jit), one item per instance ARN
#   EPHEMERA_RUNNER_USER     the non-root user the runner runs as (created if missing)
#   EPHEMERA_RUNNER_DIR      where the Actions runner lives; used as is when run.sh is
#                            there already (runner preinstalled in the AMI)
#   EPHEMERA_RUNNER_VERSION  the runner release to download otherwise ("latest" or 2.x.y)
#   EPHEMERA_JIT_WAIT        seconds to wait for the JIT config before giving up
#
# The JIT config comes from the JIT table, never from user data or tags: the instance role
# may get and delete only the item keyed by this instance's ARN, and it is deleted as soon
# as it is read.
# Whatever happens, the instance powers off at the end, and its shutdown behaviour
# (terminate) ends it; the reaper cleans up records of runners that never came online.
set -euo pipefail

deployment="${EPHEMERA_DEPLOYMENT:?EPHEMERA_DEPLOYMENT must be set}"
jit_table="${EPHEMERA_JIT_TABLE:-$deployment-jit}"
runner_user="${EPHEMERA_RUNNER_USER:-runner}"
runner_dir="${EPHEMERA_RUNNER_DIR:-/opt/actions-runner}"
runner_version="${EPHEMERA_RUNNER_VERSION:-latest}"
jit_wait="${EPHEMERA_JIT_WAIT:-600}"
imds="http://169.254.169.254/latest"

log() {
  printf '%s ephemera-bootstrap: %s\n' "$(date -u +%FT%TZ)" "$*"
}

finish() {
  local status=$?
  log "exiting with status $status; powering off"
  # The launch template sets InstanceInitiatedShutdownBehavior=terminate.
  shutdown -h now || poweroff
}
trap finish EXIT

# Everything this script says goes to the console and the system log.
exec > >(tee -a /var/log/ephemera-bootstrap.log) 2>&1

# IMDSv2 only: a session token first, then the metadata with it.
token="$(curl -sSf -X PUT "$imds/api/token" -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')"
metadata() {
  curl -sSf -H "X-aws-ec2-metadata-token: $token" "$imds/meta-data/$1"
}
instance_id="$(metadata instance-id)"
region="$(metadata placement/region)"
partition="$(metadata services/partition)"
account="$(curl -sSf -H "X-aws-ec2-metadata-token: $token" "$imds/dynamic/instance-identity/document" |
  sed -n 's/.*"accountId" *: *"\([0-9]*\)".*/\1/p')"
# The key is what the role's credentials carry as ec2:SourceInstanceARN.
instance_arn="arn:$partition:ec2:$region:$account:instance/$instance_id"
key="{\"instance_arn\":{\"S\":\"$instance_arn\"}}"
log "instance $instance_id in $region, waiting for its JIT config in $jit_table"

# The scaler writes the item just after the launch returns: wait for it, bounded.
jit_config=""
deadline=$((SECONDS + jit_wait))
while [ "$SECONDS" -lt "$deadline" ]; do
  # An absent item prints None.
  if jit_config="$(aws dynamodb get-item --region "$region" --table-name "$jit_table" \
    --key "$key" --consistent-read --projection-expression jit_config \
    --query Item.jit_config.S --output text 2>/dev/null)" &&
    [ -n "$jit_config" ] && [ "$jit_config" != None ]; then
    break
  fi
  jit_config=""
  sleep 2
done
if [ -z "$jit_config" ]; then
  log "no JIT config after ${jit_wait}s; giving up"
  exit 1
fi
# One use only: nobody may read it again, not even this instance.
aws dynamodb delete-item --region "$region" --table-name "$jit_table" --key "$key" ||
  log "could not delete the JIT config of $instance_arn (the reaper will)"

if ! id "$runner_user" >/dev/null 2>&1; then
  useradd --create-home --shell /bin/bash "$runner_user"
fi

if [ ! -x "$runner_dir/run.sh" ]; then
  case "$(uname -m)" in
    aarch64 | arm64) arch=arm64 ;;
    x86_64) arch=x64 ;;
    *)
      log "unsupported machine $(uname -m)"
      exit 1
      ;;
  esac
  if [ "$runner_version" = latest ]; then
    # The release page redirects to the newest tag; no API call, no rate limit.
    latest="$(curl -sSfL -o /dev/null -w '%{url_effective}' \
      https://github.com/actions/runner/releases/latest)"
    runner_version="${latest##*/v}"
  fi
  url="https://github.com/actions/runner/releases/download/v$runner_version/actions-runner-linux-$arch-$runner_version.tar.gz"
  log "downloading the Actions runner $runner_version ($arch)"
  mkdir -p "$runner_dir"
  curl -sSfL --retry 5 "$url" | tar -xz -C "$runner_dir"
  if [ -x "$runner_dir/bin/installdependencies.sh" ]; then
    "$runner_dir/bin/installdependencies.sh" || log "installdependencies.sh failed; trying anyway"
  fi
fi
chown -R "$runner_user:" "$runner_dir"

log "starting the runner as $runner_user"
cd "$runner_dir"
status=0
sudo -u "$runner_user" -H -- ./run.sh --jitconfig "$jit_config" || status=$?
unset jit_config
log "runner exited with status $status"
