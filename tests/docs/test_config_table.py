"""docs/configuration.md's table of keys is the configuration's: every key of
infra/config.schema.json has its row and no row names a key the schema lacks, each default
is the schema's, and each range holds the schema's bounds and those of
functions/core/src/config/ranges.rs."""

import json
import re
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs/configuration.md"
SCHEMA = ROOT / "infra/config.schema.json"
RANGES = ROOT / "functions/core/src/config/ranges.rs"
UNITS = [("d", 86400), ("h", 3600), ("m", 60), ("s", 1)]


def schema_keys():
    """Every key of the schema by its path (`pools[].spot_breaker.within`), with its node."""
    schema = json.loads(SCHEMA.read_text())
    defs = schema["$defs"]

    def resolve(node):
        ref = node.get("$ref", "")
        return {**defs[ref.rsplit("/", 1)[1]], **{k: v for k, v in node.items() if k != "$ref"}} if ref else node

    keys = {}

    def walk(node, path):
        node = resolve(node)
        if path:
            keys[path] = node
        items = resolve(node.get("items", {})) if node.get("type") == "array" else {}
        if items.get("properties"):
            walk(items, f"{path}[]")
        for name, child in node.get("properties", {}).items():
            walk(child, f"{path}.{name}" if path else name)

    walk(schema, "")
    return keys


def page_rows():
    """The table between `<!-- config-keys -->` and `<!-- /config-keys -->`, by key."""
    text = PAGE.read_text()
    table = text.split("<!-- config-keys -->", 1)[1].split("<!-- /config-keys -->", 1)[0]
    rows = {}
    for line in table.strip().splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        key = cells[0].strip("`")
        rows[key] = dict(zip(["default", "range", "meaning"], cells[1:]))
    return rows


def written(value):
    """A schema default as the page writes it."""
    if isinstance(value, str):
        return f"`{value}`"
    return f"`{json.dumps(value).replace(',', ', ').replace(',  ', ', ')}`"


def thousands(number):
    return f"{number:,}"


def seconds_as_duration(seconds):
    for unit, size in UNITS:
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def code_ranges():
    """ranges.rs's ranges by the key they bound (the constant's name, lower case), as the
    page writes them: `1s–1d`, `1–100,000`."""
    source = RANGES.read_text()
    sizes = {"MINUTE": 60, "HOUR": 3600, "DAY": 86400}

    def seconds(expression):
        return eval(expression, {}, sizes)  # noqa: S307 - integer products of ranges.rs's constants

    found = {}
    for name, low, high in re.findall(r"pub const (\w+): DurationRange = secs\(([^,]+), ([^)]+)\);", source):
        found[name.lower()] = f"{seconds_as_duration(seconds(low))}–{seconds_as_duration(seconds(high))}"
    for name, low, high in re.findall(r"pub const (\w+): std::ops::RangeInclusive<u64> = ([\d_]+)..=([\d_]+);", source):
        found[name.lower()] = f"{thousands(int(low))}–{thousands(int(high))}"
    return found


class ConfigTable(unittest.TestCase):
    def test_the_table_has_a_row_for_each_key_of_the_schema_and_no_other(self):
        keys, rows = set(schema_keys()), set(page_rows())
        self.assertEqual(sorted(keys - rows), [], "keys of infra/config.schema.json with no row in configuration.md")
        self.assertEqual(sorted(rows - keys), [], "rows of configuration.md the schema does not have")

    def test_each_default_is_the_schemas(self):
        rows = page_rows()
        for key, node in schema_keys().items():
            if "default" in node:
                with self.subTest(key=key):
                    self.assertEqual(rows[key]["default"], written(node["default"]))
            if key in json.loads(SCHEMA.read_text()).get("required", []) or any(
                key == f"{parent}.{child}" or key == f"{parent}[].{child}"
                for parent, parent_node in schema_keys().items()
                for child in parent_node.get("required", [])
            ):
                with self.subTest(key=key, required=True):
                    self.assertEqual(rows[key]["default"], "required")

    def test_each_range_holds_the_schemas_bounds_and_enum(self):
        rows = page_rows()
        for key, node in schema_keys().items():
            cell = rows[key]["range"]
            with self.subTest(key=key):
                for bound in ("minimum", "maximum"):
                    if bound in node and node.get("type") == "integer":
                        self.assertIn(thousands(node[bound]), cell, f"{key}: the schema's {bound}")
                for value in node.get("enum", []):
                    self.assertIn(f"`{value}`", cell)
                if "minItems" in node:
                    self.assertIn(str(node["minItems"]), cell)

    def test_each_range_ranges_rs_checks_is_written_as_it_checks_it(self):
        rows = page_rows()
        checked = code_ranges()
        self.assertGreaterEqual(len(checked), 5, "ranges read from ranges.rs")
        for name, written_range in checked.items():
            keys = [key for key in rows if key.rsplit(".", 1)[-1] == name]
            if not keys:
                continue  # a command-line option's range (`--reaper-interval`), not a key
            with self.subTest(key=keys[0]):
                self.assertIn(written_range, rows[keys[0]]["range"])


if __name__ == "__main__":
    unittest.main()
