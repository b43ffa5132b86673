# The runner bootstrap script (infra/runner/bootstrap.sh) run without a VM: a fake IMDS
# and GitHub on 127.0.0.1, the JIT table on the strict moto emulator, stubs for the
# package managers, systemctl, the user tools, sudo, snap and power-off, a fake
# /etc/os-release per OS family, and a stub runner that records its arguments and user.
#
# Run by `make test-bootstrap` (part of `make test`):
#   .venv/bin/python -m unittest discover -s tests/bootstrap -v
# Every wait is bounded; every server binds 127.0.0.1 only.

import http.server
import io
import json
import os
import secrets
import shutil
import socket
import subprocess
import tarfile
import tempfile
import threading
import time
import unittest
import urllib.request
from pathlib import Path

import boto3

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "infra/runner/bootstrap.sh"
VENV_PYTHON = Path(os.environ.get("MOTO_SERVER", ROOT / ".venv/bin/moto_server")).with_name("python")
REGION = "us-east-1"
ACCOUNT = "123456789012"
INSTANCE = "i-0123456789abcdef0"
ARN = f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/{INSTANCE}"
TABLE = "eph-jit"
RUNNER_USER = "ephtestrunner"
LATEST = "2.330.0"
SCRIPT_TIMEOUT = 120  # seconds a run of the script may take, at most

OS_RELEASE = {
    "al2023": 'NAME="Amazon Linux"\nVERSION="2023"\nID="amzn"\nID_LIKE="fedora"\nVERSION_ID="2023"\n',
    "ubuntu2204": 'NAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\nID_LIKE=debian\n',
    "ubuntu2404": 'NAME="Ubuntu"\nVERSION_ID="24.04"\nID=ubuntu\nID_LIKE=debian\n',
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- fake IMDS and GitHub


class World:
    """What the fake endpoints answer, and what they were asked."""

    def __init__(self):
        self.token = "imds-token-" + secrets.token_hex(16)
        self.token_failures = 0  # the next N token requests answer 500
        self.read_failures = 0  # the next N metadata reads answer 500
        self.lock = threading.Lock()
        self.requests = []  # (method, path, status)
        self.tarballs = {}  # arch -> bytes


class Handler(http.server.BaseHTTPRequestHandler):
    world: World = None

    def log_message(self, *args):
        pass

    def answer(self, status, body=b"", headers=()):
        with self.world.lock:
            self.world.requests.append((self.command, self.path, status))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self):
        if self.path != "/latest/api/token" or not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            return self.answer(400)
        with self.world.lock:
            failing = self.world.token_failures > 0
            if failing:
                self.world.token_failures -= 1
        if failing:
            return self.answer(500, b"hiccup")
        self.answer(200, self.world.token.encode())

    def do_GET(self):
        path = self.path
        if path.startswith("/latest/"):
            if self.headers.get("X-aws-ec2-metadata-token") != self.world.token:
                return self.answer(401)
            with self.world.lock:
                failing = self.world.read_failures > 0
                if failing:
                    self.world.read_failures -= 1
            if failing:
                return self.answer(500, b"hiccup")
            document = json.dumps({"accountId": ACCOUNT, "region": REGION, "instanceId": INSTANCE})
            values = {
                "/latest/meta-data/instance-id": INSTANCE,
                "/latest/meta-data/placement/region": REGION,
                "/latest/meta-data/services/partition": "aws",
                "/latest/dynamic/instance-identity/document": document,
            }
            if path in values:
                return self.answer(200, values[path].encode())
            return self.answer(404)
        if path == "/actions/runner/releases/latest":
            return self.answer(302, headers=[("Location", f"/actions/runner/releases/tag/v{LATEST}")])
        if path == f"/actions/runner/releases/tag/v{LATEST}":
            return self.answer(200, b"release page")
        prefix = f"/actions/runner/releases/download/v{LATEST}/actions-runner-linux-"
        if path.startswith(prefix) and path.endswith(f"-{LATEST}.tar.gz"):
            arch = path[len(prefix) : -len(f"-{LATEST}.tar.gz")]
            if arch in self.world.tarballs:
                return self.answer(200, self.world.tarballs[arch])
        self.answer(404)


RUN_SH = """#!/bin/bash
# Stub Actions runner: records its arguments, the user sudo ran it as, and where.
{
  printf 'user=%s\\n' "${STUB_RAN_AS:-}"
  printf 'cwd=%s\\n' "$PWD"
  printf 'arg=%s\\n' "$@"
} >"$STUB_DIR/runner.log"
exit "${STUB_RUNNER_EXIT:-0}"
"""
INSTALL_DEPENDENCIES = """#!/bin/bash
# Stub of the runner's bin/installdependencies.sh.
echo installdependencies >>"$STUB_DIR/calls.log"
"""


def runner_tarball():
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in [
            ("run.sh", RUN_SH),
            ("config.sh", "#!/bin/bash\nexit 0\n"),
            ("bin/installdependencies.sh", INSTALL_DEPENDENCIES),
        ]:
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o755
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


# ---------------------------------------------------------------- stubs

STUB = """#!/bin/bash
# Stub: records the call (no arguments after a --jitconfig) and succeeds.
echo "$(basename "$0") $*" >>"$STUB_DIR/calls.log"
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
SNAP = """#!/bin/bash
# Stub snap: `snap install aws-cli` puts the aws stub on PATH.
echo "snap $*" >>"$STUB_DIR/calls.log"
if [ "${1:-}" = install ] && [ "${2:-}" = aws-cli ]; then
  cp "$STUB_DIR/aws-cli" "$STUB_DIR/late-bin/aws"
fi
"""
AWS = """#!{python}
# Stub of the AWS CLI's `dynamodb get-item` / `delete-item`, against the emulator
# (AWS_ENDPOINT_URL), printing what the CLI prints; records each call's outcome, never
# the item.
import json, os, sys
import boto3

args = sys.argv[1:]
service, op, rest = args[0], args[1], args[2:]
opts, flags = {{}}, set()
i = 0
while i < len(rest):
    if i + 1 < len(rest) and not rest[i + 1].startswith("--"):
        opts[rest[i]] = rest[i + 1]
        i += 2
    else:
        flags.add(rest[i])
        i += 1
log = open(os.path.join(os.environ["STUB_DIR"], "aws.log"), "a")
client = boto3.client("dynamodb", region_name=opts["--region"], endpoint_url=os.environ["AWS_ENDPOINT_URL"])
try:
    if (service, op) == ("dynamodb", "get-item"):
        answer = client.get_item(
            TableName=opts["--table-name"],
            Key=json.loads(opts["--key"]),
            ConsistentRead="--consistent-read" in flags,
            ProjectionExpression=opts["--projection-expression"],
        )
        assert opts["--query"] == "Item.jit_config.S" and opts["--output"] == "text"
        value = answer.get("Item", {{}}).get("jit_config", {{}}).get("S")
        log.write("get-item " + ("item" if value else "none") + "\\n")
        print(value if value else "None")
    elif (service, op) == ("dynamodb", "delete-item"):
        client.delete_item(TableName=opts["--table-name"], Key=json.loads(opts["--key"]))
        log.write("delete-item ok\\n")
    else:
        log.write("unexpected " + service + " " + op + "\\n")
        sys.exit(252)
except Exception as err:
    log.write(op + " error " + type(err).__name__ + "\\n")
    print("An error occurred: " + type(err).__name__, file=sys.stderr)
    sys.exit(254)
"""


# ---------------------------------------------------------------- the harness


class BootstrapScript(unittest.TestCase):
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
        cls.dynamo = boto3.client(
            "dynamodb",
            region_name=REGION,
            endpoint_url=cls.moto_url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

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
        self.world = World()
        self.world.tarballs = {"x64": runner_tarball(), "arm64": runner_tarball()}
        handler = type("BoundHandler", (Handler,), {"world": self.world})
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server_thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.server_thread.start()
        self.tmp = Path(tempfile.mkdtemp(prefix="ephemera-bootstrap-"))
        self.stubs = self.tmp / "stubs"
        (self.stubs / "late-bin").mkdir(parents=True)
        for name in ["dnf", "apt-get", "systemctl", "poweroff", "shutdown", "useradd", "usermod", "chown"]:
            self.stub(name, STUB)
        self.stub("sudo", SUDO)
        self.stub("uname", UNAME)
        self.stub("snap", SNAP)
        self.stub("aws-cli", AWS.format(python=VENV_PYTHON))
        (self.stubs / "calls.log").touch()
        (self.stubs / "aws.log").touch()
        self.console = self.tmp / "console"
        self.console.touch()

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

    def jit_item_left(self):
        return "Item" in self.dynamo.get_item(TableName=TABLE, Key={"instance_arn": {"S": ARN}}, ConsistentRead=True)

    def run_script(self, os_family, aws_on_path=True, arch="x86_64", runner_exit=0, **settings):
        """Runs bootstrap.sh; returns (exit status, everything it printed)."""
        (self.tmp / "os-release").write_text(OS_RELEASE[os_family])
        if aws_on_path:
            shutil.copy(self.stubs / "aws-cli", self.stubs / "aws")
        base = f"http://127.0.0.1:{self.server.server_address[1]}"
        env = {
            "PATH": f"{self.stubs}:{self.stubs / 'late-bin'}:/usr/bin:/bin",
            "HOME": str(self.tmp),
            "LANG": "C.UTF-8",
            "EPHEMERA_DEPLOYMENT": "eph",
            "EPHEMERA_JIT_TABLE": TABLE,
            "EPHEMERA_RUNNER_USER": RUNNER_USER,
            "EPHEMERA_RUNNER_DIR": str(self.tmp / "actions-runner"),
            "EPHEMERA_RUNNER_VERSION": "latest",
            "EPHEMERA_IMDS_URL": base,
            "EPHEMERA_GITHUB_URL": base,
            "EPHEMERA_OS_RELEASE": str(self.tmp / "os-release"),
            "EPHEMERA_CONSOLE": str(self.console),
            "EPHEMERA_LOG": str(self.tmp / "bootstrap.log"),
            "EPHEMERA_TRIES": "5",
            "EPHEMERA_PAUSE": "0.1",
            "EPHEMERA_JIT_WAIT": "30",
            "EPHEMERA_JIT_TRIES": "20",
            "EPHEMERA_JIT_PAUSE": "0.2",
            "AWS_ENDPOINT_URL": self.moto_url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "STUB_DIR": str(self.stubs),
            "STUB_ARCH": arch,
            "STUB_RUNNER_EXIT": str(runner_exit),
        }
        env.update({f"EPHEMERA_{k.upper()}": str(v) for k, v in settings.items()})
        done = subprocess.run(
            ["bash", str(SCRIPT)],
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

    def aws_calls(self):
        return (self.stubs / "aws.log").read_text().splitlines()

    def runner(self):
        path = self.stubs / "runner.log"
        if not path.exists():
            return None
        lines = path.read_text().splitlines()
        return {
            "user": lines[0].removeprefix("user="),
            "cwd": lines[1].removeprefix("cwd="),
            "args": [line.removeprefix("arg=") for line in lines[2:]],
        }

    def console_lines(self):
        return self.console.read_text().splitlines()

    def assert_no_secret(self, output):
        """Neither the JIT config nor the IMDS token in anything the script printed or
        logged, or in any stub's record (the stub runner's own record aside)."""
        texts = {"output": output, "console": self.console.read_text()}
        log = self.tmp / "bootstrap.log"
        if log.exists():
            texts["log"] = log.read_text()
        for name in ["calls.log", "aws.log"]:
            texts[name] = (self.stubs / name).read_text()
        for where, text in texts.items():
            self.assertNotIn(self.jit, text, f"the JIT config in the {where}")
            self.assertNotIn(self.jit[:40], text, f"part of the JIT config in the {where}")
            self.assertNotIn(self.world.token, text, f"the IMDS token in the {where}")

    def assert_powered_off_once(self):
        offs = [c for c in self.calls() if c.split()[0] in ("poweroff", "shutdown")]
        self.assertEqual(offs, ["poweroff "], self.calls())

    def assert_ran_once_and_deleted(self):
        runner = self.runner()
        self.assertIsNotNone(runner, "the runner did not start")
        self.assertEqual(runner["user"], RUNNER_USER, "the runner ran as the runner user")
        self.assertNotEqual(runner["user"], "root")
        self.assertEqual(runner["args"], ["--jitconfig", self.jit])
        self.assertEqual(runner["cwd"], str(self.tmp / "actions-runner"))
        gets = self.aws_calls()
        self.assertEqual(gets.count("get-item item"), 1, gets)
        self.assertEqual(gets.count("delete-item ok"), 1, gets)
        self.assertFalse(self.jit_item_left(), "the JIT item was deleted")
        self.assertIn(f"sudo -u {RUNNER_USER} ./run.sh", self.calls())

    def assert_docker_for_the_runner_user(self):
        calls = self.calls()
        self.assertIn(f"useradd --create-home --shell /bin/bash {RUNNER_USER}", calls)
        self.assertIn("systemctl enable --now docker", calls)
        self.assertIn(f"usermod -aG docker {RUNNER_USER}", calls)
        # Docker and its group before the runner starts.
        self.assertLess(calls.index(f"usermod -aG docker {RUNNER_USER}"), calls.index(f"sudo -u {RUNNER_USER} ./run.sh"))

    def assert_failed(self, status, step, reason):
        self.assertNotEqual(status, 0)
        lines = [line for line in self.console_lines() if line.startswith("ephemera-bootstrap: FAILED ")]
        self.assertEqual(len(lines), 1, self.console_lines())
        self.assertTrue(lines[0].startswith(f"ephemera-bootstrap: FAILED {step}: "), lines[0])
        self.assertIn(reason, lines[0])
        self.assert_powered_off_once()

    def downloads(self):
        return [p for m, p, s in self.world.requests if "/releases/download/" in p and s == 200]

    # ---- the cases

    def test_amazon_linux_2023_x86_64(self):
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        dnf = [c for c in self.calls() if c.startswith("dnf ")]
        self.assertEqual(len(dnf), 1, self.calls())
        for package in ["libicu", "lttng-ust", "openssl-libs", "krb5-libs", "zlib", "git", "docker"]:
            self.assertIn(f" {package} ", dnf[0] + " ")
        self.assertFalse([c for c in self.calls() if c.startswith("apt-get")])
        # installdependencies.sh does not know Amazon Linux 2023: not run there.
        self.assertNotIn("installdependencies", self.calls())
        self.assertFalse([c for c in self.calls() if c.startswith("snap")], "AL2023 has the AWS CLI")
        self.assertEqual(self.downloads(), [f"/actions/runner/releases/download/v{LATEST}/actions-runner-linux-x64-{LATEST}.tar.gz"])
        self.assert_docker_for_the_runner_user()
        self.assert_ran_once_and_deleted()
        self.assert_powered_off_once()
        self.assertEqual([l for l in self.console_lines() if "FAILED" in l], [])
        self.assertIn("runner exited with status 0", output)

    def test_amazon_linux_2023_arm64(self):
        self.put_jit()
        status, output = self.run_script("al2023", arch="aarch64")
        self.assertEqual(status, 0, output)
        self.assertEqual(self.downloads(), [f"/actions/runner/releases/download/v{LATEST}/actions-runner-linux-arm64-{LATEST}.tar.gz"])
        self.assert_ran_once_and_deleted()
        self.assert_powered_off_once()

    def check_ubuntu(self, family, icu):
        self.put_jit()
        status, output = self.run_script(family, aws_on_path=False)
        self.assertEqual(status, 0, output)
        calls = self.calls()
        apt = [c for c in calls if c.startswith("apt-get ")]
        self.assertTrue(apt[0].endswith(" update"), apt)
        install = [c for c in apt if " install " in c]
        self.assertEqual(len(install), 1, apt)
        for package in ["git", "docker.io", "libkrb5-3", "zlib1g", icu]:
            self.assertIn(f" {package} ", install[0] + " ")
        self.assertFalse([c for c in calls if c.startswith("dnf")])
        self.assertIn("installdependencies", calls, "the runner's own Ubuntu dependencies")
        self.assertIn("snap install aws-cli --classic", calls, "Ubuntu images have no AWS CLI")
        self.assert_docker_for_the_runner_user()
        self.assert_ran_once_and_deleted()
        self.assert_powered_off_once()

    def test_ubuntu_22_04(self):
        self.check_ubuntu("ubuntu2204", "libicu70")

    def test_ubuntu_24_04(self):
        self.check_ubuntu("ubuntu2404", "libicu74")

    def test_imds_hiccups_are_ridden_out(self):
        self.world.token_failures = 3
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        puts = [s for m, p, s in self.world.requests if m == "PUT"]
        self.assertEqual(puts[:4], [500, 500, 500, 200], puts)
        self.assertIn("imds: token, attempt 3 of 5 failed", output)
        self.assert_ran_once_and_deleted()
        self.assert_powered_off_once()

    def test_metadata_read_hiccups_are_ridden_out_with_a_fresh_token(self):
        self.world.read_failures = 2
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        self.assertIn("imds: reading meta-data/instance-id, attempt 2 of 5 failed", output)
        puts = [s for m, p, s in self.world.requests if m == "PUT"]
        self.assertEqual(puts, [200, 200, 200], "a fresh token after each failed read")
        self.assert_ran_once_and_deleted()
        self.assert_powered_off_once()

    def test_a_preinstalled_runner_is_used_as_is(self):
        with tarfile.open(fileobj=io.BytesIO(runner_tarball())) as tar:
            tar.extractall(self.tmp / "actions-runner", filter="data")
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        self.assertEqual(self.downloads(), [], "nothing downloaded")
        self.assertIn("using the runner preinstalled in", output)
        self.assert_ran_once_and_deleted()
        self.assert_powered_off_once()

    def test_imds_that_never_answers_fails_on_the_console(self):
        self.world.token_failures = 1000
        status, output = self.run_script("al2023")
        self.assert_failed(status, "imds", "no IMDSv2 token")
        puts = [s for m, p, s in self.world.requests if m == "PUT"]
        self.assertEqual(len(puts), 5, "bounded: EPHEMERA_TRIES attempts")
        self.assertIsNone(self.runner())

    def test_a_late_jit_config_is_waited_for(self):
        def put_after_three_misses():
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if self.aws_calls().count("get-item none") >= 3:
                    self.put_jit()
                    return
                time.sleep(0.05)

        late = threading.Thread(target=put_after_three_misses, daemon=True)
        late.start()
        status, output = self.run_script("al2023")
        late.join(timeout=5)
        self.assertEqual(status, 0, output)
        self.assertGreaterEqual(self.aws_calls().count("get-item none"), 3)
        self.assert_ran_once_and_deleted()
        self.assert_powered_off_once()

    def test_a_jit_config_that_never_comes_fails_on_the_console(self):
        started = time.monotonic()
        status, output = self.run_script("al2023", jit_tries=4)
        self.assert_failed(status, "jit-config", "no JIT config in eph-jit after 4 attempts")
        self.assertEqual(self.aws_calls(), ["get-item none"] * 4, "bounded: EPHEMERA_JIT_TRIES reads")
        self.assertIsNone(self.runner())
        self.assertLess(time.monotonic() - started, SCRIPT_TIMEOUT)

    def test_a_jit_wait_is_bounded_in_time_too(self):
        status, output = self.run_script("al2023", jit_wait=1, jit_tries=1000, jit_pause=0.3)
        self.assert_failed(status, "jit-config", "(limit 1s)")
        self.assertLess(len(self.aws_calls()), 1000)
        self.assertIsNone(self.runner())

    def test_a_runner_that_exits_with_an_error_still_powers_off(self):
        self.put_jit()
        status, output = self.run_script("ubuntu2404", runner_exit=3)
        self.assert_failed(status, "runner", "the runner exited with status 3")
        self.assert_ran_once_and_deleted()

    def test_any_other_failing_command_still_says_so_and_powers_off(self):
        self.put_jit()
        # mkdir cannot make the runner's directory: set -e ends the script there.
        status, output = self.run_script("al2023", runner_dir="/proc/ephemera-test/actions-runner")
        self.assert_failed(status, "runner-download", "exit status 1")
        self.assertIsNone(self.runner())

    def test_an_unknown_os_fails_on_the_console(self):
        (self.tmp / "os-release").write_text("ID=plan9\n")
        OS_RELEASE["plan9"] = "ID=plan9\nVERSION_ID=4\n"
        try:
            status, output = self.run_script("plan9")
        finally:
            del OS_RELEASE["plan9"]
        self.assert_failed(status, "packages", "unsupported OS")
        self.assertIsNone(self.runner())

    def test_a_failing_package_install_fails_on_the_console(self):
        self.stub("dnf", '#!/bin/bash\necho "dnf $*" >>"$STUB_DIR/calls.log"\nexit 1\n')
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assert_failed(status, "packages", "dnf install failed 5 times")
        self.assertEqual(len([c for c in self.calls() if c.startswith("dnf ")]), 5)
        self.assertIsNone(self.runner())
        self.assertTrue(self.jit_item_left(), "not read before the host is ready")


if __name__ == "__main__":
    unittest.main()
