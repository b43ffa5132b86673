//! End-to-end tests of ephemera, one binary: adapters against moto, the GitHub
//! simulator, and the whole pipeline (signed webhook in, runner launched, job run,
//! runner reaped) on moto + simulator.

mod ami_pool;
mod apps;
mod aws_breaker;
mod aws_fleet;
mod aws_instance_index;
mod aws_jit;
mod aws_lease;
mod aws_queue;
mod aws_reruns;
mod aws_stamps;
mod aws_store;
mod aws_tokens;
mod burst;
mod cli;
mod doctor;
mod doctor_apps;
mod github_faults;
mod labels;
mod lambda;
mod model_agreement;
mod observability;
mod pipeline;
mod prices;
mod reaper;
mod scaler;
mod sim;
mod strict;
mod strict_dynamo;
mod strict_fleet;
mod strict_queue;
mod strict_sizing;
mod strict_ssm;
mod template;
mod timeline;
mod webhook_http;
