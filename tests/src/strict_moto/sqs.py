"""SQS as strict as AWS, and Lambda's recursive-loop cut-off on SQS.

SendMessage/SendMessageBatch: the message size limit (body and attributes) and the
0..900 s delay; the `X-Amzn-Trace-Id` header is kept as the message's AWSTraceHeader
system attribute, as SQS does. ReceiveMessage stands in for Lambda's SQS event source
mapping: a message whose trace header's `Lineage=<hash>:<count>` has reached the cut-off
is not delivered again but moved to the queue's dead-letter queue (RedrivePolicy), or
dropped if it has none, and the stop is logged and counted. SQS's own time (delays,
visibility timeouts, timestamps) follows the layer's clock: advancing it by a minute lets
a message delayed by a minute be received at once, so a long wait is tested without
waiting."""

import base64
import json
import re
import time

from .core import STATE, json_error, read_body, replace_body

CONTENT_TYPE = "application/x-amz-json-1.0"
LINEAGE = re.compile(r"Lineage=([0-9A-Za-z]+):(\d+)")


def invalid_parameter(start_response, message):
    body = {"__type": "com.amazonaws.sqs#InvalidParameterValue", "message": message}
    headers = [("x-amzn-query-error", "InvalidParameterValue;Sender")]
    return json_error(start_response, CONTENT_TYPE, body, headers=headers)


def message_size(entry):
    """Bytes SQS counts for a message: its body and each attribute's name, type, value."""
    size = len((entry.get("MessageBody") or "").encode())
    for name, attribute in (entry.get("MessageAttributes") or {}).items():
        size += len(name.encode()) + len((attribute.get("DataType") or "").encode())
        if attribute.get("StringValue") is not None:
            size += len(attribute["StringValue"].encode())
        if attribute.get("BinaryValue") is not None:
            size += len(base64.b64decode(attribute["BinaryValue"]))
    return size


def entry_refusal(entry):
    """The InvalidParameterValue message for a message SQS refuses, and its kind."""
    limit = STATE.setting("sqs_max_message_bytes")
    if message_size(entry) > limit:
        reason = f"Message must be shorter than {limit} bytes."
        return "sqs_message_too_large", f"One or more parameters are invalid. Reason: {reason}"
    delay = entry.get("DelaySeconds")
    most = STATE.setting("sqs_max_delay_seconds")
    if delay is not None and not 0 <= int(delay) <= most:
        return (
            "sqs_delay_out_of_range",
            f"Value {delay} for parameter DelaySeconds is invalid. "
            f"Reason: DelaySeconds must be >= 0 and <= {most}.",
        )
    return None


def keep_trace_header(entry, header):
    attributes = entry.setdefault("MessageSystemAttributes", {})
    if "AWSTraceHeader" not in attributes:
        attributes["AWSTraceHeader"] = {"DataType": "String", "StringValue": header}


def check(action, environ, start_response):
    """An error response if SQS would refuse this send, else None (the request may be
    rewritten to carry the trace header as AWSTraceHeader)."""
    if action not in ("SendMessage", "SendMessageBatch"):
        return None
    request = json.loads(read_body(environ) or b"{}")
    entries = [request]
    if action == "SendMessageBatch":
        entries = request.get("Entries") or []
    if action == "SendMessageBatch":
        total = sum(message_size(entry) for entry in entries)
        limit = STATE.setting("sqs_max_message_bytes")
        if total > limit:
            STATE.count("sqs_batch_too_long")
            body = {
                "__type": "com.amazonaws.sqs#BatchRequestTooLong",
                "message": f"Batch requests cannot be longer than {limit} bytes. You have sent {total} bytes.",
            }
            headers = [("x-amzn-query-error", "AWS.SimpleQueueService.BatchRequestTooLong;Sender")]
            return json_error(start_response, CONTENT_TYPE, body, headers=headers)
    else:
        refusal = entry_refusal(request)
        if refusal:
            STATE.count(refusal[0])
            return invalid_parameter(start_response, refusal[1])
    header = environ.get("HTTP_X_AMZN_TRACE_ID")
    if header:
        for entry in entries:
            keep_trace_header(entry, header)
        replace_body(environ, json.dumps(request).encode())
    return None


def hops_of(message):
    """The Lineage hop count in a message's AWSTraceHeader, if it carries one."""
    header = (message.system_attributes or {}).get("AWSTraceHeader") or {}
    found = LINEAGE.search(header.get("StringValue") or "")
    return (found.group(1), int(found.group(2))) if found else None


def stop_loop(backend, queue_name, delivered, lineage, cutoff):
    """What Lambda does for a message at the cut-off: no invocation; to the DLQ if any."""
    queue = backend.get_queue(queue_name)
    original = next((m for m in queue._messages if m.id == delivered.id), None)
    if original is not None:
        queue._messages.remove(original)
        queue.pending_messages.discard(original)
    target = queue.dead_letter_queue
    if target is not None and original is not None:
        original.visible_at = 0.0  # it was never delivered: visible in the DLQ at once
        original.recursion_stopped = True  # what lands in the DLQ is for people to read
        target.add_message(original)
    where = f"moved to dead-letter queue {target.name}" if target else "dropped (no dead-letter queue)"
    STATE.count("lambda_recursive_invocations_dropped")
    STATE.write_log(
        f"Lambda recursive loop detected: message {delivered.id} from queue {queue.name} "
        f"has been through {lineage[1]} invocations (Lineage={lineage[0]}:{lineage[1]}, "
        f"cut-off {cutoff}); the function was not invoked and the message was {where}"
    )


def clock_skew():
    """Seconds the layer's clock is ahead of real time (advanced, or behind while paused)."""
    return STATE.clock.now() - time.monotonic()


def follow_the_clock():
    """Makes moto's SQS read its time through the layer's clock."""
    import moto.sqs.models as sqs_models

    wall_seconds = sqs_models.unix_time
    wall_millis = sqs_models.unix_time_millis

    def unix_time(*args):
        return wall_seconds(*args) if args else wall_seconds() + clock_skew()

    def unix_time_millis(*args):
        return wall_millis(*args) if args else wall_millis() + clock_skew() * 1000.0

    sqs_models.unix_time = unix_time
    sqs_models.unix_time_millis = unix_time_millis


def install():
    """Puts the recursion cut-off into moto's ReceiveMessage, and the layer's clock
    under moto's SQS."""
    from moto.sqs.models import SQSBackend

    follow_the_clock()

    original = SQSBackend.receive_message

    def receive_message(self, queue_name, *args, **kwargs):
        messages = original(self, queue_name, *args, **kwargs)
        cutoff = STATE.setting("lambda_recursion_cutoff")
        if not STATE.setting("enabled") or not cutoff:
            return messages
        delivered = []
        for message in messages:
            lineage = hops_of(message)
            stopped = getattr(message, "recursion_stopped", False)
            if lineage and lineage[1] >= cutoff and not stopped:
                stop_loop(self, queue_name, message, lineage, cutoff)
            else:
                delivered.append(message)
        return delivered

    SQSBackend.receive_message = receive_message
