# A stopped pool's host (docs/design.md, "Stopped pool"). Its JIT item says `prepare` and
# holds no config: the boot prepares (everything up to the JIT read), leaves a copy of the
# script in cloud-init's scripts/per-boot directory, and powers off (its instance stops).
# At the next boot that copy resumes: Docker, the JIT read (waiting while the item still
# says prepare), the runner, power-off. A failure while preparing never powers off, as a
# stopped instance would pass for a prepared one.
#
# The boots here run the script as the launch's user data holds it: the line exporting the
# settings, then the script less comments and indentation (infra/user-data.sh --script),
# with no EPHEMERA_* setting in the environment, as cloud-init runs it; and the resume as
# cloud-init runs a per-boot script (executed, no arguments, the same bare environment).

import os
import shlex
import time
from pathlib import Path

import harness
from fakes import ARN, LATEST, TABLE

RESUME = "ephemera-resume"
STOP_DOCKER = """#!/bin/bash
# Stub systemctl: records the call; Docker does not start.
echo "$(basename "$0") $*" >>"$STUB_DIR/calls.log"
[ "$*" != "start docker" ]
"""


class StoppedPool(harness.BootstrapHarness):
    def put_prepare(self):
        """The item the scaler writes for a stopped pool's launch (jit.rs, put_prepare)."""
        self.dynamo.put_item(
            TableName=TABLE,
            Item={
                "instance_arn": {"S": ARN},
                "prepare": {"BOOL": True},
                "runner": {"S": "eph-linux-1"},
                "runner_id": {"N": "0"},
                "ttl": {"N": str(int(time.time()) + 86400)},
            },
        )

    def bare_env(self, **options):
        """The environment cloud-init gives a script: no EPHEMERA_* setting."""
        return {k: v for k, v in self.script_env(**options).items() if not k.startswith("EPHEMERA_")}

    def user_data(self, **options):
        """The launch's user data: its export line of settings (the test's), then the script."""
        settings = {k: v for k, v in self.script_env(**options).items() if k.startswith("EPHEMERA_")}
        line = "#!/bin/bash\nexport " + " ".join(f"{k}={shlex.quote(v)}" for k, v in settings.items()) + "\n"
        path = self.tmp / "part-001"
        path.write_text(line + self.user_data_script().read_text())
        path.chmod(0o700)
        return path

    def boot(self, os_family="al2023", **options):
        return self.run_command(os_family, [str(self.user_data(**options))], self.bare_env(**options))

    def resume_script(self):
        return self.tmp / "per-boot" / RESUME

    def resume(self, os_family="al2023"):
        """The next boot: cloud-init executes what scripts/per-boot holds."""
        return self.run_command(os_family, [str(self.resume_script())], self.bare_env())

    def forget_the_first_boot(self):
        (self.stubs / "calls.log").write_text("")
        self.world.requests.clear()
        self.world.dynamo.clear()

    def files_on_disk(self):
        """Every file the boots left under the fake host (the stubs' own records aside)."""
        for root, _, names in os.walk(self.tmp):
            for name in names:
                path = os.path.join(root, name)
                if not path.startswith(str(self.stubs)) and os.path.isfile(path):
                    yield path

    def prepare(self):
        self.put_prepare()
        status, output = self.boot()
        self.assertEqual(status, 0, output)
        return output

    # ---- the first boot: prepare

    def test_a_prepare_item_prepares_leaves_the_resume_and_powers_off_without_running(self):
        output = self.prepare()
        self.assertIn("ephemera-bootstrap: prepared", output)
        self.assertIsNone(self.runner(), "no runner before a job takes the instance")
        self.assertNotIn(f"sudo -u {harness.RUNNER_USER} ./run.sh", self.calls())
        self.assertIn("systemctl start docker", self.calls(), "prepared up to the JIT read")
        self.assertEqual(self.downloads(), [self.bucket_path(f"actions-runner-linux-x64-{LATEST}.tar.gz")])
        self.assert_powered_off_once()
        # The item is the scaler's, as it was: read, never stamped.
        self.assertEqual(self.aws_calls(), ["get-item item"])
        item = self.jit_item()
        self.assertEqual(item["prepare"], {"BOOL": True})
        self.assertNotIn("jit_config", item)
        self.assertNotIn("jit_read_at", item)
        # The resume: an executable copy of the user data, in resume mode with its runner.
        resume = self.resume_script()
        self.assertTrue(os.access(resume, os.X_OK), "cloud-init executes per-boot scripts")
        lines = resume.read_text().splitlines()
        self.assertEqual(lines[:2], ["#!/bin/bash", f"set -- resume {LATEST} "])
        self.assertIn("export EPHEMERA_DEPLOYMENT=eph ", resume.read_text(), "the launch's settings")
        self.assertEqual("\n".join(lines[2:]) + "\n", self.user_data().read_text(), "the user data as it ran")

    def test_nothing_secret_or_read_from_imds_is_left_on_disk(self):
        self.prepare()
        secrets = {
            "the IMDS token": self.world.token,
            "the role's secret key": self.world.secret_key,
            "the role's session token": self.world.session_token[:40],
            "the role's key id": self.world.key_id,
        }
        files = list(self.files_on_disk())
        self.assertIn(str(self.resume_script()), files)
        for path in files:
            text = Path(path).read_bytes().decode(errors="replace")
            for what, secret in secrets.items():
                self.assertNotIn(secret, text, f"{what} in {path}")

    # ---- the next boot: resume

    def test_the_resume_reads_the_config_of_the_take_runs_the_runner_and_powers_off(self):
        self.prepare()
        # The take: the scaler replaces the item with the job's config, then starts it.
        self.put_jit()
        self.forget_the_first_boot()
        status, output = self.resume()
        self.assertEqual(status, 0, output)
        self.assert_ran_once_and_config_removed()
        self.assert_powered_off_once()
        self.assertIn("systemctl start docker", self.calls(), "Docker again: a stop loses it")
        self.assertEqual(self.package_manager_calls(), [], "nothing installed again")
        self.assertEqual(self.network_fetches(), [], "no runner download, no bucket read")
        self.assertEqual(self.jit_item()["runner_version"], {"S": LATEST}, "the runner the first boot installed")
        self.assertNotIn("runner_swap_ms", self.jit_item(), "no download at this boot")
        self.assertFalse(self.resume_script().exists(), "the resume runs once")
        self.assertNotIn("prepared", output)

    def test_the_resume_waits_while_the_item_still_says_prepare(self):
        self.prepare()
        self.forget_the_first_boot()
        reads = []

        def the_take_after_two_reads():
            reads.append(1)
            if len(reads) == 3:
                self.put_jit()

        self.world.before_get = the_take_after_two_reads
        status, output = self.resume()
        self.assertEqual(status, 0, output)
        self.assertEqual(self.aws_calls(), ["get-item item"] * 3 + ["update-item ok"])
        self.assertEqual(self.runner()["args"], ["--jitconfig", self.jit])
        self.assertNotIn("jit_config", self.jit_item())
        self.assert_powered_off_once()
        self.assertNotIn("prepared", output, "never prepares again")
        self.assertEqual(os.listdir(self.tmp / "per-boot"), [], "no second resume")

    def test_a_resume_that_never_gets_its_config_fails_and_powers_off(self):
        self.prepare()
        self.forget_the_first_boot()
        status, output = self.resume()
        self.assert_failed(status, "jit-config", "no JIT config in eph-jit after 20 attempts")
        self.assertIsNone(self.runner())
        # Its behaviour is terminate again (the reaper set it before recording it stopped).
        self.assert_powered_off_once()

    # ---- a failure while preparing stays up

    def test_docker_failing_on_a_prepare_host_fails_and_stays_up(self):
        self.put_prepare()
        self.stub("systemctl", STOP_DOCKER)
        status, output = self.boot()
        self.assert_failed(status, "docker", "could not start Docker", powers_off=False)
        offs = [c for c in self.calls() if c.split()[0] in ("poweroff", "shutdown") or c == "systemctl poweroff"]
        self.assertEqual(offs, [], "a stopped instance would pass for a prepared one")
        # The failure came before the JIT read: the item is asked once, then.
        self.assertEqual(self.aws_calls(), ["get-item item"])
        self.assertIn("not powering off", output)
        self.assertFalse(self.resume_script().exists())

    def test_docker_failing_on_a_host_with_a_config_still_powers_off(self):
        self.put_jit()
        self.stub("systemctl", STOP_DOCKER)
        status, output = self.boot()
        self.assert_failed(status, "docker", "could not start Docker")
        self.assertEqual(self.aws_calls(), ["get-item item"])
        self.assertTrue(self.jit_config_left(), "read, not removed")
        self.assertIsNone(self.runner())

    def test_a_failure_after_the_prepare_item_was_read_stays_up_without_asking_again(self):
        self.put_prepare()
        status, output = self.boot(per_boot_dir=str(self.tmp / "no-such-directory"))
        self.assert_failed(status, "prepare", "cannot write", powers_off=False)
        self.assertEqual([c for c in self.calls() if c.split()[0] in ("poweroff", "shutdown")], [])
        self.assertEqual(self.aws_calls(), ["get-item item"], "known from the read")
        self.assertNotIn("prepared", output)


if __name__ == "__main__":
    import unittest

    unittest.main()
