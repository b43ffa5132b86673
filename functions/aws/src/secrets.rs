//! Reading the GitHub App's secrets (private key, webhook secrets) from Secrets Manager.
//!
//! Functions read them once at cold start. The value goes straight into a
//! [`SecretString`], so it cannot be logged; errors name the secret, never its value.

use anyhow::Context;
use aws_sdk_secretsmanager::Client;
use secrecy::SecretString;

/// The string value of `secret_id`.
pub async fn read_secret(client: &Client, secret_id: &str) -> anyhow::Result<SecretString> {
    let output = client
        .get_secret_value()
        .secret_id(secret_id)
        .send()
        .await
        .with_context(|| format!("reading secret {secret_id} from Secrets Manager"))?;
    let value = output
        .secret_string
        .with_context(|| format!("secret {secret_id} has no string value"))?;
    Ok(SecretString::from(value))
}
