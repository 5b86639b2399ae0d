//! DPDK's own log, routed to a Rust callback.
//!
//! DPDK writes its log with `vfprintf` to one `FILE*` (`rte_openlog_stream`). [`redirect`]
//! gives it a stream made with glibc's `fopencookie` whose write function collects each
//! thread's bytes into lines and hands every complete line, with the level of the message
//! being logged (`rte_log_cur_msg_loglevel`, a per-thread value), to the callback. The
//! application re-emits the lines through its own logger (weir-sink: `tracing`), so
//! DPDK's messages and weir's share one output and one format.
//!
//! The stream is unbuffered, so a message reaches the callback on the thread that logged
//! it, while DPDK's log lock is held: the callback must not log through DPDK itself.
//! Call [`redirect`] before [`crate::Eal::init`] to see EAL's start-up messages too.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use crate::error::{Error, Result};

/// The level of a DPDK log message (DPDK's eight levels folded into five).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// `RTE_LOG_EMERG`, `ALERT`, `CRIT` and `ERR`.
    Error,
    /// `RTE_LOG_WARNING`.
    Warning,
    /// `RTE_LOG_NOTICE`.
    Notice,
    /// `RTE_LOG_INFO`.
    Info,
    /// `RTE_LOG_DEBUG`.
    Debug,
}

impl LogLevel {
    /// From DPDK's numeric level (1 = EMERG ... 8 = DEBUG); 0 or unknown counts as notice
    /// (DPDK uses it for messages written outside `rte_log`).
    pub fn from_rte(level: u32) -> LogLevel {
        match level {
            1..=4 => LogLevel::Error,
            5 => LogLevel::Warning,
            7 => LogLevel::Info,
            8 => LogLevel::Debug,
            _ => LogLevel::Notice,
        }
    }

    /// DPDK's numeric level for this one.
    pub fn to_rte(self) -> u32 {
        match self {
            LogLevel::Error => dpdk_sys::RTE_LOG_ERR,
            LogLevel::Warning => dpdk_sys::RTE_LOG_WARNING,
            LogLevel::Notice => dpdk_sys::RTE_LOG_NOTICE,
            LogLevel::Info => dpdk_sys::RTE_LOG_INFO,
            LogLevel::Debug => dpdk_sys::RTE_LOG_DEBUG,
        }
    }
}

/// What receives DPDK's log lines.
type Sink = Box<dyn Fn(LogLevel, &str) + Send + Sync + 'static>;

static SINK: OnceLock<Sink> = OnceLock::new();

thread_local! {
    /// Bytes of the current thread's unfinished line.
    static PARTIAL: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// glibc's `cookie_io_functions_t` (stdio.h); the libc crate does not declare it.
#[repr(C)]
struct CookieIoFunctions {
    read: Option<unsafe extern "C" fn(*mut c_void, *mut c_char, usize) -> isize>,
    write: Option<unsafe extern "C" fn(*mut c_void, *const c_char, usize) -> isize>,
    seek: Option<unsafe extern "C" fn(*mut c_void, *mut i64, c_int) -> c_int>,
    close: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
}

unsafe extern "C" {
    /// glibc: a `FILE*` whose I/O goes through the given functions.
    fn fopencookie(
        cookie: *mut c_void,
        mode: *const c_char,
        io: CookieIoFunctions,
    ) -> *mut libc::FILE;
}

/// The stream's write function: splits into lines and calls the sink. Never unwinds.
unsafe extern "C" fn cookie_write(_cookie: *mut c_void, buf: *const c_char, size: usize) -> isize {
    if buf.is_null() || size == 0 {
        return 0;
    }
    // SAFETY: stdio passes `size` readable bytes at `buf` for the duration of the call.
    let bytes = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), size) };
    // SAFETY: rte_log_cur_msg_loglevel reads a per-thread variable; no preconditions.
    let level = LogLevel::from_rte(unsafe { dpdk_sys::rte_log_cur_msg_loglevel() } as u32);
    let _ = catch_unwind(AssertUnwindSafe(|| {
        PARTIAL.with(|p| {
            let mut p = p.borrow_mut();
            p.extend_from_slice(bytes);
            while let Some(i) = p.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = p.drain(..=i).collect();
                let text = String::from_utf8_lossy(&line[..i]);
                let text = text.trim_end();
                if !text.is_empty() {
                    if let Some(sink) = SINK.get() {
                        sink(level, text);
                    }
                }
            }
            // A runaway line without a newline is passed on in pieces rather than grown.
            if p.len() > 4096 {
                let text = String::from_utf8_lossy(&p).into_owned();
                p.clear();
                if let Some(sink) = SINK.get() {
                    sink(level, &text);
                }
            }
        })
    }));
    size as isize
}

/// Routes DPDK's log to `sink` for the rest of the process. Once per process: a second
/// call returns [`Error::Create`] and changes nothing.
pub fn redirect<F>(sink: F) -> Result<()>
where
    F: Fn(LogLevel, &str) + Send + Sync + 'static,
{
    if SINK.set(Box::new(sink)).is_err() {
        return Err(Error::Create {
            what: "log stream",
            name: "dpdk log".to_owned(),
            errno: libc::EEXIST,
            message: "DPDK's log is already redirected".to_owned(),
            hint: "call dpdk::log::redirect once per process",
        });
    }
    let mode = CString::new("w").map_err(|_| Error::NulInArgument("w".to_owned()))?;
    let io = CookieIoFunctions {
        read: None,
        write: Some(cookie_write),
        seek: None,
        close: None,
    };
    // SAFETY: mode is a valid C string; the cookie is unused (NULL); the functions are
    // valid for the life of the process.
    let f = unsafe { fopencookie(std::ptr::null_mut(), mode.as_ptr(), io) };
    if f.is_null() {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        return Err(Error::Create {
            what: "log stream",
            name: "dpdk log".to_owned(),
            errno,
            message: crate::error::strerror(errno),
            hint: "fopencookie failed: out of memory?",
        });
    }
    // SAFETY: f is a fresh, valid FILE*; unbuffered so each message is written by (and
    // levelled on) the thread that logs it.
    unsafe { libc::setvbuf(f, std::ptr::null_mut(), libc::_IONBF, 0) };
    // SAFETY: f stays open for the life of the process (it is never closed); DPDK's FILE
    // type is glibc's FILE.
    let ret = unsafe { dpdk_sys::rte_openlog_stream(f.cast::<dpdk_sys::FILE>()) };
    if ret != 0 {
        return Err(Error::Create {
            what: "log stream",
            name: "dpdk log".to_owned(),
            errno: -ret,
            message: crate::error::strerror(-ret),
            hint: "rte_openlog_stream failed",
        });
    }
    Ok(())
}

/// Caps DPDK's log at `level` for every log type (`rte_log_set_global_level`); EAL's
/// `--log-level` still sets each type's own level below that cap.
pub fn set_global_level(level: LogLevel) {
    // SAFETY: sets a global integer; no preconditions.
    unsafe { dpdk_sys::rte_log_set_global_level(level.to_rte()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_fold() {
        assert_eq!(LogLevel::from_rte(1), LogLevel::Error);
        assert_eq!(LogLevel::from_rte(4), LogLevel::Error);
        assert_eq!(LogLevel::from_rte(5), LogLevel::Warning);
        assert_eq!(LogLevel::from_rte(6), LogLevel::Notice);
        assert_eq!(LogLevel::from_rte(8), LogLevel::Debug);
        assert_eq!(LogLevel::from_rte(0), LogLevel::Notice);
        for l in [
            LogLevel::Error,
            LogLevel::Warning,
            LogLevel::Info,
            LogLevel::Debug,
        ] {
            assert_eq!(LogLevel::from_rte(l.to_rte()), l);
        }
    }
}
