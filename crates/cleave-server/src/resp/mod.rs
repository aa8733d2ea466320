//! RESP, the Redis protocol: requests in, replies out.

mod parse;
mod reply;

pub use parse::{parse_request, split_args, ProtocolError, INLINE_MAX_BYTES};
pub use reply::{format_double, Reply};
