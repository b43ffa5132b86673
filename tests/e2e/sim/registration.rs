//! generate-jitconfig as GitHub answers it: the runner carries exactly the labels it was
//! given, its name is at most 64 characters (longer is a 422 with GitHub's validation
//! body), and its encoded JIT config has GitHub's shape and size.

use super::{call, config, installation_token, register_with};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ephemera_tests::sim::{self, body::decode_jit_config};
use reqwest::StatusCode;
use serde_json::{json, Value};

#[tokio::test]
async fn a_jit_runner_has_exactly_its_labels_and_a_full_size_config() -> anyhow::Result<()> {
    let sim = sim::start(config("eph")).await?;
    let token = installation_token(&sim).await?;
    let name = "n".repeat(64);
    let answer = register_with(&sim, &token, &name, &["Linux", "gpu"]).await?;
    let labels: Vec<&str> = answer["runner"]["labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        ["Linux", "gpu"],
        "no self-hosted, OS or arch implied"
    );

    let encoded = answer["encoded_jit_config"].as_str().unwrap();
    assert!(
        (4000..=6000).contains(&encoded.len()),
        "{} bytes",
        encoded.len()
    );
    let files: Value = serde_json::from_slice(&STANDARD.decode(encoded)?)?;
    let mut names: Vec<&String> = files.as_object().unwrap().keys().collect();
    names.sort();
    assert_eq!(names, [".credentials", ".credentials_rsaparams", ".runner"]);
    let id = answer["runner"]["id"].as_u64().unwrap();
    assert_eq!(decode_jit_config(encoded), Some((id, name)));
    Ok(())
}

#[tokio::test]
async fn a_runner_name_over_64_characters_is_refused_with_422() -> anyhow::Result<()> {
    let sim = sim::start(config("eph")).await?;
    let token = installation_token(&sim).await?;
    let path = "/orgs/acme/actions/runners/generate-jitconfig";
    let request = json!({ "name": "n".repeat(65), "runner_group_id": 1, "labels": ["linux"] });
    let (status, body) = call(&sim, &token, reqwest::Method::POST, path, Some(request)).await?;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["message"], "Validation Failed");
    assert!(body["errors"][0]
        .as_str()
        .is_some_and(|e| e.contains("64 characters")));
    assert!(body["documentation_url"].is_string());
    assert!(sim.snapshot().runners.is_empty(), "nothing was registered");
    Ok(())
}
