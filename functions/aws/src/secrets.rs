//! Reading the GitHub App's secrets (private key, webhook secrets) from Secrets Manager.
//!
//! Functions read them at cold start and again when they rotate (see [`crate::reload`]).
//! The value goes straight into a [`SecretString`], so it cannot be logged; errors name
//! the secret, never its value.

use anyhow::Context;
use aws_sdk_secretsmanager::Client;
use ephemera_core::ports::{AppKeyError, AppKeySource};
use secrecy::{ExposeSecret, SecretString};

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

/// The GitHub App's private key as it is in Secrets Manager now (the
/// [`AppKeySource`] port): what the GitHub client reads again when GitHub refuses the key it has (a key rotated in the App's settings
/// and put into the secret).
pub struct AppKeySecret {
    pub client: Client,
    pub secret_id: String,
}

#[async_trait::async_trait]
impl AppKeySource for AppKeySecret {
    async fn current_key(&self) -> Result<SecretString, AppKeyError> {
        let key = read_secret(&self.client, &self.secret_id)
            .await
            .map_err(|error| AppKeyError::Unreadable(error.into()))?;
        if !looks_like_pem_key(&key) {
            return Err(AppKeyError::NotAKey { place: self.name() });
        }
        Ok(key)
    }

    fn name(&self) -> String {
        format!("secret {}", self.secret_id)
    }
}

/// How long after a new value was put into a secret its previous value (Secrets
/// Manager's `AWSPREVIOUS` stage) is still accepted as a webhook secret: the time an
/// operator has to give GitHub the new one after putting it here.
pub(crate) const ROTATION_WINDOW: std::time::Duration = std::time::Duration::from_secs(3600);

/// A secret's current value, its version, and within [`ROTATION_WINDOW`] of a rotation
/// its previous value.
#[derive(Clone)]
pub struct VersionedSecret {
    pub value: SecretString,
    /// Changes with every new value, and when the previous one stops being accepted.
    pub version: String,
    pub previous: Option<SecretString>,
}

/// The current value of `secret_id` with its version; with `with_previous`, its previous
/// value too while the current one is younger than [`ROTATION_WINDOW`].
pub(crate) async fn read_versioned(
    client: &Client,
    secret_id: &str,
    with_previous: bool,
) -> anyhow::Result<VersionedSecret> {
    let output = client
        .get_secret_value()
        .secret_id(secret_id)
        .send()
        .await
        .with_context(|| format!("reading secret {secret_id} from Secrets Manager"))?;
    let version = output.version_id().unwrap_or_default().to_owned();
    let age = output.created_date().map(|created| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        now - created.as_secs_f64()
    });
    let value = output
        .secret_string
        .with_context(|| format!("secret {secret_id} has no string value"))?;
    let in_window = age.is_some_and(|age| age < ROTATION_WINDOW.as_secs_f64());
    let previous = if with_previous && in_window {
        read_previous(client, secret_id).await?
    } else {
        None
    };
    let marker = if previous.is_some() { "+previous" } else { "" };
    Ok(VersionedSecret {
        value: SecretString::from(value),
        version: format!("{version}{marker}"),
        previous,
    })
}

/// The `AWSPREVIOUS` value of `secret_id`, if it has one.
async fn read_previous(client: &Client, secret_id: &str) -> anyhow::Result<Option<SecretString>> {
    let output = client
        .get_secret_value()
        .secret_id(secret_id)
        .version_stage("AWSPREVIOUS")
        .send()
        .await;
    match output {
        Ok(output) => Ok(output.secret_string.map(SecretString::from)),
        Err(err)
            if err
                .as_service_error()
                .is_some_and(|e| e.is_resource_not_found_exception()) =>
        {
            Ok(None)
        }
        Err(err) => Err(anyhow::Error::new(err)
            .context(format!("reading the previous value of secret {secret_id}"))),
    }
}

/// Whether `value` is shaped like a PEM private key (the placeholder a new stack puts
/// into the App key secret is not); the key itself is parsed by the GitHub client.
pub fn looks_like_pem_key(value: &SecretString) -> bool {
    let text = value.expose_secret().trim();
    text.starts_with("-----BEGIN ") && text.contains("PRIVATE KEY-----")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stack_placeholder_is_not_a_key() {
        let placeholder = SecretString::from(crate::stack::APP_KEY_PLACEHOLDER);
        assert!(!looks_like_pem_key(&placeholder));
        let pem = SecretString::from(
            "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n",
        );
        assert!(looks_like_pem_key(&pem));
    }
}
