//! Finding the line of a field in the configuration's YAML text, for errors found after
//! parsing (a duplicate name, a shadowed pool) that the YAML parser cannot place.
//!
//! A small scanner over block-style YAML, keyed by the field path the errors carry
//! (`pools[1].labels`): it walks mapping keys by indentation and sequence items by their
//! dashes. Where the text is in flow style (`labels: [a, b]`, `{ name: x }`) it stops at
//! the deepest line it could place, which is still the line to look at.

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// Splits `pools[1].labels` into `pools`, `[1]`, `labels`.
fn steps(field: &str) -> Vec<Step<'_>> {
    let mut steps = Vec::new();
    for part in field.split('.').filter(|p| !p.is_empty()) {
        let mut pieces = part.split('[');
        if let Some(key) = pieces.next().filter(|k| !k.is_empty()) {
            steps.push(Step::Key(key));
        }
        for index in pieces {
            if let Ok(i) = index.trim_end_matches(']').parse() {
                steps.push(Step::Index(i));
            }
        }
    }
    steps
}

/// What the scanner needs of one line of text.
#[derive(Debug)]
struct Line<'a> {
    /// 1-based line number.
    number: usize,
    /// Column of the first character (a dash or a key).
    start: usize,
    /// Whether the line opens a sequence item.
    dash: bool,
    /// The mapping key on the line and its column, if there is one.
    key: Option<(&'a str, usize)>,
}

fn scan(text: &str) -> Vec<Line<'_>> {
    text.lines()
        .enumerate()
        .filter_map(|(i, raw)| {
            let start = raw.len() - raw.trim_start().len();
            let mut rest = &raw[start..];
            if rest.is_empty() || rest.starts_with('#') || rest.starts_with("---") {
                return None;
            }
            let mut column = start;
            let dash = rest == "-" || rest.starts_with("- ");
            if dash {
                let after = rest[1..].trim_start();
                column += rest.len() - after.len();
                rest = after;
            }
            let key = rest
                .split_once(':')
                .map(|(key, _)| key.trim().trim_matches(|c| c == '"' || c == '\''))
                .filter(|key| !key.is_empty() && !key.contains([' ', '{', '[', ',']))
                .map(|key| (key, column));
            Some(Line {
                number: i + 1,
                start,
                dash,
                key,
            })
        })
        .collect()
}

/// The 1-based line of `field` in `text`: the line of its key, or of its sequence item;
/// the deepest enclosing line found when the rest cannot be placed; `None` when not even
/// the first step is found.
pub(crate) fn line_of(text: &str, field: &str) -> Option<usize> {
    let lines = scan(text);
    let mut range = 0..lines.len();
    let mut found = None;
    for step in steps(field) {
        let at = match step {
            Step::Key(name) => find_key(&lines, range.clone(), name),
            Step::Index(index) => find_item(&lines, range.clone(), index),
        };
        let Some((at, end)) = at else { break };
        found = Some(lines[at].number);
        range = match step {
            // The key's value starts after it; an item's first key is on its dash line.
            Step::Key(_) => at + 1..end,
            Step::Index(_) => at..end,
        };
    }
    found
}

/// The line holding key `name` at the shallowest key column of `range`, and the end of
/// its block.
fn find_key(lines: &[Line], range: std::ops::Range<usize>, name: &str) -> Option<(usize, usize)> {
    let column = range
        .clone()
        .filter_map(|i| lines[i].key.map(|(_, c)| c))
        .min()?;
    let at = range
        .clone()
        .find(|&i| lines[i].key == Some((name, column)))?;
    // A sequence may sit at its key's own column (`pools:` then `- name: a`).
    let end = (at + 1..range.end)
        .find(|&i| lines[i].start < column || (lines[i].start == column && !lines[i].dash))
        .unwrap_or(range.end);
    Some((at, end))
}

/// The line of item `index` among the shallowest dashes of `range`, and its end.
fn find_item(
    lines: &[Line],
    range: std::ops::Range<usize>,
    index: usize,
) -> Option<(usize, usize)> {
    let column = range
        .clone()
        .filter(|&i| lines[i].dash)
        .map(|i| lines[i].start)
        .min()?;
    let mut items = range
        .clone()
        .filter(|&i| lines[i].dash && lines[i].start == column);
    let at = items.nth(index)?;
    let end = (at + 1..range.end)
        .find(|&i| lines[i].start <= column)
        .unwrap_or(range.end);
    Some((at, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
# a comment
deployment: eph
github:
  app_id: 42
pools:
  - name: a
    labels: [linux, x64]
    max_runners: 2
  - name: b
    labels:
      - linux
      - arm64
    min_idle: 3
reaper:
  deleted_ttl: 7d
";

    #[test]
    fn keys_and_items_are_found_by_path() {
        assert_eq!(line_of(TEXT, "deployment"), Some(2));
        assert_eq!(line_of(TEXT, "github.app_id"), Some(4));
        assert_eq!(line_of(TEXT, "pools[0].name"), Some(6));
        assert_eq!(line_of(TEXT, "pools[1]"), Some(9));
        assert_eq!(line_of(TEXT, "pools[1].name"), Some(9));
        assert_eq!(line_of(TEXT, "pools[1].min_idle"), Some(13));
        assert_eq!(line_of(TEXT, "pools[1].labels[1]"), Some(12));
        assert_eq!(line_of(TEXT, "reaper.deleted_ttl"), Some(15));
    }

    #[test]
    fn unplaceable_steps_give_the_deepest_line_found() {
        assert_eq!(line_of(TEXT, "pools[0].labels[1]"), Some(7));
        assert_eq!(line_of(TEXT, "pools[0].min_idle"), Some(6));
        assert_eq!(line_of(TEXT, "nothing"), None);
    }

    #[test]
    fn a_sequence_at_its_keys_column_is_inside_it() {
        let text = "pools:\n- name: a\n- name: b\n  max_runners: 1\nother: 1\n";
        assert_eq!(line_of(text, "pools[1].max_runners"), Some(4));
        assert_eq!(line_of(text, "other"), Some(5));
    }
}
