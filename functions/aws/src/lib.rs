//! ephemera's AWS adapters: the ports of `ephemera-core`, implemented with the AWS SDK.
//!
//! Every SDK type and every DynamoDB attribute name stays inside this crate: what no other
//! crate of the workspace uses is `pub(crate)`. The same
//! adapters run under Lambda, under `ephemera local` against any endpoint (the moto
//! emulator on a laptop), and in the end-to-end tests.
//!
//! Layout: [`items`] maps records onto DynamoDB items and [`dynamo`] is the store (with
//! the reaper's lease); [`ec2`] (with [`tags`]) launches, lists and terminates runner
//! instances; [`jit`] hands JIT configs to instances; [`sqs`] is the jobs queue;
//! [`unrouted`] keeps the jobs no pool takes; [`prices`] reads instance prices and
//! [`price_book`] caches them in the table; [`secrets`] reads Secrets Manager;
//! [`client`] builds the SDK configuration with its timeouts; [`lambda`] is what the
//! functions share at cold start (environment, adapters), [`assembly`] puts the scaler
//! and the reaper together from those adapters (for the functions and `ephemera local`), [`config_source`] reads the
//! configuration from SSM, and [`reload`] follows it and the secrets (it uses the other
//! two, never the reverse); [`provision`] creates the resources for local runs and tests; [`stack`]
//! reads a deployed stack's outputs for the operator CLI.

pub mod assembly;
pub mod breaker;
pub mod client;
pub mod config_source;
pub mod dynamo;
pub mod ec2;
mod image;
pub mod image_pipelines;
pub mod instance_types;
pub mod items;
pub mod jit;
pub mod lambda;
pub mod launch;
pub mod price_book;
pub mod prices;
pub mod provision;
pub mod reload;
pub mod reruns;
pub mod runner_bucket;
pub mod running;
pub mod secrets;
pub mod sqs;
pub mod stack;
pub mod tags;
pub mod token_shelf;
pub mod unrouted;

pub use client::{sdk_config, AwsSettings};
pub use dynamo::DynamoRunnerStore;
pub use ec2::Ec2Fleet;
pub use items::runner_to_item;
pub use jit::DynamoJitConfigs;
pub use price_book::DynamoPriceBook;
pub use prices::AwsPriceList;
pub use provision::{ensure_resources, ResourceNames, Resources};
pub use secrets::read_secret;
pub use sqs::{ReceivedMessage, SqsJobQueue};
pub use unrouted::DynamoUnroutedJobs;
