//! # xsched-openai
//!
//! The OpenAI-compatible wire as both of its clients read it: the gateway (`xsched-gateway`,
//! in front of engines) and the load generator (`xsched-load`, in front of an engine or the
//! gateway). Kept apart so the load generator links no server: it speaks to a server exactly as
//! the gateway speaks to an engine, through the same client, and counts answers the same way.
//!
//! - [`client`]: the pooled HTTP/1.1 client (connect timeout, keep-alive under llama.cpp's).
//! - [`tally`]: an answer's tokens counted as it passes (its `usage`, else its text events).

pub mod client;
pub mod tally;
