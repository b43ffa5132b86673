# The runner's logs, shipped: the boot's log and the runner's _diag logs go to the
# instance's stream (its id) of the deployment's group, signed with the role's keys, in
# calls within PutLogEvents' limits (the fake refuses any other); each line once, also
# when the boot fails; at least once: a line refused (a throttled CreateLogStream, a
# PutLogEvents fault) goes at the next round; the stream created once a boot
# (CreateLogStream's 50 a second are the account's); not the bake's lines; a line that is
# not UTF-8 costs only itself; a refused shipment never fails the boot; and the JIT config
# never leaves (harness.assert_no_secret reads every shipped line on every run).

import time
import unittest

import boto3
import botocore.config
import botocore.exceptions

import harness
from fakes import ACCESS_DENIED, CREATE_LOG_STREAM_TPS, INSTANCE, LOG_GROUP, LOGS_THROTTLED, LOGS_UNAVAILABLE, REGION

RUNNER_LOG = "Runner_20261126-040000-utc.log: "
WORKER_LOG = "Worker_20261126-040002-utc.log: "


class LogShipping(harness.BootstrapHarness):
    def assert_each_line_once(self, shipped):
        lines = [m for m in shipped if not m.startswith(f"{WORKER_LOG}[line ")]
        self.assertEqual(len(lines), len(set(lines)), "a line shipped twice")

    def test_the_boot_and_the_runner_logs_go_to_the_instance_stream(self):
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        self.assert_ran_once_and_config_removed()
        self.assertEqual(list(self.world.streams), [INSTANCE], f"one stream, named by the instance id, in {LOG_GROUP}")
        shipped = self.shipped()
        boot = [m for m in shipped if m.startswith("bootstrap.log: ")]
        self.assertTrue(any(f"ephemera-bootstrap: instance {INSTANCE} in" in m for m in boot), boot)
        self.assertTrue(any("ephemera-bootstrap: runner exited with status 0" in m for m in boot), boot)
        self.assertTrue(boot[-1].endswith("exiting with status 0; powering off"), boot[-1])
        self.assertIn(f'{RUNNER_LOG}[2026-11-26 04:00:01Z INFO Runner] Listening for Jobs: "quoted" \\ back', shipped)
        self.assertIn(f"{WORKER_LOG}[2026-11-26 04:00:02Z INFO Worker] Job build completed with result: Succeeded", shipped)
        self.assert_each_line_once(shipped)
        self.assertEqual(self.world.bad_signatures, [], "every Logs call signed with the role's keys")
        self.assertEqual(self.world.log_calls.count("CreateLogStream ok"), 1, self.world.log_calls)

    def test_the_jit_config_is_redacted_from_the_runner_logs(self):
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        shipped = self.shipped()
        self.assertIn(f"{RUNNER_LOG}[2026-11-26 04:00:00Z INFO Runner] Arguments: --jitconfig [redacted]", shipped)
        self.assertIn(f"{RUNNER_LOG}[2026-11-26 04:00:00Z INFO Runner] settings: [redacted]", shipped)
        # JSON-escaped (_ written as \/ here, as a serializer escapes /): redacted too.
        self.assertIn(f'{RUNNER_LOG}[2026-11-26 04:00:00Z INFO Runner] as JSON: "[redacted]"', shipped)
        for message in shipped:
            self.assertNotIn(self.jit[:40], message)
            self.assertNotIn(self.jit[-40:], message)

    def test_a_failed_boot_still_ships_its_log(self):
        status, output = self.run_script("al2023", jit_wait=1, jit_tries=2)
        self.assert_failed(status, "jit-config", "no JIT config")
        shipped = self.shipped()
        self.assertTrue(any("FAILED jit-config: no JIT config" in m for m in shipped), shipped)
        self.assertTrue(shipped[-1].endswith("exiting with status 1; powering off"), shipped[-1])
        self.assertIsNone(self.runner())

    def test_a_refused_shipment_does_not_fail_the_boot(self):
        self.world.logs_answer = ACCESS_DENIED
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        self.assert_ran_once_and_config_removed()
        self.assertEqual(self.world.streams, {})
        self.assertIn("logs: AccessDeniedException: User: arn:aws:sts::", (self.tmp / "bootstrap.log").read_text())

    def test_an_empty_log_group_setting_ships_nothing(self):
        self.put_jit()
        status, output = self.run_script("al2023", log_group="")
        self.assertEqual(status, 0, output)
        self.assert_ran_once_and_config_removed()
        self.assertEqual(self.world.log_calls, [])

    def test_lines_are_shipped_while_the_runner_runs_and_each_once(self):
        self.put_jit()
        status, output = self.run_script("al2023", log_every=1, runner_seconds=3)
        self.assertEqual(status, 0, output)
        puts = [c for c in self.world.log_calls if c.startswith("PutLogEvents")]
        self.assertGreaterEqual(len(puts), 2, "shipped while the runner ran, then at the end")
        shipped = self.shipped()
        self.assert_each_line_once(shipped)
        self.assertTrue(any("starting the runner" in m for m in shipped), shipped)

    def test_a_long_log_goes_in_calls_within_the_limits_and_in_order(self):
        self.put_jit()
        status, output = self.run_script("al2023", diag_lines=700)
        self.assertEqual(status, 0, output)
        puts = [c for c in self.world.log_calls if c.startswith("PutLogEvents")]
        self.assertGreater(len(puts), 5, puts)
        self.assertTrue(all(int(c.split()[1]) <= 128 for c in puts), puts)
        long_lines = [m for m in self.shipped() if m.startswith(f"{WORKER_LOG}[line ")]
        self.assertEqual(len(long_lines), 700)
        self.assertEqual([m.split("]")[0] for m in long_lines], [f"{WORKER_LOG}[line {i}" for i in range(700)])
        self.assertTrue(all(len(m) == len(WORKER_LOG) + 2000 for m in long_lines), "cut to 2,000 characters")
        stamps = [t for t, _ in self.world.streams[INSTANCE]]
        self.assertEqual(stamps, sorted(stamps), "in time order")

    # ---- at least once, and what CloudWatch Logs refuses

    def assert_every_line_of_the_run_shipped_once(self):
        shipped = self.shipped()
        boot = [m for m in shipped if m.startswith("bootstrap.log: ")]
        self.assertTrue(any(f"ephemera-bootstrap: instance {INSTANCE} in" in m for m in boot), boot)
        self.assertTrue(any("ephemera-bootstrap: starting the runner" in m for m in boot), boot)
        self.assertTrue(boot[-1].endswith("exiting with status 0; powering off"), boot[-1])
        self.assertIn(f'{RUNNER_LOG}[2026-11-26 04:00:01Z INFO Runner] Listening for Jobs: "quoted" \\ back', shipped)
        self.assertIn(f"{WORKER_LOG}[2026-11-26 04:00:02Z INFO Worker] Job build completed with result: Succeeded", shipped)
        self.assert_each_line_once(shipped)

    def test_the_stream_is_created_once_a_boot(self):
        self.put_jit()
        status, output = self.run_script("al2023", log_every=1, runner_seconds=3)
        self.assertEqual(status, 0, output)
        puts = [c for c in self.world.log_calls if c.startswith("PutLogEvents")]
        self.assertGreaterEqual(len(puts), 2, self.world.log_calls)
        creates = [c for c in self.world.log_calls if c.startswith("CreateLogStream")]
        self.assertEqual(creates, ["CreateLogStream ok"], "one CreateLogStream, not one a round")

    def test_a_failed_put_loses_no_line(self):
        # The first two PutLogEvents meet a fault of the service: their lines go at the next round.
        self.world.logs_errors["PutLogEvents"] = [LOGS_UNAVAILABLE, LOGS_UNAVAILABLE]
        self.put_jit()
        status, output = self.run_script("al2023", log_every=1, runner_seconds=3)
        self.assertEqual(status, 0, output)
        self.assertEqual(self.world.log_calls.count("PutLogEvents ServiceUnavailableException"), 2, self.world.log_calls)
        self.assertIn("logs: ServiceUnavailableException", (self.tmp / "bootstrap.log").read_text())
        self.assert_every_line_of_the_run_shipped_once()

    def test_a_throttled_create_log_stream_loses_no_line_and_is_asked_again(self):
        # The account's other instances hold CreateLogStream's rate at this boot's first round.
        self.world.logs_errors["CreateLogStream"] = [LOGS_THROTTLED]
        self.put_jit()
        status, output = self.run_script("al2023", log_every=1, runner_seconds=3)
        self.assertEqual(status, 0, output)
        creates = [c for c in self.world.log_calls if c.startswith("CreateLogStream")]
        self.assertEqual(creates, ["CreateLogStream ThrottlingException", "CreateLogStream ok"])
        self.assert_every_line_of_the_run_shipped_once()

    def test_a_stream_that_exists_is_this_boots(self):
        # A CreateLogStream whose answer was lost: the next one finds the stream.
        self.world.streams[INSTANCE] = []
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        self.assertIn("CreateLogStream ResourceAlreadyExistsException", self.world.log_calls)
        self.assert_every_line_of_the_run_shipped_once()

    def test_the_bake_log_is_not_shipped_at_boot(self):
        status, output = self.run_script("al2023", "install")
        self.assertEqual(status, 0, output)
        self.assertIn("ephemera-bootstrap: installed", (self.tmp / "bootstrap.log").read_text())
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        boot = [m for m in self.shipped() if m.startswith("bootstrap.log: ")]
        self.assertFalse([m for m in boot if "installing the runner's dependencies" in m or m.endswith(" installed")], boot)
        self.assertTrue(any("nothing to install" in m for m in boot), boot)
        self.assert_every_line_of_the_run_shipped_once()

    def test_a_line_that_is_not_utf8_costs_only_itself(self):
        self.put_jit()
        status, output = self.run_script("al2023", diag_latin1=True)
        self.assertEqual(status, 0, output)
        self.assertFalse([c for c in self.world.log_calls if "Exception" in c], self.world.log_calls)
        shipped = self.shipped()
        self.assertIn(f"{RUNNER_LOG}[2026-11-26 04:00:00Z INFO Runner] caf? cr?me", shipped)
        self.assert_every_line_of_the_run_shipped_once()

    # ---- the fake's rules, asked directly

    def logs_client(self):
        return boto3.client(
            "logs",
            region_name=REGION,
            endpoint_url=self.base + "/logs",
            aws_access_key_id=self.world.key_id,
            aws_secret_access_key=self.world.secret_key,
            aws_session_token=self.world.session_token,
            config=botocore.config.Config(retries={"mode": "standard", "max_attempts": 1}),
        )

    def test_the_fake_throttles_create_log_stream_beyond_50_a_second(self):
        # The fake's own rule, on a clock the test moves: a shared machine cannot make
        # 51 calls fall within one real second every time.
        now = [1000.0]
        self.world.logs_clock = lambda: now[0]
        logs = self.logs_client()
        for i in range(CREATE_LOG_STREAM_TPS):
            logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=f"i-{i}")
        with self.assertRaises(botocore.exceptions.ClientError) as refused:
            logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName="i-51")
        self.assertEqual(refused.exception.response["Error"]["Code"], "ThrottlingException")
        now[0] += 1.0
        logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName="i-52")
        self.assertEqual(self.world.bad_signatures, [])

    def test_the_fake_refuses_a_batch_over_24_hours_or_out_of_order(self):
        logs = self.logs_client()
        logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=INSTANCE)
        now = int(time.time() * 1000)
        for events in (
            [{"timestamp": now - 25 * 3600 * 1000, "message": "a"}, {"timestamp": now, "message": "b"}],
            [{"timestamp": now, "message": "a"}, {"timestamp": now - 1, "message": "b"}],
            [{"timestamp": now, "message": "a"}] * 10_001,
        ):
            with self.assertRaises(botocore.exceptions.ClientError) as refused:
                logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=INSTANCE, logEvents=events)
            self.assertEqual(refused.exception.response["Error"]["Code"], "InvalidParameterException")
        logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=INSTANCE, logEvents=[{"timestamp": now, "message": "ok"}])
        self.assertEqual(self.shipped(), ["ok"])


if __name__ == "__main__":
    unittest.main()
