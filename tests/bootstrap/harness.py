# The runner bootstrap script (infra/runner/bootstrap.sh) run without a VM: the fake
# endpoints of fakes.py (IMDS, GitHub, the runner bucket, a SigV4-checking DynamoDB front
# on the strict moto emulator, CloudWatch Logs); stubs for the package managers, systemctl, the user tools,
# sudo and power-off; a fake /etc/os-release per OS family; a stub runner that records its
# arguments and user. The script runs with a PATH of the tools a minimal Amazon Linux 2023
# has (no AWS CLI, no snap, no jq, no Python).
#
# The test modules beside it (test_*.py) hold the cases. Run by `make test-bootstrap`:
#   .venv/bin/python -m unittest discover -s tests/bootstrap -v
# Every wait is bounded; every server binds 127.0.0.1 only.

import http.server
import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.request
from pathlib import Path

import boto3
import botocore.config

from fakes import (
    ARN,
    BUCKET,
    BUCKET_PREFIX,
    INSTANCE,
    LATEST,
    PREVIOUS,
    REGION,
    TABLE,
    Handler,
    World,
    runner_tarball,
    sha256,
)


ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "infra/runner/bootstrap.sh"
USER_DATA = ROOT / "infra/user-data.sh"
VENV_PYTHON = Path(os.environ.get("MOTO_SERVER", ROOT / ".venv/bin/moto_server")).with_name("python")
RUNNER_USER = "ephtestrunner"
SCRIPT_TIMEOUT = 120  # seconds a run of the script may take, at most

# What a minimal AL2023 has that the script may use; the stubs come first on PATH.
MINIMAL_TOOLS = [
    "bash", "basename", "cat", "chmod", "cp", "curl", "cut", "date", "grep", "gzip", "head",
    "id", "ls", "mkdir", "mktemp", "mv", "rm", "sed", "sha256sum", "sleep", "tar", "tee",
    "timeout", "tr",
]  # fmt: skip
# What calls a package manager, and what downloads.
PACKAGE_MANAGERS = ("dnf", "apt-get", "snap", "installdependencies")
DOWNLOAD_PATHS = ("/actions/runner/releases/", "/api/v3/", BUCKET_PREFIX + "/")

OS_RELEASE = {
    "al2023": 'NAME="Amazon Linux"\nVERSION="2023"\nID="amzn"\nID_LIKE="fedora"\nVERSION_ID="2023"\n',
    "ubuntu2204": 'NAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\nID_LIKE=debian\n',
    "ubuntu2404": 'NAME="Ubuntu"\nVERSION_ID="24.04"\nID=ubuntu\nID_LIKE=debian\n',
}
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- stubs

STUB = """#!/bin/bash
# Stub: records the call (no arguments after a --jitconfig) and succeeds.
echo "$(basename "$0") $*" >>"$STUB_DIR/calls.log"
"""
# A package manager that fails when asked for any package named in $STUB_MISSING.
PACKAGE_MANAGER = """#!/bin/bash
# Stub package manager: records the call; fails when a package it lacks is asked for.
echo "$(basename "$0") $*" >>"$STUB_DIR/calls.log"
for arg in "$@"; do
  for missing in ${STUB_MISSING:-}; do
    if [ "$arg" = "$missing" ]; then echo "No match for argument: $arg" >&2; exit 1; fi
  done
done
"""
SUDO = """#!/bin/bash
# Stub sudo: runs the command as if as -u USER, recording the user and the command only.
user=""
while [ $# -gt 0 ]; do
  case "$1" in
    -u) user="$2"; shift 2 ;;
    -H) shift ;;
    --) shift; break ;;
    *) break ;;
  esac
done
echo "sudo -u $user $1" >>"$STUB_DIR/calls.log"
export STUB_RAN_AS="$user" USER="$user" LOGNAME="$user"
exec "$@"
"""
UNAME = """#!/bin/bash
# Stub uname: the machine the test names, everything else from the real one.
if [ "${1:-}" = -m ] && [ -n "${STUB_ARCH:-}" ]; then echo "$STUB_ARCH"; exit 0; fi
exec /bin/uname "$@"
"""


# ---------------------------------------------------------------- the harness


class BootstrapHarness(unittest.TestCase):
    """Starts the emulator once per class and the fakes once per test; runs the script."""

    @classmethod
    def setUpClass(cls):
        cls.moto_port = free_port()
        cls.moto = subprocess.Popen(
            [str(VENV_PYTHON), "-m", "strict_moto", "-H", "127.0.0.1", "-p", str(cls.moto_port)],
            env={**os.environ, "PYTHONPATH": str(ROOT / "tests/src")},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        cls.moto_url = f"http://127.0.0.1:{cls.moto_port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(cls.moto_url + "/strict-api/settings", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or cls.moto.poll() is not None:
                    cls.moto.kill()
                    raise RuntimeError("the strict moto emulator did not start within 60 s")
                time.sleep(0.1)
        operator = dict(
            region_name=REGION, endpoint_url=cls.moto_url, aws_access_key_id="testing", aws_secret_access_key="testing"
        )
        cls.dynamo = boto3.client("dynamodb", **operator)
        cls.s3 = boto3.client("s3", config=botocore.config.Config(s3={"addressing_style": "path"}), **operator)

    @classmethod
    def tearDownClass(cls):
        cls.moto.terminate()
        try:
            cls.moto.wait(timeout=10)
        except subprocess.TimeoutExpired:
            cls.moto.kill()

    def setUp(self):
        urllib.request.urlopen(urllib.request.Request(self.moto_url + "/moto-api/reset", method="POST"), timeout=10)
        self.dynamo.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "instance_arn", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "instance_arn", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        # A JIT config is 4-6 KB of base64.
        self.jit = "jit-secret-" + secrets.token_urlsafe(4500)
        self.world = World(self.moto_url)
        # IMDS hands the instance its runner role's credentials: the strict layer
        # evaluates every call signed with them against template.yaml's RunnerRole, for
        # this instance (ec2:SourceInstanceARN).
        self.register_role()
        # GitHub has two releases; the deployment's bucket holds the newest, as the
        # scheduled sync leaves it.
        self.s3.create_bucket(Bucket=BUCKET)
        for arch in ("x64", "arm64"):
            self.world.publish(arch, runner_tarball())
            self.world.publish(arch, runner_tarball(version=PREVIOUS), version=PREVIOUS)
            self.put_in_bucket(arch)
        handler = type("BoundHandler", (Handler,), {"world": self.world})
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server_thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.server_thread.start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.tmp = Path(tempfile.mkdtemp(prefix="ephemera-bootstrap-"))
        self.stubs = self.tmp / "stubs"
        self.stubs.mkdir()
        for name in ["systemctl", "poweroff", "shutdown", "useradd", "usermod", "chown", "snap", "aws"]:
            self.stub(name, STUB)
        # snap and aws exist as stubs only to show that nothing calls them; they are not on PATH.
        for name in ["snap", "aws"]:
            (self.stubs / name).rename(self.tmp / name)
        for name in ["dnf", "apt-get"]:
            self.stub(name, PACKAGE_MANAGER)
        self.stub("sudo", SUDO)
        self.stub("uname", UNAME)
        self.minimal_bin = self.tmp / "minimal-bin"
        self.minimal_bin.mkdir()
        for tool in MINIMAL_TOOLS:
            found = shutil.which(tool, path="/usr/bin:/bin")
            if found is None:
                raise RuntimeError(f"{tool} is not on this machine")
            (self.minimal_bin / tool).symlink_to(found)
        (self.stubs / "calls.log").touch()
        (self.tmp / "sudoers.d").mkdir()
        # cloud-init's scripts/per-boot (a stopped pool's host leaves its resume there) and
        # the host's /tmp.
        (self.tmp / "per-boot").mkdir()
        (self.tmp / "tmp").mkdir()
        self.console = self.tmp / "console"
        self.console.touch()

    def register_role(self, template="template.yaml", role="RunnerRole", parameters=None):
        """Registers the role (RunnerRole by default) the strict layer evaluates every call signed
        with IMDS's keys as."""
        principal = {
            "access_key_id": self.world.key_id,
            "template": template,
            "role": role,
            "parameters": parameters or {"DeploymentName": "eph"},
            # No CloudFormation stack in moto: the bucket's name, as the stack would give it.
            "resources": {"RunnerBucket": BUCKET},
            "source_instance": INSTANCE,
        }
        registration = urllib.request.Request(
            self.moto_url + "/strict-api/iam/principals",
            data=json.dumps(principal).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(registration, timeout=10).close()

    def put_in_bucket(self, arch="x64", version=LATEST, sum=None, latest=True):
        """What the sync writes for a release: the tarball, its .sha256, then latest-<arch>
        (`sum` instead of the tarball's own, to publish a wrong one)."""
        name = f"actions-runner-linux-{arch}-{version}.tar.gz"
        tarball = self.world.tarball(version, arch)
        sum = sum or sha256(tarball)
        self.s3.put_object(Bucket=BUCKET, Key=f"runner/{name}", Body=tarball)
        self.s3.put_object(Bucket=BUCKET, Key=f"runner/{name}.sha256", Body=f"{sum}  {name}\n".encode())
        if latest:
            self.s3.put_object(Bucket=BUCKET, Key=f"runner/latest-{arch}", Body=f"{version} {sum}\n".encode())
        return name

    def tearDown(self):
        self.server.shutdown()
        self.server.server_close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def stub(self, name, text):
        path = self.stubs / name
        path.write_text(text)
        path.chmod(0o755)

    def put_jit(self):
        self.dynamo.put_item(
            TableName=TABLE,
            Item={"instance_arn": {"S": ARN}, "jit_config": {"S": self.jit}, "runner": {"S": "eph-linux-1"}},
        )

    def jit_item(self):
        answer = self.dynamo.get_item(TableName=TABLE, Key={"instance_arn": {"S": ARN}}, ConsistentRead=True)
        return answer.get("Item")

    def jit_config_left(self):
        return "jit_config" in (self.jit_item() or {})

    def script_env(self, arch="x86_64", runner_exit=0, missing=(), diag_lines=0, runner_seconds=0, diag_latin1=False, **settings):
        env = {
            "PATH": f"{self.stubs}:{self.minimal_bin}",
            "HOME": str(self.tmp),
            "LANG": "C.UTF-8",
            "EPHEMERA_DEPLOYMENT": "eph",
            "EPHEMERA_JIT_TABLE": TABLE,
            "EPHEMERA_RUNNER_USER": RUNNER_USER,
            "EPHEMERA_RUNNER_DIR": str(self.tmp / "actions-runner"),
            "EPHEMERA_RUNNER_VERSION": "latest",
            "EPHEMERA_RUNNER_BUCKET_URL": self.base + BUCKET_PREFIX,
            "EPHEMERA_IMDS_URL": self.base,
            "EPHEMERA_GITHUB_URL": self.base,
            "EPHEMERA_DYNAMODB_URL": self.base + "/dynamodb",
            "EPHEMERA_LOGS_URL": self.base + "/logs",
            "EPHEMERA_OS_RELEASE": str(self.tmp / "os-release"),
            "EPHEMERA_CONSOLE": str(self.console),
            "EPHEMERA_LOG": str(self.tmp / "bootstrap.log"),
            # Never the machine's own /etc/sudoers.d.
            "EPHEMERA_SUDOERS_DIR": str(self.tmp / "sudoers.d"),
            "EPHEMERA_PER_BOOT_DIR": str(self.tmp / "per-boot"),
            "TMPDIR": str(self.tmp / "tmp"),
            "EPHEMERA_TRIES": "5",
            "EPHEMERA_PAUSE": "0.1",
            "EPHEMERA_JIT_WAIT": "30",
            "EPHEMERA_JIT_TRIES": "20",
            "EPHEMERA_JIT_PAUSE": "0.2",
            "STUB_DIR": str(self.stubs),
            "STUB_ARCH": arch,
            "STUB_RUNNER_EXIT": str(runner_exit),
            "STUB_MISSING": " ".join(missing),
            "STUB_DIAG_LINES": str(diag_lines),
            "STUB_RUNNER_SECONDS": str(runner_seconds),
            "STUB_DIAG_LATIN1": "1" if diag_latin1 else "",
            # The runner release GitHub's service offers: an older runner updates itself.
            "STUB_SERVER_RUNNER": LATEST,
        }
        env.update({f"EPHEMERA_{k.upper()}": str(v) for k, v in settings.items()})
        return env

    def run_script(self, os_family, *args, script=SCRIPT, **options):
        """Runs bootstrap.sh [args]; returns (exit status, everything it printed)."""
        return self.run_command(os_family, ["bash", str(script), *args], self.script_env(**options))

    def run_command(self, os_family, command, env):
        """Runs a command as a boot runs the script; returns (exit status, everything it printed)."""
        (self.tmp / "os-release").write_text(OS_RELEASE[os_family])
        done = subprocess.run(
            command,
            env=env,
            cwd=self.tmp,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=SCRIPT_TIMEOUT,
        )
        output = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
        self.assert_no_secret(output)
        return done.returncode, output

    # ---- what the runs left behind

    def calls(self):
        return (self.stubs / "calls.log").read_text().splitlines()

    def package_manager_calls(self):
        return [c for c in self.calls() if c.split()[0] in PACKAGE_MANAGERS]

    def aws_calls(self):
        return list(self.world.dynamo)

    def runner(self):
        path = self.stubs / "runner.log"
        if not path.exists():
            return None
        lines = path.read_text().splitlines()
        return {
            "user": lines[0].removeprefix("user="),
            "cwd": lines[1].removeprefix("cwd="),
            "version": lines[2].removeprefix("version="),
            "args": [line.removeprefix("arg=") for line in lines[3:]],
        }

    def stub_curl_version(self, version):
        """A curl that says it is `version` (curl -V) and is the real one otherwise."""
        real = shutil.which("curl", path="/usr/bin:/bin")
        self.stub("curl", f'#!/bin/bash\n[ "$1" != -V ] || {{ echo "curl {version} (x86_64-pc-linux-gnu) libcurl/{version}"; exit 0; }}\nexec {real} "$@"\n')

    def console_lines(self):
        return self.console.read_text().splitlines()

    def user_data_script(self):
        """The script as the launch template's user data holds it (infra/user-data.sh)."""
        path = self.tmp / "user-data.sh"
        path.write_bytes(subprocess.run([str(USER_DATA), "--script"], check=True, capture_output=True).stdout)
        return path

    def downloads(self):
        """The runner tarballs fetched, from GitHub or the bucket."""
        return [p for m, p, s in self.world.requests if p.endswith(".tar.gz") and s == 200]

    def bucket_path(self, name):
        return f"{BUCKET_PREFIX}/{name}"

    def github_download(self, version=LATEST, arch="x64"):
        return f"/actions/runner/releases/download/v{version}/actions-runner-linux-{arch}-{version}.tar.gz"

    def self_updates(self):
        path = self.stubs / "self-updates.log"
        return path.read_text().splitlines() if path.exists() else []

    def network_fetches(self):
        """Every request for the runner, its sums or its release (GitHub and the bucket)."""
        return [p for m, p, s in self.world.requests if p.startswith(DOWNLOAD_PATHS)]

    def shipped(self):
        """The messages put in the instance's log stream, in order."""
        return [message for _, message in self.world.streams.get(INSTANCE, [])]

    def assert_no_secret(self, output):
        """Neither the JIT config, the IMDS token nor the role's keys in anything the script
        printed, logged or shipped to CloudWatch Logs, or in any stub's record (the stub
        runner's own record aside)."""
        texts = {"output": output, "console": self.console.read_text(), "calls.log": "\n".join(self.calls())}
        texts["shipped logs"] = "\n".join(m for stream in self.world.streams.values() for _, m in stream)
        log = self.tmp / "bootstrap.log"
        if log.exists():
            texts["log"] = log.read_text()
        for where, text in texts.items():
            self.assertNotIn(self.jit, text, f"the JIT config in the {where}")
            self.assertNotIn(self.jit[:40], text, f"part of the JIT config in the {where}")
            self.assertNotIn(self.world.token, text, f"the IMDS token in the {where}")
            self.assertNotIn(self.world.secret_key, text, f"the role's secret key in the {where}")
            self.assertNotIn(self.world.session_token[:40], text, f"the role's session token in the {where}")

    def assert_powered_off_once(self):
        offs = [c for c in self.calls() if c.split()[0] in ("poweroff", "shutdown")]
        self.assertEqual(offs, ["poweroff "], self.calls())

    def assert_ran_once_and_config_removed(self):
        runner = self.runner()
        self.assertIsNotNone(runner, "the runner did not start")
        self.assertEqual(runner["user"], RUNNER_USER, "the runner ran as the runner user")
        self.assertNotEqual(runner["user"], "root")
        self.assertEqual(runner["args"], ["--jitconfig", self.jit])
        self.assertEqual(runner["cwd"], str(self.tmp / "actions-runner"))
        gets = self.aws_calls()
        self.assertEqual(gets.count("get-item item"), 1, gets)
        self.assertEqual(gets.count("update-item ok"), 1, gets)
        self.assertEqual(self.world.bad_signatures, [], "every AWS request signed with the role's keys")
        tombstone = self.jit_item()
        self.assertIsNotNone(tombstone, "the item stays, for the reaper to take the read's time")
        self.assertNotIn("jit_config", tombstone, "the JIT config was removed")
        read_at = int(tombstone["jit_read_at"]["N"])
        self.assertLessEqual(abs(read_at - time.time()), 120, "the read's time, epoch seconds")
        self.assertIn(f"sudo -u {RUNNER_USER} ./run.sh", self.calls())

    def assert_docker_for_the_runner_user(self):
        calls = self.calls()
        self.assertIn(f"useradd --create-home --shell /bin/bash {RUNNER_USER}", calls)
        self.assertIn("systemctl enable --now docker", calls)
        self.assertIn(f"usermod -aG docker {RUNNER_USER}", calls)
        # Docker and its group before the runner starts.
        self.assertLess(calls.index(f"usermod -aG docker {RUNNER_USER}"), calls.index(f"sudo -u {RUNNER_USER} ./run.sh"))

    def assert_failed(self, status, step, reason, powers_off=True):
        self.assertNotEqual(status, 0)
        lines = [line for line in self.console_lines() if line.startswith("ephemera-bootstrap: FAILED ")]
        self.assertEqual(len(lines), 1, self.console_lines())
        self.assertTrue(lines[0].startswith(f"ephemera-bootstrap: FAILED {step}: "), lines[0])
        self.assertIn(reason, lines[0])
        if powers_off:
            self.assert_powered_off_once()
