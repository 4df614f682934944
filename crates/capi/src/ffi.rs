//! The boundary discipline shared by every exported function: catch panics, turn failures into
//! status codes plus a message, check pointers before use.

use crate::status::{Failure, XschedStatus, set_last_error};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Run the body of an exported function: its result becomes a status code, a panic becomes
/// `XSCHED_STATUS_PANIC`, and a failure's message becomes the thread's last error.
pub(crate) fn guard(body: impl FnOnce() -> Result<(), Failure>) -> XschedStatus {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => XschedStatus::Ok,
        Ok(Err(f)) => {
            set_last_error(&f.message);
            f.status
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_last_error(&format!("internal panic caught at the C boundary: {what}"));
            XschedStatus::Panic
        }
    }
}

fn null(what: &str) -> Failure {
    Failure::new(XschedStatus::NullPointer, format!("{what} is NULL"))
}

/// Borrow a handle.
///
/// # Safety
/// `ptr` is NULL or a live handle of type `T` created by this library and not yet destroyed.
pub(crate) unsafe fn handle<'a, T>(ptr: *const T, what: &str) -> Result<&'a T, Failure> {
    // SAFETY: non-null pointers are live handles by the caller's contract.
    unsafe { ptr.as_ref() }.ok_or_else(|| null(what))
}

/// Write an output value.
///
/// # Safety
/// `out` is NULL or valid for writing one `T`.
pub(crate) unsafe fn write<T>(out: *mut T, value: T, what: &str) -> Result<(), Failure> {
    if out.is_null() {
        return Err(null(what));
    }
    // SAFETY: checked non-null above; valid for writes by the caller's contract.
    unsafe { out.write(value) };
    Ok(())
}

/// Hand a new handle to C.
///
/// # Safety
/// `out` is NULL or valid for writing one pointer.
pub(crate) unsafe fn give<T>(out: *mut *mut T, value: T, what: &str) -> Result<(), Failure> {
    if out.is_null() {
        return Err(null(what));
    }
    // SAFETY: checked non-null; valid for writes by the caller's contract.
    unsafe { out.write(Box::into_raw(Box::new(value))) };
    Ok(())
}

/// Take back a handle for destruction (NULL is accepted and ignored).
///
/// # Safety
/// `ptr` is NULL or a handle of type `T` created by this library, destroyed at most once.
pub(crate) unsafe fn take<T>(ptr: *mut T) -> Option<Box<T>> {
    // SAFETY: non-null pointers came from `Box::into_raw` in `give` and are destroyed once.
    (!ptr.is_null()).then(|| unsafe { Box::from_raw(ptr) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::xsched_last_error;
    use std::ffi::CStr;

    fn last_error() -> String {
        // SAFETY: xsched_last_error returns a valid NUL-terminated thread-local string.
        unsafe { CStr::from_ptr(xsched_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn panics_become_a_status_and_a_message() {
        let status = guard(|| panic!("boom"));
        assert_eq!(status, XschedStatus::Panic);
        assert!(last_error().contains("boom"));
        let status = guard(|| {
            Err(Failure::new(
                XschedStatus::InvalidHint,
                "share must be positive",
            ))
        });
        assert_eq!(status, XschedStatus::InvalidHint);
        assert_eq!(last_error(), "share must be positive");
        assert_eq!(guard(|| Ok(())), XschedStatus::Ok);
    }

    #[test]
    fn null_handles_and_outputs_are_refused() {
        // SAFETY: NULL is allowed by both contracts.
        let h = unsafe { handle::<u32>(std::ptr::null(), "queue") };
        assert_eq!(h.err().map(|f| f.status), Some(XschedStatus::NullPointer));
        // SAFETY: as above.
        let w = unsafe { write::<u32>(std::ptr::null_mut(), 1, "out") };
        assert_eq!(w.err().map(|f| f.status), Some(XschedStatus::NullPointer));
    }
}
