//! Property tests over everything ephemera reads from outside: the configuration file
//! (parser and validator), webhook deliveries (body and headers) and queue message
//! bodies. None of them may panic on any input, and what they accept must be usable
//! (durations that cannot overflow a timestamp, a 200 only for a routed job).
//!
//! Each target runs a fixed number of cases from a fixed seed, so `make test` is
//! bounded and repeatable: `EPHEMERA_FUZZ_CASES=N` runs more, `EPHEMERA_FUZZ_SEED=S`
//! draws other cases. Inputs are drawn freely and also by mutating the files of
//! `tests/fuzz/corpus/<target>/` (each of which is also run as it is); a failure is
//! shrunk and its seed written to `tests/fuzz/regressions/<target>.txt`, which is checked
//! in and replayed first on every run.

mod config;
mod message;
mod webhook;

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, RngSeed};
use std::path::PathBuf;

/// The cases each target runs: `EPHEMERA_FUZZ_CASES`, else 256.
fn cases() -> u32 {
    std::env::var("EPHEMERA_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(256)
}

/// The runner settings of one target: fixed case count and seed, its regression file.
pub fn settings(regressions: &'static str) -> Config {
    let seed = std::env::var("EPHEMERA_FUZZ_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_261_123);
    Config {
        cases: cases(),
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(regressions))),
        ..Config::default()
    }
}

/// The files of `tests/fuzz/corpus/<target>/`, sorted by name; never empty.
pub fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/corpus")
        .join(target);
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("corpus {}: {err}", dir.display()))
        .map(|entry| {
            let path = entry.expect("corpus entry").path();
            let bytes = std::fs::read(&path).expect("corpus file");
            (path.display().to_string(), bytes)
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "corpus {} is empty", dir.display());
    files
}

/// One edit of a byte string: at a position (taken modulo its length), replace the byte,
/// insert one, delete one, or insert a piece that parsers find interesting.
#[derive(Debug, Clone)]
pub enum Edit {
    Replace(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Splice(usize, &'static str),
}

const PIECES: &[&str] = &[
    "\t",
    "\n",
    ": ",
    "- ",
    "[",
    "]",
    "{",
    "}",
    "\"",
    "'",
    "null",
    "-1",
    "0",
    "0s",
    "99999999999999999999",
    "18446744073709551615",
    "3000000d",
    "1e400",
    "\\u0000",
    "é",
    "&a",
    "*a",
    "!!binary",
    "---",
    "#",
    "~",
];

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Edit::Replace(at, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Edit::Insert(at, b)),
        any::<usize>().prop_map(Edit::Delete),
        (any::<usize>(), proptest::sample::select(PIECES)).prop_map(|(at, p)| Edit::Splice(at, p)),
    ]
}

/// A corpus file of `target` with up to 8 edits.
pub fn mutated(target: &str) -> impl Strategy<Value = Vec<u8>> {
    let files: Vec<Vec<u8>> = corpus(target).into_iter().map(|(_, b)| b).collect();
    (
        proptest::sample::select(files),
        proptest::collection::vec(edit(), 0..8),
    )
        .prop_map(|(mut bytes, edits)| {
            for edit in edits {
                apply(&mut bytes, edit);
            }
            bytes
        })
}

fn apply(bytes: &mut Vec<u8>, edit: Edit) {
    let at = |i: usize, len: usize| if len == 0 { 0 } else { i % len };
    match edit {
        Edit::Replace(i, b) if !bytes.is_empty() => {
            let i = at(i, bytes.len());
            bytes[i] = b;
        }
        Edit::Insert(i, b) => bytes.insert(at(i, bytes.len() + 1), b),
        Edit::Delete(i) if !bytes.is_empty() => {
            bytes.remove(at(i, bytes.len()));
        }
        Edit::Splice(i, piece) => {
            let i = at(i, bytes.len() + 1);
            bytes.splice(i..i, piece.bytes());
        }
        _ => {}
    }
}
