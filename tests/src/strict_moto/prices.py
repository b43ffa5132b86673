"""Prices, answered from recorded answers (tests/fixtures/prices/price-list.json, whose
README says where their shape comes from): the Price List Query API's GetProducts, which
moto does not offer at all, and EC2's DescribeSpotPriceHistory, where moto answers one
fixed price for every type and zone. A region the fixture offers nothing in answers an
empty PriceList and an empty history, as AWS does for a type a region does not offer.

The Price List Query API has endpoints in a few regions only
(https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/using-price-list-query-api.html);
a GetProducts signed for another region is refused, standing for the endpoint that does
not exist there."""

import json
import os
import time
import urllib.parse
from xml.sax.saxutils import escape

from .core import STATE, json_error, read_body, region_of

FIXTURE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "prices", "price-list.json"
)
PRICE_LIST_REGIONS = {"us-east-1", "eu-central-1", "ap-south-1"}
JSON_11 = "application/x-amz-json-1.1"
FILTER_TYPES = {"TERM_MATCH", "EQUALS", "CONTAINS", "ANY_OF", "NONE_OF"}

_recorded = None


def recorded():
    global _recorded
    if _recorded is None:
        with open(FIXTURE, encoding="utf-8") as file:
            _recorded = json.load(file)
    return _recorded


def is_get_products(environ):
    return environ.get("HTTP_X_AMZ_TARGET", "") == "AWSPriceListService.GetProducts"


def invalid(start_response, message):
    STATE.count("pricing_invalid_parameter")
    body = {"__type": "InvalidParameterException", "Message": message}
    return json_error(start_response, JSON_11, body)


def matches(product, filters):
    """Whether every filter names the product's value: an attribute, or its
    `productFamily` (a field GetProducts filters on too, as GetAttributeValues lists it)."""
    fields = dict(product.get("product", {}).get("attributes", {}))
    fields["productFamily"] = product.get("product", {}).get("productFamily")
    return all(fields.get(f["Field"]) == f["Value"] for f in filters)


def get_products(environ, start_response):
    """GetProducts: the recorded products of AmazonEC2 matching every TERM_MATCH filter."""
    region = region_of(environ)
    if region not in PRICE_LIST_REGIONS:
        STATE.count("pricing_no_endpoint")
        body = {"__type": "UnknownEndpoint", "Message": f"api.pricing.{region}.amazonaws.com does not exist"}
        return json_error(start_response, JSON_11, body, status="404 Not Found")
    try:
        request = json.loads(read_body(environ) or b"{}")
    except ValueError:
        return invalid(start_response, "the request body is not JSON")
    if request.get("ServiceCode") != "AmazonEC2":
        return invalid(start_response, f"no recorded answers for service {request.get('ServiceCode')!r}")
    filters = request.get("Filters") or []
    for f in filters:
        if f.get("Type") not in FILTER_TYPES or not f.get("Field") or "Value" not in f:
            return invalid(start_response, f"invalid filter {f!r}")
        if f["Type"] != "TERM_MATCH":
            return invalid(start_response, f"only TERM_MATCH filters are recorded, not {f['Type']}")
    max_results = request.get("MaxResults", 100)
    if not isinstance(max_results, int) or not 1 <= max_results <= 100:
        return invalid(start_response, "MaxResults must be between 1 and 100")
    found = [
        json.dumps(product, separators=(",", ":"))
        for by_type in recorded()["get_products"].values()
        for products in by_type.values()
        for product in products
        if matches(product, filters)
    ]
    payload = json.dumps({"FormatVersion": request.get("FormatVersion", "aws_v1"), "PriceList": found[:max_results]}).encode()
    start_response(
        "200 OK",
        [("Content-Type", JSON_11), ("Content-Length", str(len(payload))), ("x-amzn-RequestId", "strict-" + str(time.monotonic_ns()))],
    )
    return [payload]


def spot_request(environ):
    """The form of a DescribeSpotPriceHistory request (EC2's query protocol), or None."""
    if environ.get("REQUEST_METHOD") != "POST" or environ.get("HTTP_X_AMZ_TARGET"):
        return None
    if "x-www-form-urlencoded" not in environ.get("CONTENT_TYPE", ""):
        return None
    form = urllib.parse.parse_qs(read_body(environ).decode("utf-8", "replace"))
    if form.get("Action") != ["DescribeSpotPriceHistory"]:
        return None
    return form


def numbered(form, name):
    return [values[0] for key, values in sorted(form.items()) if key.startswith(name + ".")]


def spot_price_history(environ, form, start_response):
    """DescribeSpotPriceHistory: the recorded current price of each zone of the region."""
    region = region_of(environ)
    types = set(numbered(form, "InstanceType"))
    descriptions = set(numbered(form, "ProductDescription"))
    zone = (form.get("AvailabilityZone") or [None])[0]
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    items = []
    if not descriptions or "Linux/UNIX" in descriptions:
        for instance_type, zones in recorded()["spot_price_history"].get(region, {}).items():
            if types and instance_type not in types:
                continue
            for zone_name, price in zones:
                if zone and zone != zone_name:
                    continue
                items.append(
                    "<item>"
                    f"<instanceType>{escape(instance_type)}</instanceType>"
                    "<productDescription>Linux/UNIX</productDescription>"
                    f"<spotPrice>{escape(price)}</spotPrice>"
                    f"<timestamp>{now}</timestamp>"
                    f"<availabilityZone>{escape(zone_name)}</availabilityZone>"
                    "</item>"
                )
    payload = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<DescribeSpotPriceHistoryResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
        f"<requestId>strict-{time.monotonic_ns()}</requestId>"
        f"<spotPriceHistorySet>{''.join(items)}</spotPriceHistorySet>"
        "<nextToken></nextToken>"
        "</DescribeSpotPriceHistoryResponse>"
    ).encode()
    start_response("200 OK", [("Content-Type", "text/xml;charset=UTF-8"), ("Content-Length", str(len(payload)))])
    return [payload]
