//! The boundary between Envoy and the filter's safe code: every event hook of a stream runs the
//! filter through [`on_filter`], which turns the module pointer back into the filter and catches a
//! panic there, so that it never unwinds into Envoy and never lets the request through.

use std::cell::Cell;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::Stream;
use crate::filter::{Filter, Flow};

thread_local! {
    /// The filter whose hook is running on this worker thread (its `module_ptr`), if any.
    static RUNNING: Cell<usize> = const { Cell::new(0) };
}

/// Run `f` on the filter behind `module_ptr`; a panic resets the stream and poisons the filter.
pub(super) fn on_filter(
    filter_envoy_ptr: *mut c_void,
    module_ptr: *const c_void,
    f: impl FnOnce(&mut Filter) -> Flow,
) -> Flow {
    if module_ptr.is_null() {
        return Flow::Stop;
    }
    // SAFETY: `module_ptr` is the `Box<Filter>` this module returned from `on_http_filter_new` for
    // this stream; Envoy passes it back, on the stream's worker thread only, until
    // `on_http_filter_destroy`; no other reference to it exists while a hook runs.
    let filter = unsafe { &mut *(module_ptr as *mut Filter) };
    if filter.poisoned {
        return Flow::Stop;
    }
    filter.stream = Stream(filter_envoy_ptr);
    let outer = RUNNING.with(|r| r.replace(module_ptr as usize));
    let ran = catch_unwind(AssertUnwindSafe(|| f(filter)));
    RUNNING.with(|r| r.set(outer));
    match ran {
        Ok(flow) => {
            let effects = filter.take_effects();
            // `filter` is not used past this point: a local reply or a resumed request runs this
            // stream's hooks again at once, and they take the filter afresh.
            effects.apply(Stream(filter_envoy_ptr));
            flow
        }
        Err(_) => {
            filter.poisoned = true;
            Stream(filter_envoy_ptr).reset("mcp_policy_panic");
            Flow::Stop
        }
    }
}

/// Is the filter behind `module_ptr` the one whose hook is running on this worker thread (an event
/// Envoy reports inline, while that hook is still in a call to Envoy)?
pub(super) fn running(module_ptr: *const c_void) -> bool {
    RUNNING.with(Cell::get) == module_ptr as usize
}
