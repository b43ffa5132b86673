//! Building the shared SDK configuration: one rustls (ring) HTTPS client, the region,
//! and an endpoint override for emulators.

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_dynamodb::config::Credentials;
use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};

/// Where and as whom to reach AWS.
#[derive(Debug, Clone, Default)]
pub struct AwsSettings {
    /// Overrides every service endpoint (the emulator's URL). `AWS_ENDPOINT_URL` in the
    /// environment does the same when this is `None`.
    pub endpoint_url: Option<String>,
    /// Defaults to the environment's region, then `us-east-1`.
    pub region: Option<String>,
    /// Fixed credentials (for emulators); `None` uses the default provider chain.
    pub static_credentials: Option<(String, String)>,
}

impl AwsSettings {
    /// Settings for an emulator at `endpoint_url`, with its conventional test credentials.
    pub fn emulator(endpoint_url: &str) -> AwsSettings {
        AwsSettings {
            endpoint_url: Some(endpoint_url.to_owned()),
            region: Some("us-east-1".to_owned()),
            static_credentials: Some(("testing".to_owned(), "testing".to_owned())),
        }
    }
}

/// Loads the SDK configuration shared by every client of one process.
pub async fn sdk_config(settings: &AwsSettings) -> SdkConfig {
    let http_client = aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let mut loader = aws_config::defaults(BehaviorVersion::latest()).http_client(http_client);
    if let Some(endpoint) = &settings.endpoint_url {
        loader = loader.endpoint_url(endpoint);
    }
    if let Some((key, secret)) = &settings.static_credentials {
        loader = loader.credentials_provider(Credentials::new(key, secret, None, None, "static"));
    }
    let config = match &settings.region {
        Some(region) => loader.region(Region::new(region.clone())).load().await,
        None => loader.load().await,
    };
    if config.region().is_some() {
        return config;
    }
    config
        .into_builder()
        .region(Region::new("us-east-1"))
        .build()
}
