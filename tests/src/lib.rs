//! The end-to-end harness of ephemera: the moto emulator, the GitHub simulator, and the
//! helpers the pipeline tests and `make demo` share.

pub mod calls;
pub mod faults;
pub mod functions;
pub mod logs;
pub mod moto;
pub mod pipeline;
pub mod plant;
pub mod runtime_api;
pub mod sim;
pub mod stack;
