"""DynamoDB as strict as AWS: requests taken one at a time (DynamoDB runs transactions
serializably; moto alone lets them race), transaction conflicts between overlapping
transactions on one item, the 400 KB item and the 100-action transaction limits.

"In flight" is modelled explicitly, since requests are serialised here: a transaction
is in flight from its arrival until the later of its end and `arrival + window`
(`dynamodb_transaction_in_flight_ms`). A transaction that arrived while another one
touching one of its items was in flight is cancelled with `TransactionConflict` at that
item's index; a single-item write to such an item gets TransactionConflictException."""

import base64
import json
import threading

from .core import STATE, account_of, json_error, read_body, region_of

CONTENT_TYPE = "application/x-amz-json-1.0"
NAMESPACE = "com.amazonaws.dynamodb.v20120810#"
VALIDATION = "com.amazon.coral.validate#ValidationException"
ONGOING = "Transaction is ongoing for the item"
SERIAL = threading.Lock()
SINGLE_WRITES = {"PutItem": "Item", "UpdateItem": "Key", "DeleteItem": "Key"}


def value_size(value):
    """Bytes a DynamoDB attribute value counts for in the item size."""
    kind, inner = next(iter(value.items()))
    if kind == "S":
        return len(inner.encode())
    if kind == "N":
        digits = inner.lstrip("-").replace(".", "").strip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(base64.b64decode(inner))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in inner)
    if kind == "NS":
        return sum(value_size({"N": n}) for n in inner)
    if kind == "BS":
        return sum(len(base64.b64decode(b)) for b in inner)
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(v) for k, v in inner.items())
    return 0


def item_size(item):
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def validation(start_response, message):
    return json_error(start_response, CONTENT_TYPE, {"__type": VALIDATION, "message": message})


def too_many_actions(count):
    members = ", ".join(
        f"com.amazonaws.dynamodb.v20120810.TransactWriteItem@{0x1A2B3C00 + i:x}" for i in range(count)
    )
    limit = STATE.setting("dynamodb_transact_max_actions")
    return (
        f"1 validation error detected: Value '[{members}]' at 'transactItems' failed to satisfy "
        f"constraint: Member must have length less than or equal to {limit}"
    )


def key_of(environ, table_name, item):
    """The identity of the item `item` (a key or a whole item) in `table_name`."""
    from moto.dynamodb.models import dynamodb_backends

    try:
        table = dynamodb_backends[account_of(environ)][region_of(environ)].get_table(table_name)
        names = [table.hash_key_attr, table.range_key_attr]
    except Exception:  # an unknown table: moto answers ResourceNotFoundException itself
        names = sorted(item)
    key = {name: item.get(name) for name in names if name}
    return table_name, json.dumps(key, sort_keys=True)


def transaction_keys(environ, actions):
    keys = []
    for action in actions:
        kind, body = next(iter(action.items()))
        item = body.get("Item") if kind == "Put" else body.get("Key")
        keys.append(key_of(environ, body.get("TableName"), item or {}))
    return keys


def in_flight_keys(arrival):
    """Items of the transactions that were in flight when a request arrived at `arrival`."""
    window = STATE.setting("dynamodb_transaction_in_flight_ms") / 1000.0
    now = STATE.clock.now()
    STATE.transactions = [t for t in STATE.transactions if max(t["arrival"] + window, t["done"]) > now - 10]
    busy = set()
    for earlier in STATE.transactions:
        if arrival < max(earlier["arrival"] + window, earlier["done"]):
            busy |= earlier["keys"]
    return busy


def cancelled(start_response, reasons):
    codes = ", ".join(reason["Code"] for reason in reasons)
    body = {
        "__type": NAMESPACE + "TransactionCanceledException",
        "Message": f"Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]",
        "CancellationReasons": reasons,
    }
    return json_error(start_response, CONTENT_TYPE, body)


def check_transaction(environ, start_response, request, arrival):
    actions = request.get("TransactItems") or []
    if len(actions) > STATE.setting("dynamodb_transact_max_actions"):
        STATE.count("dynamodb_too_many_actions")
        return validation(start_response, too_many_actions(len(actions))), None
    for action in actions:
        item = action.get("Put", {}).get("Item")
        if item and item_size(item) > STATE.setting("dynamodb_item_max_bytes"):
            STATE.count("dynamodb_item_too_large")
            return validation(start_response, "Item size has exceeded the maximum allowed size"), None
    keys = transaction_keys(environ, actions)
    if STATE.setting("dynamodb_transaction_conflicts"):
        busy = in_flight_keys(arrival)
        if any(key in busy for key in keys):
            STATE.count("dynamodb_transaction_conflict")
            reasons = [
                {"Code": "TransactionConflict", "Message": ONGOING} if key in busy else {"Code": "None"}
                for key in keys
            ]
            return cancelled(start_response, reasons), None
    return None, keys


def check_single_write(environ, start_response, action, request, arrival):
    item = request.get(SINGLE_WRITES[action]) or {}
    if action == "PutItem" and item_size(item) > STATE.setting("dynamodb_item_max_bytes"):
        STATE.count("dynamodb_item_too_large")
        return validation(start_response, "Item size has exceeded the maximum allowed size")
    if STATE.setting("dynamodb_transaction_conflicts"):
        if key_of(environ, request.get("TableName"), item) in in_flight_keys(arrival):
            STATE.count("dynamodb_write_conflict")
            body = {"__type": NAMESPACE + "TransactionConflictException", "message": ONGOING}
            return json_error(start_response, CONTENT_TYPE, body)
    return None


def handle(app, environ, start_response, action, strict):
    """Answers one DynamoDB request, one at a time, refusing what DynamoDB refuses."""
    arrival = STATE.clock.now()
    with SERIAL:
        if not strict or action not in ("TransactWriteItems", *SINGLE_WRITES):
            return list(app(environ, start_response))
        request = json.loads(read_body(environ) or b"{}")
        with STATE.lock:
            if action == "TransactWriteItems":
                refusal, keys = check_transaction(environ, start_response, request, arrival)
            else:
                refusal = check_single_write(environ, start_response, action, request, arrival)
                keys = None
        if refusal:
            return refusal
        answer = list(app(environ, start_response))
        if keys is not None:
            with STATE.lock:
                done = STATE.clock.now()
                STATE.transactions.append({"keys": set(keys), "arrival": arrival, "done": done})
        return answer


def install():
    """moto refuses items over its own 405,000-byte estimate, under DynamoDB's 400 KB
    (409,600 bytes). Strict, the layer's exact count decides for PutItem and transaction
    Puts, and moto's rougher count is kept, with a 1 KB margin, only as the guard for
    items grown by UpdateItem."""
    from moto.dynamodb.exceptions import ItemSizeTooLarge
    from moto.dynamodb.models.dynamo_type import DynamoType, LimitedSizeDict

    original = LimitedSizeDict.__setitem__

    def setitem(self, key, value):
        if not STATE.setting("enabled"):
            return original(self, key, value)

        def size(part):
            return part.size() if type(part) is DynamoType else len(str(part).encode())

        total = sum(size(part) for part in [*self.keys(), *self.values()])
        if total + size(key) + size(value) > STATE.setting("dynamodb_item_max_bytes") + 1024:
            raise ItemSizeTooLarge
        dict.__setitem__(self, key, value)

    LimitedSizeDict.__setitem__ = setitem
