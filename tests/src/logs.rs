//! Capturing what the handlers log, for tests that check a decision was told to the
//! operator. One global subscriber, installed by the first test that asks, writes every
//! event to a shared buffer (and nothing to the terminal).

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

static CAPTURED: OnceLock<Buffer> = OnceLock::new();

/// Starts capturing (once per test binary); later calls do nothing.
pub fn capture() {
    CAPTURED.get_or_init(|| {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            // What the functions log in production (info), and ephemera's own debug
            // lines too, so that the secret-leak test sees every path.
            .with_env_filter(
                "info,ephemera_core=debug,ephemera_aws=debug,ephemera_github=debug,\
                 ephemera_cli=debug,aws_config=warn,aws_smithy_runtime=warn",
            )
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        // Another subscriber may already be global: then nothing is captured here, and
        // `captured` says so by coming back empty.
        let _ = tracing::subscriber::set_global_default(subscriber);
        buffer
    });
}

/// Everything captured so far.
pub fn captured() -> String {
    CAPTURED
        .get()
        .map(|b| {
            String::from_utf8_lossy(&b.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
        })
        .unwrap_or_default()
}
