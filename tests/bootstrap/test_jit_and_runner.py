# The two things a boot fetches, and how each can fail. The JIT config: a signed
# DynamoDB GetItem, whose AWS error prints its code on the console at once (retried only
# while the item is absent, throttled or the service fails). The runner: from the
# deployment's bucket (read as the runner role), or with the launch's pinned sum from
# GitHub's release download, its SHA-256 checked every time (test_releases.py has the
# choice between them).

import time
import unittest

import harness
from fakes import (
    ACCESS_DENIED,
    BUCKET,
    BUCKET_PREFIX,
    EXPIRED,
    LATEST,
    PREVIOUS,
    ROLE,
    TABLE,
    THROTTLED,
    UNAVAILABLE,
    runner_tarball,
    sha256,
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

    def pinned(self):
        """Settings with no bucket (the runner from the launch's pin): only the JIT read signs."""
        return dict(runner_bucket_url="", runner_version=LATEST, runner_sha256_x64=self.world.sums["x64"])

    def test_a_request_signed_with_other_keys_is_refused(self):
        self.world.imds_secret_key = "not-the-role-secret"
        self.put_jit()
        status, output = self.run_script("al2023", **self.pinned())
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
        # No log shipping and no bucket: they read the credentials too.
        status, output = self.run_script("al2023", log_group="", **self.pinned())
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
        # A stock image: the runner it downloaded, and how long that took.
        self.assertEqual(
            sorted(tombstone), ["instance_arn", "jit_read_at", "runner", "runner_swap_ms", "runner_version"]
        )
        self.assertEqual(tombstone["runner_version"], {"S": LATEST})
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
    """The runner and its sum from the bucket; the launch's pin when the bucket is not there."""

    def test_a_checksum_mismatch_fails_the_boot_named(self):
        # Not the tarball whose sum the bucket holds.
        self.s3.put_object(
            Bucket=BUCKET,
            Key=f"runner/actions-runner-linux-x64-{LATEST}.tar.gz",
            Body=runner_tarball(extra=[("bin/implant.sh", "#!/bin/bash\n")]),
        )
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assert_failed(status, "runner-download", "checksum mismatch for http://")
        self.assertIn(self.world.sums["x64"], self.console_lines()[0])
        self.assertIn(f"{BUCKET_PREFIX}/latest-x64", self.console_lines()[0], "where the sum came from")
        self.assertFalse((self.tmp / "actions-runner/run.sh").exists(), "nothing unpacked")
        self.assertFalse((self.tmp / "actions-runner.tar.gz").exists(), "nothing left behind")
        self.assertIsNone(self.runner())
        self.assertTrue(self.jit_config_left())

    def test_an_explicit_version_takes_its_sum_from_the_bucket(self):
        name = self.put_in_bucket(version=PREVIOUS, latest=False)
        self.put_jit()
        status, output = self.run_script("al2023", runner_version=PREVIOUS)
        self.assertEqual(status, 0, output)
        self.assertEqual(
            self.network_fetches(),
            [self.bucket_path("latest-x64"), self.bucket_path(f"{name}.sha256"), self.bucket_path(name)],
        )
        self.assertEqual(self.runner()["version"], PREVIOUS)
        self.assert_ran_once_and_config_removed()

    def test_an_explicit_version_the_bucket_lacks_takes_the_pinned_sum_and_githubs_download(self):
        self.put_jit()
        pinned = sha256(self.world.tarball(PREVIOUS, "x64"))
        status, output = self.run_script("al2023", runner_version=PREVIOUS, runner_sha256_x64=pinned)
        self.assertEqual(status, 0, output)
        self.assertEqual(self.downloads(), [self.github_download(PREVIOUS)], "a release download")
        self.assertEqual(self.world.api_calls, [])
        self.assertEqual(self.runner()["version"], PREVIOUS)
        # A pin older than GitHub's newest is updated by GitHub after the job was assigned.
        self.assertEqual(self.self_updates(), [f"self-update from {PREVIOUS} to {LATEST} after the job was assigned"])
        self.assert_ran_once_and_config_removed()

    def test_a_pinned_sum_that_differs_fails_the_boot_named(self):
        self.s3.delete_object(Bucket=BUCKET, Key="runner/latest-x64")
        self.put_jit()
        status, output = self.run_script("al2023", runner_version=LATEST, runner_sha256_x64="0" * 64)
        self.assert_failed(status, "runner-download", "checksum mismatch")
        self.assertIn("EPHEMERA_RUNNER_SHA256_X64", self.console_lines()[0])
        self.assertIsNone(self.runner())

    def test_the_bucket_is_read_signed_with_the_role_and_as_the_role(self):
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        self.assertEqual(self.world.bad_signatures, [])
        self.assertEqual(self.world.iam_denials, [])
        self.assert_ran_once_and_config_removed()

    def test_the_runner_role_reads_nothing_outside_the_runner_prefix(self):
        self.s3.put_object(Bucket=BUCKET, Key="other/latest-x64", Body=f"{LATEST} {self.world.sums['x64']}\n".encode())
        self.put_jit()
        status, output = self.run_script(
            "al2023",
            runner_bucket_url=f"{self.base}/s3/{BUCKET}/other",
            runner_version=LATEST,
            runner_sha256_x64=self.world.sums["x64"],
        )
        self.assertEqual(status, 0, output)
        self.assertTrue(self.world.iam_denials, "s3:GetObject outside runner/ is refused")
        self.assertIn("s3:GetObject", self.world.iam_denials[0])
        self.assertEqual(self.downloads(), [self.github_download()], "the pin, from GitHub's release download")


if __name__ == "__main__":
    unittest.main()
