//! template.yaml, tested rather than only linted: its IAM posture read from the
//! translated template, and one job run end to end on the stack it creates in moto.

mod iam;
mod stack_job;
