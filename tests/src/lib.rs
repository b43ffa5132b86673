//! The end-to-end harness of ephemera: the moto emulator, the GitHub simulator, and the
//! helpers the pipeline tests and `make demo` share.

pub mod faults;
pub mod moto;
pub mod pipeline;
pub mod sim;
