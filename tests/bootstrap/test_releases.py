# Which runner a host runs, and where it comes from (issue: runners that stay current). The
# deployment's bucket holds the newest release (latest-<arch>: "<version> <sha256>", the
# tarball, its .sha256), read signed as the runner role; a host never asks GitHub's API,
# whose 60 unauthenticated requests an hour per address the hosts behind one NAT gateway
# share ("Rate limits for the REST API"). An image behind the bucket gets the bucket's
# runner before the runner starts, so the runner never updates itself after a job is
# assigned ("Communicating with self-hosted runners"). The bucket unreadable: the launch's
# pinned sum and GitHub's release download, or a named failure.

import concurrent.futures
import json
import time
import unittest
import urllib.error
import urllib.request

import harness
from fakes import BUCKET, LATEST, PREVIOUS

BURST = 100  # stock boots behind one address
BURST_AT_ONCE = 8  # of them at a time


class RunnerReleases(harness.BootstrapHarness):
    def as_the_build_instance(self):
        """The bake's calls as the image stack's build instance role."""
        parameters = {"DeploymentName": "eph", "RunnerBucket": BUCKET}
        self.register_role("infra/image/template.yaml", "BuildRole", parameters)

    def bake(self, version):
        """An image baked with `version` (bootstrap.sh install from the bucket then), as the
        image stack's build instance; then the host boots as the runner role."""
        self.put_in_bucket(version=version)
        self.as_the_build_instance()
        status, output = self.run_script("al2023", "install")
        self.assertEqual(status, 0, output)
        self.assertEqual(self.world.iam_denials, [])
        self.register_role()
        self.assertIn(f"runner={version} x64", (self.tmp / "actions-runner/.ephemera-installed").read_text())
        (self.stubs / "calls.log").write_text("")
        self.world.requests.clear()

    def test_a_stock_boot_makes_no_call_to_githubs_api(self):
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        self.assertEqual(self.world.api_calls, [], "no API call at all, authenticated or not")
        self.assertEqual(
            self.network_fetches(),
            [self.bucket_path("latest-x64"), self.bucket_path(f"actions-runner-linux-x64-{LATEST}.tar.gz")],
            "the newest and its tarball, from the bucket; nothing from GitHub",
        )
        self.assertEqual(self.runner()["version"], LATEST)
        self.assertEqual(self.self_updates(), [])
        self.assert_ran_once_and_config_removed()

    def test_an_image_one_release_behind_swaps_its_runner_from_the_bucket_and_never_self_updates(self):
        self.bake(PREVIOUS)
        self.put_in_bucket(version=LATEST)  # the sync takes the new release
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        self.assertEqual(self.package_manager_calls(), [], "the packages are the image's")
        self.assertEqual(
            self.downloads(), [self.bucket_path(f"actions-runner-linux-x64-{LATEST}.tar.gz")], "one in-region download"
        )
        self.assertEqual(self.world.api_calls, [])
        self.assertEqual(self.runner()["version"], LATEST, "the bucket's runner ran")
        self.assertEqual(self.self_updates(), [], "GitHub's self-update never ran")
        tombstone = self.jit_item()
        self.assertEqual(tombstone["runner_version"], {"S": LATEST})
        self.assertEqual(tombstone["runner_image_version"], {"S": PREVIOUS})
        self.assertGreaterEqual(int(tombstone["runner_swap_ms"]["N"]), 0)
        self.assert_ran_once_and_config_removed()

    def test_without_the_swap_the_stub_runner_would_update_itself(self):
        # The model the test above relies on: the image's runner, behind the service's,
        # records GitHub's update after assignment (the bucket unreadable here).
        self.bake(PREVIOUS)
        self.s3.delete_object(Bucket=BUCKET, Key="runner/latest-x64")
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        self.assertEqual(self.runner()["version"], PREVIOUS)
        self.assertEqual(self.self_updates(), [f"self-update from {PREVIOUS} to {LATEST} after the job was assigned"])
        tombstone = self.jit_item()
        self.assertEqual(tombstone["runner_version"], {"S": PREVIOUS})
        self.assertEqual(tombstone["runner_image_version"], {"S": PREVIOUS})
        self.assertNotIn("runner_swap_ms", tombstone, "no swap")

    def test_a_current_image_swaps_nothing_and_says_which_runner_ran(self):
        self.bake(LATEST)
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        self.assertEqual(self.downloads(), [])
        tombstone = self.jit_item()
        self.assertEqual(tombstone["runner_version"], {"S": LATEST})
        self.assertEqual(tombstone["runner_image_version"], {"S": LATEST})
        self.assertNotIn("runner_swap_ms", tombstone)

    def test_the_bake_takes_the_newest_release_from_the_bucket(self):
        self.put_in_bucket(version=PREVIOUS, latest=False)
        self.as_the_build_instance()
        status, output = self.run_script("ubuntu2404", "install")
        self.assertEqual(status, 0, output)
        self.assertEqual(self.downloads(), [self.bucket_path(f"actions-runner-linux-x64-{LATEST}.tar.gz")])
        self.assertEqual(self.world.api_calls, [])
        self.assertEqual(self.world.bad_signatures, [])
        self.assertEqual(self.world.iam_denials, [], "the build instance role may read runner/*")
        self.assertIn(f"runner={LATEST} x64", (self.tmp / "actions-runner/.ephemera-installed").read_text())

    def test_the_build_instance_role_reads_nothing_outside_the_runner_prefix(self):
        self.s3.put_object(Bucket=BUCKET, Key="other/latest-x64", Body=f"{LATEST} {self.world.sums['x64']}\n".encode())
        self.as_the_build_instance()
        status, output = self.run_script("al2023", "install", runner_bucket_url=f"{self.base}/s3/{BUCKET}/other")
        self.assert_failed(status, "runner-download", "no SHA-256", powers_off=False)
        self.assertIn("s3:GetObject", self.world.iam_denials[0])

    def test_a_wrong_sum_in_the_bucket_fails_the_boot_named(self):
        self.put_in_bucket(sum="f" * 64)
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assert_failed(status, "runner-download", "checksum mismatch")
        self.assertIn(f"published {'f' * 64}", self.console_lines()[0])
        self.assertIn("latest-x64", self.console_lines()[0])
        self.assertIsNone(self.runner())
        self.assertTrue(self.jit_config_left())

    def test_an_unreadable_bucket_falls_back_to_the_pinned_sum_and_githubs_download(self):
        self.s3.delete_object(Bucket=BUCKET, Key="runner/latest-x64")
        self.put_jit()
        status, output = self.run_script("al2023", runner_version=LATEST, runner_sha256_x64=self.world.sums["x64"].upper())
        self.assertEqual(status, 0, output)
        self.assertEqual(self.downloads(), [self.github_download()], "a release download, not an API call")
        self.assertEqual(self.world.api_calls, [])
        self.assertEqual(self.runner()["version"], LATEST)
        self.assert_ran_once_and_config_removed()

    def test_an_unreadable_bucket_and_no_pinned_sum_fail_the_boot_named(self):
        self.put_jit()
        status, output = self.run_script("al2023", runner_bucket_url=f"{self.base}/s3/no-such-bucket/runner")
        self.assert_failed(status, "runner-download", "no SHA-256 for actions-runner-linux-x64-2.336.0.tar.gz")
        self.assertIn("EPHEMERA_RUNNER_SHA256_X64", self.console_lines()[0])
        self.assertIn("no-such-bucket/runner unreadable", self.console_lines()[0])
        self.assertEqual(self.downloads(), [], "never downloaded unverifiable")
        self.assertEqual(self.world.api_calls, [])

    def test_no_bucket_and_no_pinned_sum_fail_the_boot_named(self):
        self.put_jit()
        status, output = self.run_script("al2023", runner_bucket_url="")
        self.assert_failed(
            status, "runner-download", "no SHA-256 for actions-runner-linux-x64-2.336.0.tar.gz from EPHEMERA_RUNNER_SHA256_X64"
        )
        self.assertEqual(self.world.api_calls, [])

    # ---- the burst: stock hosts behind one NAT gateway

    def test_the_fake_github_refuses_the_61st_unauthenticated_api_request_of_an_hour(self):
        # What the burst meets: GitHub's primary rate limit for unauthenticated requests.
        url = self.base + "/api/v3/repos/actions/runner/releases/latest"
        for used in range(1, 61):
            with urllib.request.urlopen(url, timeout=10) as answer:
                self.assertEqual(answer.headers["x-ratelimit-remaining"], str(60 - used))
        with self.assertRaises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=10)
        self.assertEqual(refused.exception.code, 403)
        self.assertEqual(refused.exception.headers["x-ratelimit-limit"], "60")
        self.assertEqual(refused.exception.headers["x-ratelimit-remaining"], "0")
        self.assertGreater(int(refused.exception.headers["x-ratelimit-reset"]), time.time())
        body = json.loads(refused.exception.read())
        self.assertTrue(body["message"].startswith("API rate limit exceeded for 127.0.0.1."), body)
        token = urllib.request.Request(url, headers={"Authorization": "Bearer ghs_app-installation-token"})
        with urllib.request.urlopen(token, timeout=10) as answer:
            release = json.loads(answer.read())
        self.assertEqual(release["tag_name"], f"v{LATEST}", "an authenticated request is not held to it")
        self.assertEqual(
            sorted(a["name"] for a in release["assets"]),
            [f"actions-runner-linux-{arch}-{LATEST}.tar.gz" for arch in ("arm64", "x64")],
        )

    script = harness.SCRIPT  # the script the burst boots

    def boot(self, n):
        """One stock host of the burst: its own runner directory, log and console; the
        same instance identity, table item and source address (127.0.0.1) as the others."""
        own = self.tmp / f"host-{n}"
        own.mkdir()
        (own / "console").touch()
        env = self.script_env(
            runner_dir=own / "actions-runner", log=own / "bootstrap.log", console=own / "console", log_group=""
        )
        done = harness.subprocess.run(
            ["bash", str(self.script)], env=env, cwd=own, stdin=harness.subprocess.DEVNULL,
            capture_output=True, timeout=harness.SCRIPT_TIMEOUT,
        )  # fmt: skip
        return done.returncode, (own / "console").read_text()

    def test_a_burst_of_100_stock_boots_behind_one_address_all_reach_the_runner(self):
        # The fake GitHub holds unauthenticated API requests to 60 an hour per address, and
        # every boot comes from 127.0.0.1: a script that asked the API once a boot (as the
        # one before the bucket did, for the tarball's sum) fails from the 61st boot on.
        (self.tmp / "os-release").write_text(harness.OS_RELEASE["al2023"])
        # Every boot finds a JIT config (the item is put back before each read).
        self.world.before_get = self.put_jit
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(BURST_AT_ONCE) as pool:
            results = list(pool.map(self.boot, range(BURST)))
        failed = [(n, console) for n, (status, console) in enumerate(results) if status != 0]
        self.assertEqual(failed[:3], [], f"{len(failed)} of {BURST} boots failed")
        runs = (self.stubs / "runs.log").read_text().splitlines()
        self.assertEqual(runs, [f"runner {LATEST}"] * BURST, "every boot reached the runner")
        self.assertEqual(self.world.api_calls, [], "no API call, so no rate limit to meet")
        print(f"\n{BURST} boots, {BURST_AT_ONCE} at a time, in {time.monotonic() - started:.0f} s", end=" ")


if __name__ == "__main__":
    unittest.main()
