# The two things a boot fetches, and how each can fail. The JIT config: a signed
# DynamoDB GetItem, whose AWS error prints its code on the console at once (retried only
# while the item is absent, throttled or the service fails). The runner: from GitHub (a
# GHES-shaped host here: its API under /api/v3) or the deployment's bucket, its SHA-256
# checked every time against the pinned or published sum.

import re
import time
import unittest

import harness
from fakes import (
    ACCESS_DENIED,
    BUCKET_PREFIX,
    EXPIRED,
    LATEST,
    ROLE,
    TABLE,
    THROTTLED,
    UNAVAILABLE,
    runner_tarball,
)


class JitConfigRead(harness.BootstrapHarness):
    def test_access_denied_prints_its_code_on_the_first_attempt(self):
        self.world.dynamo_answer = ACCESS_DENIED
        self.put_jit()
        started = time.monotonic()
        status, output = self.run_script("al2023", jit_pause=30)
        self.assert_failed(status, "jit-config", "AccessDeniedException: User: arn:aws:sts::")
        self.assertEqual(self.aws_calls(), ["get-item AccessDeniedException"], "one attempt, no retry")
        self.assertLess(time.monotonic() - started, 25, "no pause before failing")
        self.assertIsNone(self.runner())
        self.assertTrue(self.jit_config_left())

    def test_a_missing_table_prints_its_code_on_the_first_attempt(self):
        self.dynamo.delete_table(TableName=TABLE)
        status, output = self.run_script("al2023")
        self.assert_failed(status, "jit-config", "ResourceNotFoundException")
        self.assertEqual(self.aws_calls(), ["get-item ResourceNotFoundException"])
        self.assertIsNone(self.runner())

    def test_a_request_signed_with_other_keys_is_refused(self):
        self.world.imds_secret_key = "not-the-role-secret"
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assert_failed(status, "jit-config", "InvalidSignatureException: signature does not match")
        # The failed boot's log shipment, signed with the same wrong keys, is refused too.
        self.assertEqual(
            self.world.bad_signatures,
            ["get-item: signature does not match", "CreateLogStream: signature does not match"],
        )
        self.assertIsNone(self.runner())

    def test_throttling_is_ridden_out(self):
        self.world.dynamo_errors = [THROTTLED, THROTTLED]
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        self.assertEqual(self.aws_calls()[:3], ["get-item ThrottlingException"] * 2 + ["get-item item"])
        self.assertIn("jit-config: ThrottlingException: Rate exceeded (HTTP 400) (attempt 1)", output)
        self.assert_ran_once_and_config_removed()

    def test_a_service_fault_is_ridden_out(self):
        self.world.dynamo_errors = [UNAVAILABLE]
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        self.assertEqual(self.aws_calls()[:2], ["get-item ServiceUnavailableException", "get-item item"])
        self.assertIn("(HTTP 503)", output)
        self.assert_ran_once_and_config_removed()

    def test_expired_credentials_are_read_again_from_imds(self):
        self.world.dynamo_errors = [EXPIRED]
        self.put_jit()
        # No log shipping: it reads the credentials too.
        status, output = self.run_script("al2023", log_group="")
        self.assertEqual(status, 0, output)
        self.assertEqual(self.aws_calls()[:2], ["get-item ExpiredTokenException", "get-item item"])
        reads = [p for m, p, s in self.world.requests if p == f"/latest/meta-data/iam/security-credentials/{ROLE}"]
        self.assertEqual(len(reads), 2, "the role's credentials read again")
        self.assert_ran_once_and_config_removed()

    def test_the_read_leaves_a_tombstone_with_its_time_and_no_config(self):
        self.put_jit()
        before = int(time.time())
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        self.assertEqual(self.aws_calls(), ["get-item item", "update-item ok"])
        tombstone = self.jit_item()
        self.assertEqual(sorted(tombstone), ["instance_arn", "jit_read_at", "runner"])
        self.assertGreaterEqual(int(tombstone["jit_read_at"]["N"]), before)
        self.assert_ran_once_and_config_removed()

    def test_an_item_deleted_before_the_stamp_is_not_made_again(self):
        self.put_jit()
        key = {"instance_arn": {"S": harness.ARN}}
        self.world.before_update = lambda: self.dynamo.delete_item(TableName=TABLE, Key=key)
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        self.assertEqual(
            self.aws_calls(), ["get-item item", "update-item ConditionalCheckFailedException"], "gone: not retried"
        )
        self.assertIsNone(self.jit_item(), "the stamp made no item")
        self.assertEqual(self.runner()["args"], ["--jitconfig", self.jit])


class RunnerDownload(harness.BootstrapHarness):
    def tarball_path(self, arch="x64"):
        return f"/actions/runner/releases/download/v{LATEST}/actions-runner-linux-{arch}-{LATEST}.tar.gz"

    def test_the_sum_comes_from_the_release_notes_on_the_ghes_api(self):
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        self.assertEqual(
            self.network_fetches(),
            [f"/api/v3/repos/actions/runner/releases/tags/v{LATEST}", self.tarball_path()],
        )
        self.assertIn(f"(SHA-256 {self.world.sums['x64']})", output)
        self.assert_ran_once_and_config_removed()

    def test_the_sum_is_found_in_release_notes_with_escaped_markup(self):
        self.world.escape_html = True
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        self.assertIn(f"(SHA-256 {self.world.sums['x64']})", output)
        self.assert_ran_once_and_config_removed()

    def test_a_checksum_mismatch_fails_the_boot_named(self):
        # Not the tarball whose sum was published.
        self.world.tarballs["x64"] = runner_tarball(extra=[("bin/implant.sh", "#!/bin/bash\n")])
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assert_failed(status, "runner-download", "checksum mismatch for http://")
        self.assertIn(self.world.sums["x64"], self.console_lines()[0])
        self.assertFalse((self.tmp / "actions-runner/run.sh").exists(), "nothing unpacked")
        self.assertFalse((self.tmp / "actions-runner.tar.gz").exists(), "nothing left behind")
        self.assertIsNone(self.runner())
        self.assertTrue(self.jit_config_left())

    def test_a_pinned_sum_is_used_without_asking_github(self):
        self.put_jit()
        status, output = self.run_script("al2023", runner_sha256_x64=self.world.sums["x64"].upper())
        self.assertEqual(status, 0, output)
        self.assertEqual(self.network_fetches(), [self.tarball_path()])
        self.assert_ran_once_and_config_removed()

    def test_a_pinned_sum_that_differs_fails_the_boot_named(self):
        self.put_jit()
        status, output = self.run_script("al2023", runner_sha256_x64="0" * 64)
        self.assert_failed(status, "runner-download", "checksum mismatch")
        self.assertIn("EPHEMERA_RUNNER_SHA256_X64", self.console_lines()[0])
        self.assertIsNone(self.runner())

    def test_no_published_sum_fails_the_boot(self):
        del self.world.sums["x64"]
        status, output = self.run_script("al2023")
        self.assert_failed(status, "runner-download", "no published SHA-256 for actions-runner-linux-x64")
        self.assertEqual(self.downloads(), [], "never downloaded unverifiable")

    def test_latest_with_no_runner_in_the_image_takes_the_script_pin_without_a_lookup(self):
        pin = re.search(r"runner_version=([0-9]+\.[0-9]+\.[0-9]+)$", harness.SCRIPT.read_text(), re.M)[1]
        self.world.versions.add(pin)
        self.put_jit()
        status, output = self.run_script("al2023", arch="aarch64", runner_version="latest")
        self.assertEqual(status, 0, output)
        self.assertEqual(
            self.network_fetches(),
            [
                f"/api/v3/repos/actions/runner/releases/tags/v{pin}",
                f"/actions/runner/releases/download/v{pin}/actions-runner-linux-arm64-{pin}.tar.gz",
            ],
            "no lookup of the newest release",
        )
        self.assert_ran_once_and_config_removed()

    def put_in_bucket(self, arch="x64", published=None):
        name = f"actions-runner-linux-{arch}-{LATEST}.tar.gz"
        self.world.bucket[name] = self.world.tarballs[arch]
        self.world.bucket[name + ".sha256"] = f"{published or self.world.sums[arch]}  {name}\n".encode()
        return name

    def test_the_deployment_bucket_serves_the_runner_and_its_sum_signed(self):
        name = self.put_in_bucket()
        self.put_jit()
        status, output = self.run_script("al2023", runner_bucket_url=self.base + BUCKET_PREFIX + "/")
        self.assertEqual(status, 0, output)
        self.assertEqual(
            self.network_fetches(), [f"{BUCKET_PREFIX}/{name}.sha256", f"{BUCKET_PREFIX}/{name}"], "nothing from GitHub"
        )
        self.assertEqual(self.world.bad_signatures, [])
        self.assert_ran_once_and_config_removed()

    def test_install_from_the_bucket_signs_with_the_build_instance_role(self):
        self.put_in_bucket()
        status, output = self.run_script("ubuntu2404", "install", runner_bucket_url=self.base + BUCKET_PREFIX)
        self.assertEqual(status, 0, output)
        self.assertEqual(self.world.bad_signatures, [])
        self.assertTrue((self.tmp / "actions-runner/run.sh").exists())

    def test_a_bucket_sum_that_differs_fails_the_boot_named(self):
        self.put_in_bucket(published="f" * 64)
        self.put_jit()
        status, output = self.run_script("al2023", runner_bucket_url=self.base + BUCKET_PREFIX)
        self.assert_failed(status, "runner-download", "checksum mismatch")
        self.assertIn(".sha256", self.console_lines()[0])
        self.assertIsNone(self.runner())


if __name__ == "__main__":
    unittest.main()
