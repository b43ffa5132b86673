"""What IAM authorizes for an S3 or an EC2 Image Builder request (iam_requests.py hands
them here).

S3 (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html),
path-style requests (`/BUCKET/KEY`, as the SDK sends them to an emulator): an object's
actions on `arn:aws:s3:::BUCKET/KEY`, a bucket's on `arn:aws:s3:::BUCKET`. A multipart
upload's CreateMultipartUpload, UploadPart and CompleteMultipartUpload need s3:PutObject,
AbortMultipartUpload s3:AbortMultipartUpload
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/mpuoverview.html#mpuAndPermissions);
PUT ?tagging is s3:PutObjectTagging, GET/HEAD an object s3:GetObject, PUT an object
s3:PutObject. Bucket requests (ListObjects, CreateBucket...) are refused as unjudged
unless named below: no code of ephemera makes them as a role.

Image Builder (REST JSON, https://docs.aws.amazon.com/imagebuilder/latest/APIReference/API_StartImagePipelineExecution.html):
`PUT /StartImagePipelineExecution` needs imagebuilder:StartImagePipelineExecution on the
body's imagePipelineArn."""

import json
from urllib.parse import parse_qs, unquote

from .core import read_body


class Unjudged(Exception):
    """A request whose needs this module cannot tell."""


def object_action(method, query):
    if "tagging" in query:
        return {"PUT": "s3:PutObjectTagging", "GET": "s3:GetObjectTagging"}.get(method)
    if "uploadId" in query:
        return "s3:AbortMultipartUpload" if method == "DELETE" else "s3:PutObject"
    if "uploads" in query and method == "POST":
        return "s3:PutObject"
    return {"GET": "s3:GetObject", "HEAD": "s3:GetObject", "PUT": "s3:PutObject",
            "DELETE": "s3:DeleteObject"}.get(method)


def s3_needs(environ, need, context, known):
    """[(action, resource ARN)] of a path-style S3 request, as needs."""
    path = unquote(environ.get("PATH_INFO", "")).lstrip("/")
    bucket, _, key = path.partition("/")
    query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
    method = environ.get("REQUEST_METHOD", "GET")
    if not bucket:
        raise Unjudged("an S3 request without a bucket")
    if key:
        action = object_action(method, query)
        if action is None:
            raise Unjudged(f"an S3 {method} of an object with {sorted(query)}")
        return [need(action, f"arn:aws:s3:::{bucket}/{key}", context, known)]
    if method == "GET" and query.get("list-type") == ["2"]:
        return [need("s3:ListBucket", f"arn:aws:s3:::{bucket}", context, known)]
    raise Unjudged(f"an S3 {method} of bucket {bucket} with {sorted(query)}")


def imagebuilder_needs(environ, need, context, known):
    path = environ.get("PATH_INFO", "")
    if path.rstrip("/") == "/StartImagePipelineExecution":
        body = json.loads(read_body(environ) or b"{}")
        arn = body.get("imagePipelineArn") or ""
        return [need("imagebuilder:StartImagePipelineExecution", arn, context, known)]
    raise Unjudged(f"an Image Builder request {path}")
