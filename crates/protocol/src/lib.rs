//! RESP2 and RESP3 without I/O.
//!
//! The server reads bytes into a buffer and asks its [`RequestParser`] for the next complete
//! command; it builds [`Reply`] values and asks [`Reply::encode`] to append them to an output
//! buffer. Neither side touches a socket, so both are tested on byte slices.

#[cfg(test)]
mod fuzz;
mod inline;
mod reply;
mod request;

pub use inline::split_inline_args as split_args;
pub use reply::{format_double, Bulks, Reply};
pub use request::{encode_request, ProtocolError, RequestLimits, RequestParser};
