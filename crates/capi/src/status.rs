//! Status codes, the mapping from Rust errors, and the per-thread last error message.

use std::cell::RefCell;
use std::ffi::{CString, c_char};
use xsched_core::CoreError;
use xsched_core::error::chain_text;
use xsched_runtime::{CommandError, HwError, RuntimeError};

/// What every C API call returns.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XschedStatus {
    /// Success.
    Ok = 0,
    /// A required pointer argument was NULL.
    NullPointer = 1,
    /// An argument is out of range (a level outside 1..3, an unknown scheduler mode, ...).
    InvalidArgument = 2,
    /// A launch config broke `threshold >= batch >= 1`.
    InvalidConfig = 3,
    /// The backend does not offer the requested level.
    UnsupportedLevel = 4,
    /// A hint value makes no sense (zero share, zero time slice).
    InvalidHint = 5,
    /// The operation needs a running queue (resume it first).
    Suspended = 6,
    /// The queue is closed.
    Closed = 7,
    /// The command failed (its kernel or callback panicked, or the device shut down).
    CommandFailed = 8,
    /// The command was cancelled before launch.
    Cancelled = 9,
    /// An `XSCHED_*` environment variable holds an unusable value.
    Environment = 10,
    /// A command id that was never submitted to this queue.
    UnknownCommand = 11,
    /// An internal error (a caught panic); the message says more.
    Panic = 12,
    /// Any other failure; the message says more.
    Internal = 13,
}

/// All codes, in order.
const ALL: [XschedStatus; 14] = [
    XschedStatus::Ok,
    XschedStatus::NullPointer,
    XschedStatus::InvalidArgument,
    XschedStatus::InvalidConfig,
    XschedStatus::UnsupportedLevel,
    XschedStatus::InvalidHint,
    XschedStatus::Suspended,
    XschedStatus::Closed,
    XschedStatus::CommandFailed,
    XschedStatus::Cancelled,
    XschedStatus::Environment,
    XschedStatus::UnknownCommand,
    XschedStatus::Panic,
    XschedStatus::Internal,
];

/// The name of a status code, e.g. `"XSCHED_STATUS_UNSUPPORTED_LEVEL"`, or
/// `"XSCHED_STATUS_UNKNOWN"` for a number that is no status. Never NULL; the string is static.
/// Takes an `int` so that any value from C is safe to pass.
#[unsafe(no_mangle)]
pub extern "C" fn xsched_status_name(status: i32) -> *const c_char {
    let Some(&status) = usize::try_from(status).ok().and_then(|i| ALL.get(i)) else {
        return c"XSCHED_STATUS_UNKNOWN".as_ptr();
    };
    let name: &'static [u8] = match status {
        XschedStatus::Ok => b"XSCHED_STATUS_OK\0",
        XschedStatus::NullPointer => b"XSCHED_STATUS_NULL_POINTER\0",
        XschedStatus::InvalidArgument => b"XSCHED_STATUS_INVALID_ARGUMENT\0",
        XschedStatus::InvalidConfig => b"XSCHED_STATUS_INVALID_CONFIG\0",
        XschedStatus::UnsupportedLevel => b"XSCHED_STATUS_UNSUPPORTED_LEVEL\0",
        XschedStatus::InvalidHint => b"XSCHED_STATUS_INVALID_HINT\0",
        XschedStatus::Suspended => b"XSCHED_STATUS_SUSPENDED\0",
        XschedStatus::Closed => b"XSCHED_STATUS_CLOSED\0",
        XschedStatus::CommandFailed => b"XSCHED_STATUS_COMMAND_FAILED\0",
        XschedStatus::Cancelled => b"XSCHED_STATUS_CANCELLED\0",
        XschedStatus::Environment => b"XSCHED_STATUS_ENVIRONMENT\0",
        XschedStatus::UnknownCommand => b"XSCHED_STATUS_UNKNOWN_COMMAND\0",
        XschedStatus::Panic => b"XSCHED_STATUS_PANIC\0",
        XschedStatus::Internal => b"XSCHED_STATUS_INTERNAL\0",
    };
    name.as_ptr().cast()
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// The message of the calling thread's last failed call ("" if none). The pointer stays valid
/// until the thread's next failing call; copy it to keep it.
#[unsafe(no_mangle)]
pub extern "C" fn xsched_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

pub(crate) fn set_last_error(message: &str) {
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = text);
}

/// A failed call: the status to return and the message to keep.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: XschedStatus,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(status: XschedStatus, message: impl Into<String>) -> Failure {
        Failure {
            status,
            message: message.into(),
        }
    }
}

fn core_status(e: &CoreError) -> XschedStatus {
    match e {
        CoreError::InvalidLaunchConfig { .. } => XschedStatus::InvalidConfig,
        CoreError::InvalidLevel(_)
        | CoreError::UnknownPolicy { .. }
        | CoreError::BadPolicyArgument { .. } => XschedStatus::InvalidArgument,
        CoreError::NoSloQueue { .. } => XschedStatus::Environment,
        CoreError::UnsupportedLevel { .. } => XschedStatus::UnsupportedLevel,
        CoreError::InvalidHint(_) => XschedStatus::InvalidHint,
        CoreError::UnknownQueue(_) | CoreError::DuplicateQueue(_) => XschedStatus::Internal,
    }
}

fn command_status(e: &CommandError) -> XschedStatus {
    match e {
        CommandError::Cancelled => XschedStatus::Cancelled,
        CommandError::Failed(_) | CommandError::Lost => XschedStatus::CommandFailed,
    }
}

impl From<RuntimeError> for Failure {
    fn from(e: RuntimeError) -> Failure {
        let status = match &e {
            RuntimeError::Core(c) => core_status(c),
            RuntimeError::Hw(HwError::Unsupported(_)) => XschedStatus::UnsupportedLevel,
            RuntimeError::Command(c) => command_status(c),
            RuntimeError::Env { .. }
            | RuntimeError::EnvRefused { .. }
            | RuntimeError::EnvMode { .. }
            | RuntimeError::Policy { .. } => XschedStatus::Environment,
            RuntimeError::Suspended => XschedStatus::Suspended,
            RuntimeError::Closed => XschedStatus::Closed,
            RuntimeError::UnknownCommand(_) => XschedStatus::UnknownCommand,
            RuntimeError::Hw(_)
            | RuntimeError::Spawn(_)
            | RuntimeError::NoCommand
            | RuntimeError::NoShimFile { .. }
            | RuntimeError::Exe(_)
            | RuntimeError::NoExeFolder
            | RuntimeError::NoShim { .. }
            | RuntimeError::Splittable { .. }
            | RuntimeError::Resolve { .. }
            | RuntimeError::CreateFolder { .. }
            | RuntimeError::Link { .. } => XschedStatus::Internal,
        };
        Failure::new(status, chain_text(&e))
    }
}

impl From<CoreError> for Failure {
    fn from(e: CoreError) -> Failure {
        Failure::new(core_status(&e), chain_text(&e))
    }
}

impl From<CommandError> for Failure {
    fn from(e: CommandError) -> Failure {
        Failure::new(command_status(&e), chain_text(&e))
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Failure {
        Failure::new(XschedStatus::Internal, e.to_string())
    }
}
