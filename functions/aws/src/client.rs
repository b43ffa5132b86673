//! Building the shared SDK configuration: one rustls (ring) HTTPS client, the region, an
//! endpoint override for emulators, and timeouts on every call.
//!
//! Without timeouts an endpoint that accepts a connection and never answers holds a call
//! (a cold start, an operator command, the local poller) for ever. Every call has a
//! connect timeout, a timeout on the first byte of each attempt's answer, and caps on an
//! attempt and on the whole operation (retries included); an error from the HTTP layer
//! names the endpoint and the operation it was for (see [`naming`]).

mod naming;

use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_dynamodb::config::Credentials;
use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
use std::time::Duration;

/// How long AWS calls may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AwsTimeouts {
    /// Opening the connection (TCP and TLS).
    pub connect: Duration,
    /// From sending an attempt to the first byte of its answer.
    pub first_byte: Duration,
    /// One attempt, start to end.
    pub attempt: Duration,
    /// The whole operation, retries included.
    pub operation: Duration,
}

impl AwsTimeouts {
    /// The defaults: a call to an endpoint that never answers fails after three attempts
    /// of [`AwsTimeouts::first_byte`], about 32 s. Generous for a healthy AWS (its calls
    /// answer in milliseconds, an instant CreateFleet in seconds), short enough that a
    /// Lambda function (timeouts 30 s to 5 min) or an operator sees an error instead of
    /// a hang.
    pub(crate) const DEFAULT: AwsTimeouts = AwsTimeouts {
        connect: Duration::from_secs(3),
        first_byte: Duration::from_secs(10),
        attempt: Duration::from_secs(30),
        operation: Duration::from_secs(60),
    };

    /// The same timeouts for a long poll that may legitimately wait `wait` for its first
    /// byte (SQS ReceiveMessage).
    pub(crate) fn with_long_poll(self, wait: Duration) -> AwsTimeouts {
        AwsTimeouts {
            first_byte: self.first_byte + wait,
            attempt: self.attempt + wait,
            operation: self.operation + wait,
            ..self
        }
    }

    /// As the SDK takes them.
    pub(crate) fn to_sdk(self) -> TimeoutConfig {
        TimeoutConfig::builder()
            .connect_timeout(self.connect)
            .read_timeout(self.first_byte)
            .operation_attempt_timeout(self.attempt)
            .operation_timeout(self.operation)
            .build()
    }
}

impl Default for AwsTimeouts {
    fn default() -> Self {
        AwsTimeouts::DEFAULT
    }
}

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
    /// The named profile (shared config and credentials files) the default chain reads;
    /// `None`: `AWS_PROFILE`, else `default`.
    pub profile: Option<String>,
    /// Timeouts of every call.
    pub timeouts: AwsTimeouts,
}

impl AwsSettings {
    /// Settings for an emulator at `endpoint_url`, with its conventional test credentials.
    pub fn emulator(endpoint_url: &str) -> AwsSettings {
        AwsSettings {
            endpoint_url: Some(endpoint_url.to_owned()),
            region: Some("us-east-1".to_owned()),
            static_credentials: Some(("testing".to_owned(), "testing".to_owned())),
            profile: None,
            timeouts: AwsTimeouts::DEFAULT,
        }
    }
}

/// Loads the SDK configuration shared by every client of one process.
pub async fn sdk_config(settings: &AwsSettings) -> SdkConfig {
    let http_client = aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .http_client(naming::NamingHttpClient::wrap(http_client))
        .timeout_config(settings.timeouts.to_sdk());
    if let Some(endpoint) = &settings.endpoint_url {
        loader = loader.endpoint_url(endpoint);
    }
    if let Some(profile) = &settings.profile {
        loader = loader.profile_name(profile);
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
