"""The image stack's install component, generated from infra/runner/bootstrap.sh.

`python infra/image/component.py` rewrites the block between the GENERATED markers of
infra/image/template.yaml; `--check` fails when that block is not what the script makes
(make lint-infra runs it; tests/e2e/template/image.rs checks the hash and the version).

The script goes in gzipped and base64-encoded: Image Builder allows 16,000 characters of
component document, and the script alone is near EC2's 16 KB of user data. The bake
checks the unpacked copy against the script's SHA-256 before it runs it. The component's
version is 1.0.N, N the first 28 bits of that hash, so every change of the script is a
new version (Image Builder's limit for a version part is 2^30 - 1)."""

import base64
import gzip
import hashlib
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "infra/runner/bootstrap.sh"
TEMPLATE = ROOT / "infra/image/template.yaml"
BEGIN = "      # BEGIN GENERATED (make image-component)\n"
END = "      # END GENERATED\n"
INSTALLED = "/opt/ephemera/bootstrap.sh"

DOCUMENT = """\
name: ephemera-runner-install
description: Runs infra/runner/bootstrap.sh install (generated, make image-component).
schemaVersion: 1.0
parameters:
  - RunnerVersion:
      type: string
      description: The Actions runner release to install, or latest (the bucket's newest).
  - RunnerBucketUrl:
      type: string
      description: The deployment's runner copies, https://BUCKET.s3.REGION.SUFFIX/runner.
phases:
  - name: build
    steps:
      - name: Install
        action: ExecuteBash
        inputs:
          commands:
            - |
              set -euo pipefail
              mkdir -p {directory}
              base64 -d <<'EPHEMERA_SCRIPT' | gunzip > {installed}
{blob}
              EPHEMERA_SCRIPT
              echo '{sha256}  {installed}' | sha256sum -c -
              chmod 0755 {installed}
              export EPHEMERA_RUNNER_BUCKET_URL='{{{{ RunnerBucketUrl }}}}'
              EPHEMERA_RUNNER_VERSION='{{{{ RunnerVersion }}}}' {installed} install
              grep '^runner=' /opt/actions-runner/.ephemera-installed
  - name: test
    steps:
      - name: Baked
        action: ExecuteBash
        inputs:
          commands:
            - |
              set -euo pipefail
              test -x /opt/actions-runner/run.sh
              command -v git
              command -v docker
"""


def version(digest: str) -> str:
    return f"1.0.{int(digest[:7], 16)}"


def generated(script: bytes) -> str:
    """The block between the markers, for `script`."""
    digest = hashlib.sha256(script).hexdigest()
    packed = base64.b64encode(gzip.compress(script, mtime=0)).decode()
    blob = textwrap.indent("\n".join(textwrap.wrap(packed, 76)), " " * 14)
    document = DOCUMENT.format(
        directory=str(Path(INSTALLED).parent), installed=INSTALLED, blob=blob, sha256=digest
    )
    return (
        f"      Version: {version(digest)}\n"
        "      Data: |\n"
        + textwrap.indent(document, " " * 8)
    )


def split(template: str) -> tuple[str, str, str]:
    head, begin, rest = template.partition(BEGIN)
    block, end, tail = rest.partition(END)
    if not begin or not end:
        sys.exit(f"{TEMPLATE}: the GENERATED markers are missing")
    return head + begin, block, end + tail


def main() -> None:
    head, block, tail = split(TEMPLATE.read_text())
    wanted = generated(SCRIPT.read_bytes())
    if "--check" in sys.argv[1:]:
        if block != wanted:
            sys.exit(
                f"{TEMPLATE.relative_to(ROOT)}: the install component does not carry "
                f"{SCRIPT.relative_to(ROOT)}: run `make image-component`"
            )
        return
    TEMPLATE.write_text(head + wanted + tail)


if __name__ == "__main__":
    main()
