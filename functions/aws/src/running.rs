//! The configuration each function runs, recorded in the runners table whenever the
//! function builds its handler (its cold start, and each reload after the parameter
//! changed): one item per function, `RUNNING#<function>`, of kind `config_running`,
//! holding the parameter it read, that parameter's version and when. `ephemera doctor`
//! compares it with the parameter (`config.running`). The item has no `status`, so the
//! `by-status` index never lists it. A write never replaces a newer version of the same
//! parameter (a cold start that read a stale version, an old environment reloading
//! late); a function that switched parameters (a pushed configuration deleted, the
//! stack's default read again) replaces it.

use crate::items::{self, Item};
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use std::collections::HashMap;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// The kind of a function's running-configuration item.
pub(crate) const KIND_CONFIG_RUNNING: &str = "config_running";
const PARAMETER: &str = "config_parameter";
const VERSION: &str = "config_version";
const FUNCTION: &str = "function";
/// The functions that record what they run, as they name themselves.
pub const FUNCTIONS: [&str; 3] = ["webhook", "scaler", "reaper"];

/// The key of `function`'s item.
pub(crate) fn running_key(function: &str) -> String {
    format!("RUNNING#{function}")
}

/// What a function recorded the last time it built its handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningConfig {
    pub function: String,
    pub parameter: String,
    pub version: i64,
    pub at: OffsetDateTime,
}

/// Records that `function` now runs `version` of `parameter`. A newer version of the same
/// parameter already recorded is kept (not an error).
pub async fn record(client: &Client, table: &str, running: &RunningConfig) -> anyhow::Result<()> {
    let item: Item = HashMap::from([
        (
            items::PK.to_owned(),
            items::s(running_key(&running.function)),
        ),
        (items::KIND.to_owned(), items::s(KIND_CONFIG_RUNNING)),
        (FUNCTION.to_owned(), items::s(running.function.as_str())),
        (PARAMETER.to_owned(), items::s(running.parameter.as_str())),
        (VERSION.to_owned(), items::n(running.version)),
        (items::UPDATED_AT.to_owned(), items::timestamp(running.at)),
    ]);
    let written = client
        .put_item()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression(
            "attribute_not_exists(#pk) OR #parameter <> :parameter OR #version <= :version",
        )
        .expression_attribute_names("#pk", items::PK)
        .expression_attribute_names("#parameter", PARAMETER)
        .expression_attribute_names("#version", VERSION)
        .expression_attribute_values(":parameter", items::s(running.parameter.as_str()))
        .expression_attribute_values(":version", items::n(running.version))
        .send()
        .await;
    match written {
        Ok(_) => Ok(()),
        Err(err) if err.code() == Some("ConditionalCheckFailedException") => Ok(()),
        Err(err) => Err(anyhow::Error::new(err).context(format!(
            "cannot record the configuration {} runs in table {table}",
            running.function
        ))),
    }
}

/// What `function` recorded; `None` when it never built a handler with this table.
pub async fn read(
    client: &Client,
    table: &str,
    function: &str,
) -> anyhow::Result<Option<RunningConfig>> {
    let got = client
        .get_item()
        .table_name(table)
        .key(items::PK, items::s(running_key(function)))
        .consistent_read(true)
        .send()
        .await
        .map_err(|err| {
            anyhow::Error::new(err).context(format!("cannot read {}", running_key(function)))
        })?;
    let Some(item) = got.item() else {
        return Ok(None);
    };
    let text = |name: &str| match item.get(name) {
        Some(AttributeValue::S(value)) => Some(value.clone()),
        _ => None,
    };
    let version = match item.get(VERSION) {
        Some(AttributeValue::N(value)) => value.parse().ok(),
        _ => None,
    };
    let at = text(items::UPDATED_AT).and_then(|t| OffsetDateTime::parse(&t, &Rfc3339).ok());
    match (text(PARAMETER), version, at) {
        (Some(parameter), Some(version), Some(at)) => Ok(Some(RunningConfig {
            function: function.to_owned(),
            parameter,
            version,
            at,
        })),
        _ => anyhow::bail!(
            "{} is not a running-configuration item",
            running_key(function)
        ),
    }
}
