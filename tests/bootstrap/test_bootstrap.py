# The runner bootstrap script at boot (`bootstrap.sh`, i.e. `start`) on stock images: what
# it installs per OS family and machine, how it rides out IMDS and JIT-table hiccups, and
# that every way it can fail says so on the console and powers off. The fakes and stubs
# are in harness.py; the two phases and the downloads are in test_phases.py.

import io
import tarfile
import threading
import time
import unittest

import harness
from harness import LATEST, OS_RELEASE, SCRIPT_TIMEOUT, runner_tarball


class BootstrapScript(harness.BootstrapHarness):
    def test_amazon_linux_2023_x86_64(self):
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        dnf = [c for c in self.calls() if c.startswith("dnf ")]
        self.assertEqual(len(dnf), 2, self.calls())
        for package in ["libicu", "openssl-libs", "krb5-libs", "zlib", "git", "docker"]:
            self.assertIn(f" {package} ", dnf[0] + " ")
        self.assertNotIn("lttng-ust", dnf[0], "an optional package apart from the required ones")
        self.assertEqual(dnf[1], "dnf install -y lttng-ust")
        self.assertFalse([c for c in self.calls() if c.startswith("apt-get")])
        # installdependencies.sh does not know Amazon Linux 2023: not run there.
        self.assertNotIn("installdependencies", self.calls())
        self.assertFalse([c for c in self.calls() if c.startswith("snap")], "no AWS CLI needed")
        self.assertEqual(self.downloads(), [self.bucket_path(f"actions-runner-linux-x64-{LATEST}.tar.gz")])
        self.assert_docker_for_the_runner_user()
        self.assert_ran_once_and_config_removed()
        self.assert_powered_off_once()
        self.assertEqual([l for l in self.console_lines() if "FAILED" in l], [])
        self.assertIn("runner exited with status 0", output)

    def test_amazon_linux_2023_arm64(self):
        self.put_jit()
        status, output = self.run_script("al2023", arch="aarch64")
        self.assertEqual(status, 0, output)
        self.assertEqual(self.downloads(), [self.bucket_path(f"actions-runner-linux-arm64-{LATEST}.tar.gz")])
        self.assert_ran_once_and_config_removed()
        self.assert_powered_off_once()

    def check_ubuntu(self, family, icu, lttng):
        self.put_jit()
        status, output = self.run_script(family)
        self.assertEqual(status, 0, output)
        calls = self.calls()
        apt = [c for c in calls if c.startswith("apt-get ")]
        self.assertTrue(apt[0].endswith(" update"), apt)
        install = [c for c in apt if " install " in c]
        self.assertEqual(len(install), 2, apt)
        for package in ["git", "docker.io", "libkrb5-3", "zlib1g", icu]:
            self.assertIn(f" {package} ", install[0] + " ")
        self.assertNotIn("lttng", install[0], "an optional package apart from the required ones")
        self.assertTrue(install[1].endswith(f" install -y --no-install-recommends {lttng}"), install[1])
        self.assertFalse([c for c in calls if c.startswith("dnf")])
        self.assertIn("installdependencies", calls, "the runner's own Ubuntu dependencies")
        self.assertFalse([c for c in calls if c.startswith("snap")], "no AWS CLI, so no snap store at boot")
        self.assert_docker_for_the_runner_user()
        self.assert_ran_once_and_config_removed()
        self.assert_powered_off_once()

    def test_ubuntu_22_04(self):
        self.check_ubuntu("ubuntu2204", "libicu70", "liblttng-ust1")

    def test_ubuntu_24_04(self):
        self.check_ubuntu("ubuntu2404", "libicu74", "liblttng-ust1t64")

    def test_imds_hiccups_are_ridden_out(self):
        self.world.token_failures = 3
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        puts = [s for m, p, s in self.world.requests if m == "PUT"]
        self.assertEqual(puts[:4], [500, 500, 500, 200], puts)
        self.assertIn("imds: attempt 3 of 5 failed", output)
        self.assert_ran_once_and_config_removed()
        self.assert_powered_off_once()

    def test_metadata_read_hiccups_are_ridden_out_with_a_fresh_token(self):
        self.world.read_failures = 2
        self.put_jit()
        # No log shipping: its credential reads would add tokens.
        status, output = self.run_script("al2023", log_group="")
        self.assertEqual(status, 0, output)
        self.assertIn("imds: reading meta-data/placement/region: attempt 2 of 5 failed", output)
        puts = [s for m, p, s in self.world.requests if m == "PUT"]
        self.assertEqual(puts, [200, 200, 200], "a fresh token after each failed read")
        self.assert_ran_once_and_config_removed()
        self.assert_powered_off_once()

    def test_a_preinstalled_runner_is_used_as_is(self):
        with tarfile.open(fileobj=io.BytesIO(runner_tarball())) as tar:
            tar.extractall(self.tmp / "actions-runner", filter="data")
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        self.assertEqual(self.downloads(), [], "nothing downloaded")
        self.assertIn("using the runner preinstalled in", output)
        self.assert_ran_once_and_config_removed()
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
        self.assert_ran_once_and_config_removed()
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
        self.assert_ran_once_and_config_removed()

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
        self.assertTrue(self.jit_config_left(), "not read before the host is ready")




if __name__ == "__main__":
    unittest.main()
