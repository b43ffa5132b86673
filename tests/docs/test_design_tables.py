"""docs/design.md's tables say what the code does: the kinds of item in the runners table
(the keys the AWS crate writes), the lifecycle tables (the moves `lifecycle/` allows) and
the layers inside core (the table core's layers_tests.rs enforces).

The sources are read as text, so a kind of item or a move added to the code without its
row in design.md fails here, naming what is missing."""

import re
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs/design.md"
AWS_SRC = ROOT / "functions/aws/src"
CORE_SRC = ROOT / "functions/core/src"
NUMBERS = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen".split()


def rust_sources(root):
    """The crate's source files, its unit tests left out."""
    return [
        path
        for path in sorted(root.rglob("*.rs"))
        if path.name != "tests.rs" and not path.name.endswith("_tests.rs") and "tests" not in path.parts[len(root.parts):-1]
    ]


def code_item_prefixes():
    """The key prefixes the AWS crate writes into the runners table: `format!("PREFIX#…")`
    in a key function, or a `…_KEY` constant for an item of its own."""
    prefixes = {}
    for path in rust_sources(AWS_SRC):
        text = path.read_text()
        for prefix in re.findall(r'format!\("([A-Z][A-Z_]*)#', text):
            prefixes.setdefault(prefix, path.relative_to(ROOT))
        for prefix in re.findall(r'const [A-Z_]+_KEY: &str = "([A-Z][A-Z_]*)"', text):
            prefixes.setdefault(prefix, path.relative_to(ROOT))
    return prefixes


def section(text, heading):
    """The lines under `heading` up to the next heading of its level or above."""
    level = heading.split(" ", 1)[0]
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith("#") and inside and len(line.split(" ", 1)[0]) <= len(level):
            break
        if line == heading:
            inside = True
            continue
        if inside:
            lines.append(line)
    return lines


def table_after(lines, caption):
    """The rows (lists of cells) of the first table after the line containing `caption`."""
    start = next(i for i, line in enumerate(lines) if caption in line)
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not all(set(cell) <= set("-: ") for cell in cells):
                rows.append(cells)
        elif rows:
            break
    return rows[1:]  # past the header


def names(cell):
    """The status names of a cell: `deleted, pending_delete (a retry)` → {deleted, pending_delete}."""
    cell = re.sub(r"\([^)]*\)", "", cell).replace("—", "")
    return {name.strip().replace("-", "_") for name in cell.split(",") if name.strip()}


def design_item_prefixes():
    rows = table_after(section(DESIGN.read_text(), "## Data (two DynamoDB tables)"), "kinds of item")
    return {re.match(r"`([A-Z][A-Z_]*)", key).group(1) for _, key, _ in rows}


def snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def match_arms(source, function):
    """`Pattern => &[A, B]` arms of `function`'s match, as {pattern name: {names}}, in snake case."""
    body = source.split(f"fn {function}(", 1)[1].split("\n    }\n", 1)[0]
    arms = {}
    for patterns, listed in re.findall(r"^\s*([\w:| ]+?)\s*=>\s*&\[([^\]]*)\]", body, re.M):
        values = {snake(v.strip().split("::")[-1]) for v in listed.split(",") if v.strip()}
        for pattern in patterns.split("|"):
            arms[snake(pattern.strip().split("::")[-1])] = values
    return arms


def moves_from(predecessors):
    """A table read by destination (`to => [from, …]`) as `from => {to, …}`, every status a row."""
    statuses = set(predecessors) | {s for froms in predecessors.values() for s in froms}
    return {status: {to for to, froms in predecessors.items() if status in froms} for status in statuses}


# Each lifecycle file, the function that is its table, and how it reads.
LIFECYCLE = {
    "instance.rs": ("allowed_predecessors", "by destination"),
    "runner.rs": ("allowed_predecessors", "by destination"),
    "job.rs": ("earlier", "by destination"),
    "claim.rs": ("allowed_from", "by move"),
}


def lifecycle_dir():
    found = [path for path in CORE_SRC.rglob("lifecycle") if path.is_dir()]
    assert len(found) == 1, f"one lifecycle/ directory in functions/core/src, found {found}"
    return found[0]


def code_table(file):
    function, reading = LIFECYCLE[file]
    arms = match_arms((lifecycle_dir() / file).read_text(), function)
    return moves_from(arms) if reading == "by destination" else arms


def design_table(file):
    """design.md's table for `lifecycle/<file>`: the first table after the line naming it,
    as {from: {to, …}} for a status table or {move: {from states}} for the claim's."""
    lines = section(DESIGN.read_text(), "## Lifecycle (one source of truth, in core)")
    rows = table_after(lines, f"`lifecycle/{file}`")
    if LIFECYCLE[file][1] == "by destination":
        return {next(iter(names(row[0]))): names(row[1]) for row in rows}
    return {next(iter(names(row[0]))): names(row[1]) for row in rows}


class ItemKinds(unittest.TestCase):
    def test_design_has_a_row_for_each_kind_of_item_the_code_writes(self):
        code, design = code_item_prefixes(), design_item_prefixes()
        missing = {prefix: str(path) for prefix, path in code.items() if prefix not in design}
        self.assertEqual(missing, {}, "kinds of item with no row in docs/design.md's Data table")
        self.assertEqual(sorted(design - set(code)), [], "rows of docs/design.md's Data table no code writes")

    def test_the_count_in_words_is_the_count_of_kinds(self):
        kinds = len(code_item_prefixes())
        said = re.search(r"holds (\w+) kinds of item", DESIGN.read_text())
        self.assertIsNotNone(said, "design.md says how many kinds of item the runners table holds")
        self.assertEqual(said.group(1), NUMBERS[kinds], f"design.md: the table holds {kinds} kinds")
        # The item layout's module doc (items.rs today) says it too, wherever it lives.
        for path in rust_sources(AWS_SRC):
            for count in re.findall(r"holds (\w+) kinds of item", path.read_text()):
                with self.subTest(file=str(path.relative_to(ROOT))):
                    self.assertEqual(count, NUMBERS[kinds], f"{path.name}: the table holds {kinds} kinds")


class LifecycleTables(unittest.TestCase):
    def test_each_lifecycle_file_is_a_table_this_test_reads(self):
        files = sorted(path.name for path in lifecycle_dir().glob("*.rs") if path.name != "mod.rs")
        self.assertEqual(files, sorted(LIFECYCLE), "a new state machine needs its table in design.md and here")

    def test_design_says_how_many_tables_there_are(self):
        self.assertIn(f"the {NUMBERS[len(LIFECYCLE)]} lifecycle tables", DESIGN.read_text())

    def test_each_table_in_design_is_the_codes(self):
        for file in LIFECYCLE:
            with self.subTest(table=file):
                code, design = code_table(file), design_table(file)
                self.assertTrue(code, f"no arms read from {file}")
                self.assertEqual(
                    design, code, f"docs/design.md's table for lifecycle/{file} is not the code's (left: design.md)"
                )


class CoreLayout(unittest.TestCase):
    def test_the_core_crates_layout_list_names_each_of_its_modules(self):
        lib = (CORE_SRC / "lib.rs").read_text()
        layout = lib.split("# Layout", 1)[1].split("\n\n", 1)[0] if "# Layout" in lib else ""
        modules = re.findall(r"^pub mod (\w+);", lib, re.M)
        self.assertTrue(modules, "functions/core/src/lib.rs declares its modules")
        listed = set(re.findall(r"\[`(\w+)`\]", layout))
        self.assertEqual(sorted(set(modules) - listed), [], "modules missing from lib.rs's `# Layout` list")


def code_layers():
    """The layer table of core's layers_tests.rs: name → (modules, layers it imports)."""
    text = (CORE_SRC / "layers_tests.rs").read_text()
    layers = {}
    pattern = r'name: "(\w+)",\s*modules: &\[(.*?)\],\s*imports: &\[(.*?)\],'
    for name, modules, imports in re.findall(pattern, text, re.S):
        layers[name] = (set(re.findall(r'"(\w+)"', modules)), set(re.findall(r'"(\w+)"', imports)))
    return layers


def design_layers():
    rows = table_after(section(DESIGN.read_text(), "## Layers inside core"), "four layers")
    layers = {}
    for name, modules, imports in rows:
        imported = set() if imports.startswith("nothing") else {i.strip() for i in imports.split(",")}
        layers[name] = ({m.strip() for m in modules.split(",")}, imported)
    return layers


class CoreLayers(unittest.TestCase):
    def test_design_lists_the_layers_the_guard_holds(self):
        code = code_layers()
        self.assertEqual(sorted(code), ["decisions", "handlers", "ports", "records"], "layers_tests.rs's LAYERS read")
        self.assertEqual(
            design_layers(), code, "docs/design.md's \"Layers inside core\" table is not layers_tests.rs's LAYERS (left: design.md)"
        )


if __name__ == "__main__":
    unittest.main()
