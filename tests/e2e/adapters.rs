//! The AWS adapters (`ephemera-aws`) against moto through the real SDK, one module per
//! adapter: the runner store, its stamps and instance index, the JIT configs, the reaper's lease, the queue,
//! the fleet, and the runners table's other items (breakers, re-runs, tokens).

mod breaker;
mod fleet;
mod instance_index;
mod interruptions;
mod jit;
mod lease;
mod queue;
mod reruns;
mod stamps;
mod store;
mod tokens;
