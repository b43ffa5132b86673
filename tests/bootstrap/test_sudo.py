# The runner user's sudo (RunnerSudo, EPHEMERA_RUNNER_SUDO): passwordless by default, as on
# GitHub-hosted runners, written at every boot into the sudoers directory with the mode
# sudo requires; none removes it; any other value fails the boot, named, before the runner
# starts.

import os
import stat

from harness import RUNNER_USER, BootstrapHarness


class RunnerSudo(BootstrapHarness):
    def sudoers(self):
        return self.tmp / "sudoers.d" / "90-ephemera-runner"

    def boot(self, **settings):
        self.put_jit()
        return self.run_script("al2023", **settings)

    def test_by_default_the_runner_user_has_passwordless_sudo_as_on_hosted_runners(self):
        code, output = self.boot()
        self.assertEqual(code, 0, output)
        self.assertEqual(self.sudoers().read_text(), f"{RUNNER_USER} ALL=(ALL) NOPASSWD:ALL\n")
        # sudoers(5): a file of the includedir must not be writable by anyone.
        self.assertEqual(stat.S_IMODE(os.stat(self.sudoers()).st_mode), 0o440)
        self.assertIsNotNone(self.runner(), "the runner ran")
        self.assertEqual([p.name for p in self.sudoers().parent.iterdir()], ["90-ephemera-runner"])

    def test_none_removes_the_runner_users_sudo_even_from_an_image_that_had_it(self):
        self.sudoers().write_text(f"{RUNNER_USER} ALL=(ALL) NOPASSWD:ALL\n")
        code, output = self.boot(runner_sudo="none")
        self.assertEqual(code, 0, output)
        self.assertFalse(self.sudoers().exists())
        self.assertIsNotNone(self.runner(), "the runner ran")

    def test_an_unknown_value_fails_the_boot_named_and_the_runner_never_starts(self):
        code, output = self.boot(runner_sudo="yes")
        self.assertNotEqual(code, 0)
        self.assertIn("FAILED sudo: EPHEMERA_RUNNER_SUDO is 'yes', not passwordless or none", output)
        self.assertIsNone(self.runner())
        self.assertFalse(self.sudoers().exists())
