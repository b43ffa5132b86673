//! The `ephemera` command line. `local` runs the pipeline in one process; its pieces
//! (the webhook route, the queue drain, the reaper timer) are public so the end-to-end
//! tests drive exactly what `ephemera local` runs.

pub mod local;
