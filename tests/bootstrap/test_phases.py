# The two phases of the runner bootstrap: `install` (the image recipe) then `start` (the
# boot) on a baked image makes no package-manager call and no download; a stock image, or
# a bake of another runner version, gets at boot only what it lacks. And what install
# installs: the required packages in one transaction, the optional ones best effort.

import shutil
import unittest

import harness
from fakes import LATEST, ROLE


class TwoPhases(harness.BootstrapHarness):
    def marker(self):
        return (self.tmp / "actions-runner/.ephemera-installed").read_text()

    def forget_what_install_did(self):
        (self.stubs / "calls.log").write_text("")
        self.world.requests.clear()

    def check_baked(self, os_family, arch, runner_arch):
        status, output = self.run_script(os_family, "install", arch=arch)
        self.assertEqual(status, 0, output)
        self.assertTrue(self.package_manager_calls(), "install installs")
        self.assertEqual(self.downloads(), [self.bucket_path(f"actions-runner-linux-{runner_arch}-{LATEST}.tar.gz")])
        self.assertEqual(self.aws_calls(), [], "install reads no JIT config")
        self.assertEqual([c for c in self.calls() if c.split()[0] in ("poweroff", "shutdown")], [], "install does not power off")
        self.assertIn(f"runner={LATEST} {runner_arch}", self.marker())
        self.forget_what_install_did()

        self.put_jit()
        status, output = self.run_script(os_family, arch=arch)
        self.assertEqual(status, 0, output)
        self.assertEqual(self.package_manager_calls(), [], "no package-manager call at boot")
        self.assertEqual(
            self.network_fetches(), [self.bucket_path(f"latest-{runner_arch}")], "no download at boot: the newest read"
        )
        self.assertIn("nothing to install", output)
        self.assertIn("systemctl start docker", self.calls())
        self.assert_ran_once_and_config_removed()
        self.assert_powered_off_once()

    def test_install_then_start_on_a_baked_al2023_makes_no_package_call_and_no_download(self):
        self.check_baked("al2023", "x86_64", "x64")

    def test_install_then_start_on_a_baked_ubuntu_arm64_makes_no_package_call_and_no_download(self):
        self.check_baked("ubuntu2404", "aarch64", "arm64")

    def test_start_with_no_argument_is_start(self):
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        self.assert_ran_once_and_config_removed()
        self.assertEqual(self.marker(), f"packages=dnf\nrunner={LATEST} x64\n")

    def test_a_bake_of_another_runner_version_downloads_only_the_pinned_runner_at_boot(self):
        status, output = self.run_script("al2023", "install")
        self.assertEqual(status, 0, output)
        marker = self.tmp / "actions-runner/.ephemera-installed"
        marker.write_text(self.marker().replace(LATEST, "2.329.0"))
        self.forget_what_install_did()
        self.put_jit()
        status, output = self.run_script("al2023", runner_version=LATEST)
        self.assertEqual(status, 0, output)
        self.assertEqual(self.package_manager_calls(), [], "the packages are the image's")
        self.assertEqual(self.downloads(), [self.bucket_path(f"actions-runner-linux-x64-{LATEST}.tar.gz")])
        self.assertIn(f"runner={LATEST} x64", self.marker())
        self.assert_ran_once_and_config_removed()

    def test_latest_on_a_baked_image_with_the_bucket_unreadable_takes_the_image_runner(self):
        status, output = self.run_script("al2023", "install")
        self.assertEqual(status, 0, output)
        self.forget_what_install_did()
        self.s3.delete_object(Bucket=harness.BUCKET, Key="runner/latest-x64")
        self.put_jit()
        status, output = self.run_script("al2023", runner_version="latest")
        self.assertEqual(status, 0, output)
        self.assertEqual(self.downloads(), [], "the image's runner, nothing downloaded")
        self.assertEqual(self.world.api_calls, [], "no release lookup at boot")
        self.assertEqual(self.runner()["version"], LATEST)
        self.assert_ran_once_and_config_removed()

    def test_a_baked_image_of_another_os_family_installs_its_packages(self):
        status, output = self.run_script("al2023", "install")
        self.assertEqual(status, 0, output)
        self.forget_what_install_did()
        self.put_jit()
        status, output = self.run_script("ubuntu2204")
        self.assertEqual(status, 0, output)
        self.assertTrue([c for c in self.calls() if c.startswith("apt-get ")])
        self.assertEqual(self.downloads(), [], "the runner is the image's")
        self.assert_ran_once_and_config_removed()

    def test_an_unknown_phase_fails_and_does_not_power_off(self):
        status, output = self.run_script("al2023", "bake")
        self.assert_failed(status, "start", "unknown phase 'bake'", powers_off=False)
        self.assertEqual(self.calls(), [])

    def test_a_failed_install_says_so_and_does_not_power_off(self):
        status, output = self.run_script("al2023", "install", missing=["git"])
        self.assert_failed(status, "packages", "dnf install failed 5 times", powers_off=False)
        self.assertEqual([c for c in self.calls() if c.split()[0] in ("poweroff", "shutdown")], [])
        self.assertFalse((self.tmp / "actions-runner/.ephemera-installed").exists(), "no marker")

    # ---- required and optional packages

    def test_a_missing_optional_package_does_not_fail_the_boot(self):
        self.put_jit()
        status, output = self.run_script("al2023", missing=["lttng-ust"])
        self.assertEqual(status, 0, output)
        self.assertIn("optional package lttng-ust not installed; going on", output)
        self.assertEqual([c for c in self.calls() if c.startswith("dnf ")][-1], "dnf install -y lttng-ust")
        self.assert_ran_once_and_config_removed()
        self.assert_powered_off_once()

    def test_a_missing_optional_package_on_ubuntu_does_not_fail_the_boot(self):
        self.put_jit()
        status, output = self.run_script("ubuntu2404", missing=["liblttng-ust1t64"])
        self.assertEqual(status, 0, output)
        self.assertIn("optional package liblttng-ust1t64 not installed; going on", output)
        self.assert_ran_once_and_config_removed()

    def test_a_missing_required_package_fails_the_boot(self):
        self.put_jit()
        status, output = self.run_script("al2023", missing=["libicu"])
        self.assert_failed(status, "packages", "dnf install failed 5 times")
        self.assertNotIn("dnf install -y lttng-ust", self.calls())
        self.assertIsNone(self.runner())
        self.assertTrue(self.jit_config_left(), "not read before the host is ready")

    def test_a_missing_required_package_on_ubuntu_fails_the_boot(self):
        self.put_jit()
        status, output = self.run_script("ubuntu2204", missing=["libicu70"])
        self.assert_failed(status, "packages", "apt-get install failed 5 times")
        self.assertIsNone(self.runner())

    # ---- the user data

    def test_the_script_fits_ec2_user_data_with_the_longest_settings_line(self):
        # EC2 takes at most 16 KB of user data, in raw form, before base64
        # (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-add-user-data.html):
        # template.yaml's export line of settings, then this script less its comment lines
        # and indentation (infra/user-data.sh --script).
        settings = {
            "EPHEMERA_DEPLOYMENT": "d" * 32,
            "EPHEMERA_JIT_TABLE": "d" * 32 + "-jit",
            "EPHEMERA_RUNNER_VERSION": "2.336.10",
            "EPHEMERA_RUNNER_SUDO": "passwordless",
            "EPHEMERA_RUNNER_SHA256_X64": "0" * 64,
            "EPHEMERA_RUNNER_SHA256_ARM64": "0" * 64,
            # A bucket name is at most 63 characters (S3 "General purpose bucket naming rules").
            "EPHEMERA_RUNNER_BUCKET_URL": f"https://{'b' * 63}.s3.ap-southeast-2.amazonaws.com/runner",
            "EPHEMERA_GITHUB_URL": "https://github.example-enterprise.com",
        }
        line = "#!/bin/bash\nexport " + " ".join(f"{k}='{v}'" for k, v in settings.items()) + "\n"
        size = len(line.encode()) + len(self.user_data_script().read_bytes())
        self.assertLessEqual(size, 16 * 1024, f"{size} bytes of user data")

    def test_the_user_data_copy_of_the_script_boots_as_the_script_does(self):
        # The copy without comments and indentation is what a stock host runs.
        self.put_jit()
        status, output = self.run_script("ubuntu2404", script=self.user_data_script())
        self.assertEqual(status, 0, output)
        self.assertEqual(self.downloads(), [self.bucket_path(f"actions-runner-linux-x64-{LATEST}.tar.gz")])
        self.assertIn("installdependencies", self.calls())
        self.assert_docker_for_the_runner_user()
        self.assert_ran_once_and_config_removed()
        self.assert_powered_off_once()

    # ---- a minimal AL2023

    def test_a_minimal_al2023_without_the_aws_cli_or_snap_reads_its_jit_config(self):
        path = self.script_env()["PATH"]
        for tool in ["aws", "snap", "jq", "python3", "python"]:
            self.assertIsNone(shutil.which(tool, path=path), f"{tool} is not on a minimal AL2023's PATH")
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        self.assertEqual(self.aws_calls(), ["get-item item", "update-item ok"])
        self.assertEqual(self.world.bad_signatures, [])
        credentials = [p for m, p, s in self.world.requests if "/iam/security-credentials/" in p]
        self.assertEqual(credentials[-1], f"/latest/meta-data/iam/security-credentials/{ROLE}")
        self.assert_ran_once_and_config_removed()
        self.assert_powered_off_once()


if __name__ == "__main__":
    unittest.main()
