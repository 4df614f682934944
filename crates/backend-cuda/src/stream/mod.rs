//! The hardware queue over one CUDA stream: Level 1 everywhere, Level 2 behind stream memory
//! gates where the device has them.
//!
//! Every command is enqueued on the stream as `[gate] command [event]`: the gate is a
//! `cuStreamWaitValue32` on the stream's host-mapped word (see `gates.rs`), the event tells the
//! stream's watcher thread that the command finished. Launching a command (the XQueue deciding it
//! may run) permits its gate; the host opens permitted gates only a little ahead of the completed
//! commands, so after `deactivate` the queued commands stay behind closed gates and only the
//! running ones finish. A command reaches the stream in one of two ways:
//!
//! - [`CudaCommand::Enqueue`]: launching enqueues it (Rust programs using xsched).
//! - [`CudaCommand::Enqueued`]: it was enqueued earlier behind its gate ([`CudaStream::enqueue`])
//!   and launching permits it. The interception shim uses this: the application's call reaches
//!   the driver at once, so the driver checks it, its status code goes back unchanged and kernel
//!   arguments are captured at the call, while the device still starts the command only when the
//!   XQueue launches it.
//!
//! Without stream memory operations nothing is gated (Level 1): launching enqueues and the event
//! reports completion; [`CudaStream::enqueue`] then runs the call ungated.
//!
//! A call enqueued by [`CudaStream::enqueue`] that blocks its caller until the stream reaches it
//! (a pageable copy, a lazily loaded kernel's first launch, any launch under
//! `CUDA_LAUNCH_BLOCKING=1`) would wait behind its own gate for ever: the XQueue can launch the
//! command only after the call returns. The shim makes the calls it knows of ungated; as a
//! backstop for the rest, the watcher opens the gate of a call that has been in progress for
//! [`SELF_BLOCK_AFTER`] ([`SELF_BLOCK_AFTER_AGAIN`] once the stream has had one) once every gate
//! before it is open and it is within [`GATE_DEPTH`] of the
//! completed commands (so nothing the XQueue holds runs early, and a deactivated stream opens
//! nothing), and warns once per stream. Such a command then runs at once, in stream order: at
//! Level 1 (a suspended queue whose stream stays active), even while its queue is suspended,
//! as the application's call demands. (A [`CudaCommand::Enqueue`] command's gate is permitted
//! before its function runs, as the XQueue is launching it; that function must still not block,
//! see [`EnqueueFn`].)
//!
//! The watcher also runs the XQueue's completion hook: after reporting a completion
//! that left the hook work (a synchronization point), it refills the queue itself, so the
//! launcher thread is not woken for it. The watcher is awake at that moment anyway (it waits for
//! every command's event), and unlike a host function (`cuLaunchHostFunc`) it may call CUDA.

mod command;
mod enqueue;
mod queue;
mod shared;
mod watcher;

pub use command::{CudaCommand, EnqueueFn, Ticket};
pub use queue::CudaStream;
pub use shared::{GATE_DEPTH, SELF_BLOCK_AFTER, SELF_BLOCK_AFTER_AGAIN};
