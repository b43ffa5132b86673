//! End-to-end tests of ephemera, one binary: adapters against moto (`adapters/`), the
//! strict layer's refusals (`strict/`), the GitHub simulator, and the whole pipeline
//! (signed webhook in, runner launched, job run, runner reaped) on moto + simulator.

mod adapters;
mod ami_pool;
mod apps;
mod burst;
mod cli;
mod doctor;
mod doctor_apps;
mod github_faults;
mod host_runner;
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
mod template;
mod timeline;
mod webhook_http;
