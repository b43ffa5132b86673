//! The encoded JIT config of a runner, in GitHub's shape and size.
//!
//! As the Actions runner reads it (`Runner.Listener/Runner.cs`, `--jitconfig`): base64
//! of a JSON object whose keys are file names and whose values are the base64 contents
//! of those files: `.runner` (the runner's settings), `.credentials` (its OAuth client)
//! and `.credentials_rsaparams` (its RSA private key, as `RSAParametersSerializable`
//! writes it: `d`, `dp`, `dq`, `exponent`, `inverseQ`, `modulus`, `p`, `q`, each base64).
//! A 2048-bit key makes the whole about 4.5 KB, as GitHub's do. The key bytes are
//! derived from the runner (so a runner's config is the same every time it is encoded)
//! and have a key's sizes, not a key's arithmetic.

use super::state::SimRunner;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The three files the runner needs before it can start.
pub const FILES: [&str; 3] = [".runner", ".credentials", ".credentials_rsaparams"];

/// Bytes of a 2048-bit key's modulus and private exponent; half that for the primes
/// and the CRT values.
const KEY_BYTES: usize = 256;

/// `len` bytes expanded from the runner and a purpose, SHA-256 in counter mode.
fn derived_bytes(runner: &SimRunner, purpose: &str, len: usize) -> Vec<u8> {
    let seed = format!(
        "{}/{}/{}/{}",
        runner.id,
        runner.name,
        runner.created_at.unix_timestamp_nanos(),
        purpose
    );
    let mut out = Vec::with_capacity(len + 32);
    let mut counter = 0u32;
    while out.len() < len {
        let mut hash = Sha256::new();
        hash.update(seed.as_bytes());
        hash.update(counter.to_be_bytes());
        out.extend_from_slice(&hash.finalize());
        counter += 1;
    }
    out.truncate(len);
    out
}

/// A big-endian number of `len` bytes with its top bit set and odd, as a key's modulus
/// and primes are.
fn key_number(runner: &SimRunner, purpose: &str, len: usize) -> String {
    let mut bytes = derived_bytes(runner, purpose, len);
    bytes[0] |= 0x80;
    bytes[len - 1] |= 1;
    STANDARD.encode(bytes)
}

fn uuid(runner: &SimRunner, purpose: &str) -> String {
    let h = hex::encode(derived_bytes(runner, purpose, 16));
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn dot_runner(runner: &SimRunner, work_folder: &str) -> Value {
    let scope = &runner.scope;
    let github_url = match &scope.repo {
        Some(repo) => format!("https://github.com/{}/{repo}", scope.owner),
        None => format!("https://github.com/{}", scope.owner),
    };
    // The pipelines service URL carries a 50-character tenant token.
    let tenant = STANDARD
        .encode(derived_bytes(runner, "tenant", 38))
        .replace(['+', '/', '='], "x");
    json!({
        "AgentId": runner.id.to_string(),
        "AgentName": runner.name,
        "DisableUpdate": "False",
        "Ephemeral": "True",
        "PoolId": runner.runner_group_id.to_string(),
        "PoolName": "Default",
        "ServerUrl": format!("https://pipelinesghubeus2.actions.githubusercontent.com/{tenant}/"),
        "GitHubUrl": github_url,
        "WorkFolder": work_folder,
        "UseV2Flow": "True",
        "ServerUrlV2": "https://broker.actions.githubusercontent.com/",
    })
}

fn credentials(runner: &SimRunner) -> Value {
    let client = uuid(runner, "client");
    json!({
        "Scheme": "OAuth",
        "Data": {
            "ClientId": client,
            "AuthorizationUrl": format!("https://vstoken.actions.githubusercontent.com/_apis/oauth2/token/{}", uuid(runner, "tenant-id")),
            "RequireFipsCryptography": "True",
        },
    })
}

fn rsa_parameters(runner: &SimRunner) -> Value {
    let half = KEY_BYTES / 2;
    json!({
        "d": STANDARD.encode(derived_bytes(runner, "d", KEY_BYTES)),
        "dp": STANDARD.encode(derived_bytes(runner, "dp", half)),
        "dq": STANDARD.encode(derived_bytes(runner, "dq", half)),
        "exponent": "AQAB",
        "inverseQ": STANDARD.encode(derived_bytes(runner, "inverseQ", half)),
        "modulus": key_number(runner, "modulus", KEY_BYTES),
        "p": key_number(runner, "p", half),
        "q": key_number(runner, "q", half),
    })
}

/// The encoded JIT config of a runner (the same string every time for one runner).
pub fn encode_jit_config(runner: &SimRunner, work_folder: &str) -> String {
    let file = |content: Value| STANDARD.encode(content.to_string());
    let files = json!({
        ".runner": file(dot_runner(runner, work_folder)),
        ".credentials": file(credentials(runner)),
        ".credentials_rsaparams": file(rsa_parameters(runner)),
    });
    STANDARD.encode(files.to_string())
}

/// The runner id and name inside an encoded JIT config, read as the runner reads it;
/// `None` when it is not one, or lacks a file the runner needs.
pub fn decode_jit_config(encoded: &str) -> Option<(u64, String)> {
    let files: Value = serde_json::from_slice(&STANDARD.decode(encoded.trim()).ok()?).ok()?;
    let contents: Vec<Vec<u8>> = FILES
        .iter()
        .map(|name| STANDARD.decode(files.get(name)?.as_str()?).ok())
        .collect::<Option<_>>()?;
    let dot_runner: Value = serde_json::from_slice(&contents[0]).ok()?;
    let id = match dot_runner.get("AgentId")? {
        Value::String(s) => s.parse().ok()?,
        other => other.as_u64()?,
    };
    let name = dot_runner.get("AgentName")?.as_str()?.to_owned();
    Some((id, name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::state::{RunnerScope, SimState};

    fn runner(name: &str) -> SimRunner {
        let mut state = SimState::default();
        let scope = RunnerScope {
            owner: "acme".into(),
            repo: None,
        };
        state
            .register_runner(scope, name, vec!["linux".into()], 1)
            .unwrap()
    }

    #[test]
    fn jit_config_decodes_back_to_its_runner_and_is_stable() {
        let r = runner("eph-linux-1");
        let encoded = encode_jit_config(&r, "_work");
        assert_eq!(decode_jit_config(&encoded), Some((r.id, r.name.clone())));
        assert_eq!(encode_jit_config(&r, "_work"), encoded);
        assert_eq!(decode_jit_config("not base64"), None);
    }

    #[test]
    fn jit_config_has_githubs_size_and_files() {
        let r = runner(&"n".repeat(64));
        let encoded = encode_jit_config(&r, "_work");
        assert!(
            (4000..=6000).contains(&encoded.len()),
            "{} bytes",
            encoded.len()
        );
        let files: Value = serde_json::from_slice(&STANDARD.decode(&encoded).unwrap()).unwrap();
        let keys: Vec<&str> = files
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys.len(), 3);
        let params = STANDARD
            .decode(files[".credentials_rsaparams"].as_str().unwrap())
            .unwrap();
        let params: Value = serde_json::from_slice(&params).unwrap();
        let modulus = STANDARD
            .decode(params["modulus"].as_str().unwrap())
            .unwrap();
        assert_eq!(modulus.len(), 256);
        // A config without the key file is not one the runner can start with.
        let partial = json!({ ".runner": files[".runner"], ".credentials": files[".credentials"] });
        assert_eq!(
            decode_jit_config(&STANDARD.encode(partial.to_string())),
            None
        );
    }
}
