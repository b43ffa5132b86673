//! Where the scaler draws its jitter (claim retries, requeue delays, runner names): the
//! thread's RNG in production, a seeded source where a run must be reproducible.

/// A source of uniform draws in `[0, 1)`.
pub trait Jitter: Send + Sync {
    fn unit(&self) -> f64;
}

/// The thread's RNG: what the deployed scaler uses.
#[derive(Debug, Default, Clone, Copy)]
pub struct ThreadJitter;

impl Jitter for ThreadJitter {
    fn unit(&self) -> f64 {
        rand::random::<f64>()
    }
}
