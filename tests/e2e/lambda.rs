//! The Lambda functions as Lambda runs them: their cold starts (what they need, and what
//! they say when it is missing or broken), AWS calls that never answer, one reaper at a
//! time, a rotated App key, a long wait for capacity that Lambda's recursion cut-off
//! does not end.

mod apps;
mod cold_start;
mod follow;
mod interruptions;
mod lease;
mod recursion;
mod reruns;
mod rotation;
mod timeouts;
