//! Every parse and type error of a configuration file, not only the first, in YAML's
//! words.
//!
//! The typed parse (serde) stops at its first error. So the text is also read as a
//! generic YAML value, and after each error the offending field is set aside: an
//! unknown key or a value of a field that has a default is removed, a value of the wrong
//! type is replaced by one of the expected type, and the typed parse runs again on what
//! is left, until it passes or an error cannot be set aside (a missing field, a syntax
//! error). The errors found after the first have no position from the parser; their line
//! is the field's ([`super::locate`]).

use serde_yaml_ng::{Mapping, Number, Value};

/// The most errors one file reports (each costs a parse).
const MOST: usize = 50;

/// One step of a field path as serde_path_to_error prints it (`pools[1].max_runners`).
#[derive(Debug, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

fn steps(path: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let mut pieces = part.split('[');
        if let Some(key) = pieces.next().filter(|k| !k.is_empty()) {
            steps.push(Step::Key(key.to_owned()));
        }
        for index in pieces {
            if let Ok(i) = index.trim_end_matches(']').parse() {
                steps.push(Step::Index(i));
            }
        }
    }
    steps
}

/// The slot `path` names in `value`, as the parent container and the last step.
fn slot<'v>(value: &'v mut Value, path: &'v [Step]) -> Option<(&'v mut Value, &'v Step)> {
    let (last, parents) = path.split_last()?;
    let mut current = value;
    for step in parents {
        current = match (step, current) {
            (Step::Key(key), Value::Mapping(map)) => map.get_mut(key.as_str())?,
            (Step::Index(i), Value::Sequence(seq)) => seq.get_mut(*i)?,
            (_, Value::Tagged(tagged)) => &mut tagged.value,
            _ => return None,
        };
    }
    Some((current, last))
}

/// A value of the type an error message says was expected, if it names one.
fn placeholder(message: &str) -> Option<Value> {
    let expected = message.split(", expected ").nth(1)?;
    let word = expected.trim_start_matches("a ").trim_start_matches("an ");
    let value = if word.starts_with('u') || word.starts_with('i') || word.starts_with("integer") {
        Value::Number(Number::from(1u64))
    } else if word.starts_with('f') {
        Value::Number(Number::from(1.0f64))
    } else if word.starts_with("string") || word.starts_with("duration") {
        Value::String("1m".to_owned())
    } else if word.starts_with("bool") {
        Value::Bool(false)
    } else if word.starts_with("sequence") || word.starts_with("list") {
        Value::Sequence(Vec::new())
    } else if word.starts_with("struct") || word.starts_with("map") {
        Value::Mapping(Mapping::new())
    } else {
        return None;
    };
    Some(value)
}

/// Sets aside the field at `path` that failed with `message`; false when it cannot be
/// (the next parse would only fail the same way or say something that follows from it).
fn set_aside(value: &mut Value, path: &str, message: &str) -> bool {
    if message.starts_with("missing field") {
        return false;
    }
    let path = steps(path);
    let Some((parent, last)) = slot(value, &path) else {
        return false;
    };
    let replacement = placeholder(message);
    match (parent, last) {
        (Value::Mapping(map), Step::Key(key)) => match replacement {
            Some(new) if !message.starts_with("unknown field") => {
                map.insert(Value::String(key.clone()), new).is_some()
            }
            _ => map.remove(key.as_str()).is_some(),
        },
        (Value::Sequence(seq), Step::Index(i)) if *i < seq.len() => match replacement {
            Some(new) => {
                seq[*i] = new;
                true
            }
            None => {
                seq.remove(*i);
                true
            }
        },
        _ => false,
    }
}

/// The errors after the first: `(path, message)` of each further field that fails the
/// typed parse of `T`, once `first` (at `first_path`) is set aside.
pub fn further_errors<T: serde::de::DeserializeOwned>(
    text: &str,
    first_path: &str,
    first: &str,
) -> Vec<(String, String)> {
    let Ok(mut value) = serde_yaml_ng::from_str::<Value>(text) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let (mut path, mut message) = (first_path.to_owned(), first.to_owned());
    while found.len() < MOST && set_aside(&mut value, &path, &message) {
        match serde_path_to_error::deserialize::<_, T>(value.clone()) {
            Ok(_) => break,
            Err(err) => {
                path = super::known_path(&err.path().to_string());
                message = err.into_inner().to_string();
                if found.iter().any(|(p, m)| *p == path && *m == message) {
                    break;
                }
                if !message.starts_with("missing field") {
                    found.push((path.clone(), message.clone()));
                }
            }
        }
    }
    found
}

/// serde's words for types made YAML's: `u32` → an integer, `sequence` → a list,
/// `map`/`struct X` → a mapping.
pub fn yaml_words(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for (i, part) in message.split(", expected ").enumerate() {
        if i > 0 {
            out.push_str(", expected ");
            out.push_str(&expected_words(part));
        } else {
            out.push_str(&found_words(part));
        }
    }
    out
}

fn expected_words(expected: &str) -> String {
    const INTEGERS: [&str; 10] = [
        "u8", "u16", "u32", "u64", "usize", "i8", "i16", "i32", "i64", "isize",
    ];
    let word = expected.split(' ').next().unwrap_or_default();
    if INTEGERS.contains(&word) && word.starts_with('u') {
        return "an integer of 0 or more".to_owned();
    }
    if INTEGERS.contains(&word) {
        return "an integer".to_owned();
    }
    if word == "f32" || word == "f64" {
        return "a number".to_owned();
    }
    match expected {
        "a sequence" => "a list".to_owned(),
        "a map" => "a mapping".to_owned(),
        _ if word == "struct" => "a mapping".to_owned(),
        _ => expected.to_owned(),
    }
}

fn found_words(found: &str) -> String {
    found
        .replace("invalid type: sequence", "invalid type: list")
        .replace("invalid type: map", "invalid type: mapping")
        .replace("invalid type: unit value", "invalid type: null")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_types_are_said_in_yaml_words() {
        assert_eq!(
            yaml_words("invalid type: string \"many\", expected u32"),
            "invalid type: string \"many\", expected an integer of 0 or more"
        );
        assert_eq!(
            yaml_words("invalid type: map, expected a sequence"),
            "invalid type: mapping, expected a list"
        );
        assert_eq!(
            yaml_words("invalid type: sequence, expected struct PoolConfig"),
            "invalid type: list, expected a mapping"
        );
        assert_eq!(
            yaml_words("invalid type: integer `3`, expected a boolean"),
            "invalid type: integer `3`, expected a boolean"
        );
    }
}
