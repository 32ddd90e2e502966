//! The signals that end envbuild (SIGHUP, SIGINT, SIGQUIT, SIGTERM), caught while a child
//! runs in its own process group (`proc`) or a temporary folder lives (`scratch`), so that the
//! group is killed and the folders removed before envbuild ends; then each signal is raised
//! again with the disposition envbuild had before. This module performs signal handling only.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

const SIGNALS: [libc::c_int; 4] = [libc::SIGHUP, libc::SIGINT, libc::SIGQUIT, libc::SIGTERM];

/// The last signal caught and not yet handled; 0 for none.
static PENDING: AtomicI32 = AtomicI32::new(0);

/// How many children run now, and the dispositions to restore when none does.
struct State {
    users: usize,
    saved: Vec<(libc::c_int, libc::sigaction)>,
}

static STATE: Mutex<State> = Mutex::new(State {
    users: 0,
    saved: Vec::new(),
});

extern "C" fn on_signal(signal: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    PENDING.store(signal, Ordering::SeqCst);
}

/// Catching is on while a guard lives (one set of handlers for any number of children).
pub struct Guard(());

impl Guard {
    pub fn install() -> Guard {
        let mut state = STATE.lock().unwrap_or_else(|p| p.into_inner());
        if state.users == 0 {
            for signal in SIGNALS {
                // SAFETY: plain sigaction(2) calls on zero-initialised C structs; the
                // handler only stores to an atomic.
                unsafe {
                    let mut new: libc::sigaction = std::mem::zeroed();
                    new.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                    libc::sigemptyset(&mut new.sa_mask);
                    new.sa_flags = libc::SA_RESTART;
                    let mut old: libc::sigaction = std::mem::zeroed();
                    if libc::sigaction(signal, &new, &mut old) != 0 {
                        continue;
                    }
                    if old.sa_sigaction == libc::SIG_IGN {
                        // Ignored (`nohup`): it stays ignored.
                        libc::sigaction(signal, &old, std::ptr::null_mut());
                        continue;
                    }
                    state.saved.push((signal, old));
                }
            }
        }
        state.users += 1;
        Guard(())
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let mut state = STATE.lock().unwrap_or_else(|p| p.into_inner());
        state.users -= 1;
        if state.users == 0 {
            for (signal, old) in state.saved.drain(..) {
                // SAFETY: restores the disposition saved by `install`.
                unsafe {
                    libc::sigaction(signal, &old, std::ptr::null_mut());
                }
            }
        }
    }
}

/// The signal caught since the last call, if any.
pub fn take() -> Option<i32> {
    match PENDING.swap(0, Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Raise `signal` in this process (after the guard was dropped, it meets the disposition
/// envbuild had before; while another child runs, that child's loop handles it in turn).
pub fn raise(signal: i32) {
    // SAFETY: raise(3) has no memory-safety preconditions.
    unsafe {
        libc::raise(signal);
    }
}
