//! The three handlers of the flow, generic over the ports.
//!
//! `webhook` turns a signed delivery into a queue message, `scaler` turns a queue message
//! into a runner, `reaper` turns `pending_delete` records into nothing. The Lambda
//! binaries, `ephemera local` and the tests call exactly these.

pub mod reaper;
pub mod scaler;
pub mod webhook;

#[cfg(test)]
pub(crate) mod test_support;

/// The message of an error and of every cause below it, for logs and for the `last_error`
/// an operator reads on a record.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
