//! An HTTP client around the SDK's own whose errors say which endpoint and which
//! operation they were for. The SDK's own say only "timeout" or "io error", which
//! leaves an operator guessing what hung: a wrong `--endpoint-url`, a VPC without a
//! route to one service, or one service having a bad day.

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;

/// Wraps the connectors of another client.
#[derive(Debug)]
pub(crate) struct NamingHttpClient {
    inner: SharedHttpClient,
}

impl NamingHttpClient {
    pub(crate) fn wrap(inner: SharedHttpClient) -> SharedHttpClient {
        SharedHttpClient::new(NamingHttpClient { inner })
    }
}

impl HttpClient for NamingHttpClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(NamingConnector {
            inner: self.inner.http_connector(settings, components),
            first_byte: settings.read_timeout(),
        })
    }
}

#[derive(Debug)]
struct NamingConnector {
    inner: SharedHttpConnector,
    first_byte: Option<std::time::Duration>,
}

/// A call that failed below the SDK, named.
#[derive(Debug, thiserror::Error)]
#[error("AWS call {operation} to {endpoint} failed{}", waited(*.first_byte, *.timed_out))]
pub(crate) struct CallFailed {
    pub operation: String,
    pub endpoint: String,
    first_byte: Option<std::time::Duration>,
    timed_out: bool,
    #[source]
    source: ConnectorError,
}

fn waited(first_byte: Option<std::time::Duration>, timed_out: bool) -> String {
    match (timed_out, first_byte) {
        (true, Some(limit)) => format!(" (no answer within {}s)", limit.as_secs()),
        _ => String::new(),
    }
}

impl HttpConnector for NamingConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let operation = operation_of(&request);
        let endpoint = endpoint_of(request.uri());
        let first_byte = self.first_byte;
        let call = self.inner.call(request);
        HttpConnectorFuture::new(async move {
            call.await.map_err(|source| {
                let timed_out = source.is_timeout();
                let (io, user) = (source.is_io(), source.is_user());
                let named = Box::new(CallFailed {
                    operation,
                    endpoint,
                    first_byte,
                    timed_out,
                    source,
                });
                // Same kind as before, so the retry strategy treats it the same.
                if timed_out {
                    ConnectorError::timeout(named)
                } else if io {
                    ConnectorError::io(named)
                } else if user {
                    ConnectorError::user(named)
                } else {
                    ConnectorError::other(named, None)
                }
            })
        })
    }
}

/// `scheme://host[:port]` of a request URI.
fn endpoint_of(uri: &str) -> String {
    let after_scheme = uri.find("://").map_or(0, |i| i + 3);
    let end = uri[after_scheme..]
        .find('/')
        .map_or(uri.len(), |i| after_scheme + i);
    uri[..end].to_owned()
}

/// The operation a request is for: the `X-Amz-Target` of the JSON protocols (DynamoDB,
/// SQS, SSM, Secrets Manager), or the `Action` of the query protocols (EC2,
/// CloudFormation).
fn operation_of(request: &HttpRequest) -> String {
    if let Some(target) = request.headers().get("x-amz-target") {
        return target.to_owned();
    }
    let action = request
        .body()
        .bytes()
        .and_then(|body| std::str::from_utf8(body).ok())
        .and_then(|form| {
            form.split('&')
                .find_map(|pair| pair.strip_prefix("Action="))
                .map(str::to_owned)
        });
    let service = request
        .headers()
        .get("host")
        .or_else(|| request.uri().split("://").nth(1))
        .and_then(|host| host.split('.').next())
        // A service's host starts with its name (`ec2.us-east-1…`); an address does not.
        .filter(|first| {
            first.starts_with(|c: char| c.is_ascii_alphabetic())
                && first.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
    match (service, action) {
        (Some(service), Some(action)) => format!("{service}:{action}"),
        (None, Some(action)) => action,
        _ => "(unknown operation)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_smithy_types::body::SdkBody;

    fn request(uri: &str, target: Option<&str>, body: &str) -> HttpRequest {
        let mut request = HttpRequest::new(SdkBody::from(body));
        request.set_uri(uri).expect("a valid test URI");
        if let Some(target) = target {
            request
                .headers_mut()
                .insert("x-amz-target", target.to_owned());
        }
        request
    }

    #[test]
    fn json_protocol_calls_are_named_by_their_target() {
        let get = request(
            "http://127.0.0.1:4566/",
            Some("AmazonSSM.GetParameter"),
            "{}",
        );
        assert_eq!(operation_of(&get), "AmazonSSM.GetParameter");
        assert_eq!(endpoint_of(get.uri()), "http://127.0.0.1:4566");
    }

    #[test]
    fn query_protocol_calls_are_named_by_service_and_action() {
        let describe = request(
            "https://ec2.us-east-1.amazonaws.com/",
            None,
            "Action=DescribeInstances&Version=2016-11-15",
        );
        assert_eq!(operation_of(&describe), "ec2:DescribeInstances");
        assert_eq!(
            endpoint_of(describe.uri()),
            "https://ec2.us-east-1.amazonaws.com"
        );
        let local = request("http://127.0.0.1:5000", None, "Action=DescribeStacks");
        assert_eq!(operation_of(&local), "DescribeStacks");
        assert_eq!(endpoint_of(local.uri()), "http://127.0.0.1:5000");
    }
}
