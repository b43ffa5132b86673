# The curl a runner image must have: every AWS call of the script is curl --aws-sigv4,
# which signs the x-amz-* headers it is given (the role's session token, X-Amz-Target)
# from curl 7.86.0 on (https://github.com/curl/curl/pull/7966); SigV4 wants them signed
# (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html;
# the fake endpoints refuse an unsigned one). Ubuntu 22.04's curl is 7.81.0: such an image
# is refused, named, at the bake and at boot, before any signed call.

import unittest

import harness
from fakes import BUCKET_PREFIX

REFUSED = "curl 7.81.0 does not sign x-amz-* headers (7.86+ does): Ubuntu 22.04"


class CurlVersion(harness.BootstrapHarness):
    def test_a_boot_with_ubuntu_22_04s_curl_refuses_named_before_any_signed_call(self):
        self.stub_curl_version("7.81.0")
        self.put_jit()
        status, output = self.run_script("ubuntu2204")
        self.assert_failed(status, "curl", REFUSED)
        self.assertEqual(self.aws_calls(), [], "no DynamoDB call")
        self.assertEqual(self.world.log_calls, [], "no CloudWatch Logs call")
        self.assertEqual(self.world.requests, [], "not even IMDS")
        self.assertEqual(self.package_manager_calls(), [])
        self.assertTrue(self.jit_config_left())
        self.assertIsNone(self.runner())

    def test_a_bake_with_ubuntu_22_04s_curl_refuses_named(self):
        self.stub_curl_version("7.81.0")
        status, output = self.run_script("ubuntu2204", "install", runner_bucket_url=self.base + BUCKET_PREFIX)
        self.assert_failed(status, "curl", REFUSED, powers_off=False)
        self.assertEqual(self.package_manager_calls(), [], "refused before any package")
        self.assertEqual(self.world.requests, [], "no download, no IMDS")
        self.assertFalse((self.tmp / "actions-runner/.ephemera-installed").exists(), "no marker: the bake fails")

    def test_curl_7_86_boots(self):
        self.stub_curl_version("7.86.0")
        self.put_jit()
        status, output = self.run_script("ubuntu2404")
        self.assertEqual(status, 0, output)
        self.assert_ran_once_and_config_removed()

    def test_curl_7_85_is_refused_and_8_0_boots(self):
        self.stub_curl_version("7.85.0")
        status, output = self.run_script("al2023")
        self.assert_failed(status, "curl", "curl 7.85.0 does not sign x-amz-* headers")
        self.stub_curl_version("8.0.1")
        self.put_jit()
        status, output = self.run_script("al2023")
        self.assertEqual(status, 0, output)
        self.assert_ran_once_and_config_removed()


if __name__ == "__main__":
    unittest.main()
