//! The commands, one module each: what a command does with the deployment it is given.
//! How a deployment is reached ([`crate::target`]), how results are shown
//! ([`crate::render`], [`crate::views`]) and how failures end ([`crate::exit`],
//! [`crate::errors`]) are shared and live outside.
//!
//! [`runners`] (list, show, delete, connect), [`pools`], [`jobs`] (`jobs list`), [`jobs_show`]
//! (`jobs show`, a job's timeline), [`costs`] (instance costs by repository and
//! pool), [`dlq`] (`jobs
//! dlq list|redrive`), [`config`] (validate, push), [`destroy`] (a whole deployment), [`doctor`] (its checks by area, over
//! ports), and [`local`], which runs the whole pipeline in one process.

pub mod config;
pub mod costs;
pub mod destroy;
pub mod dlq;
pub mod doctor;
pub mod jobs;
pub mod jobs_show;
pub mod local;
pub mod pools;
pub mod runners;
