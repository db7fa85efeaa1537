//! A wake that a connection's task gives itself by reading a body to its end, held back.
//!
//! Why: hyper's body channel wakes its sender each time the reader takes a frame, even once
//! the sender has sent the last one and is gone. On a client's HTTP/1 connection the
//! sender is the connection's own task, which reads the request body in its service: the wake
//! comes from inside that task's poll, and the task, polled again in place
//! (`transport::runtime::repoll`), walks the request's whole path once more and finds
//! nothing to do. A body read through [`poll_frame`] holds such a wake back, and drops it
//! once the body has ended (docs/performance.md).
//!
//! Caveat: only the task this thread is polling through [`running`] holds a wake back, and
//! only one that the body's own poll gives it on this thread; a body that has not ended
//! gets its wake after all, as the task's context wakes it.

use std::cell::Cell;
use std::pin::Pin;
use std::task::{Context, Poll};

const CLOSED: u8 = 0;
const OPEN: u8 = 1;
const HEARD: u8 = 2;

thread_local! {
    /// Whether a body is being polled through [`poll_frame`] on this thread, and whether it
    /// woke the running task.
    static WINDOW: Cell<u8> = const { Cell::new(CLOSED) };
    /// The task [`running`] polls on this thread, by the address of its wake state; 0 for
    /// none.
    static RUNNING: Cell<usize> = const { Cell::new(0) };
}

/// Polls `f` as the task `task` (the address of what its waker wakes), for
/// [`held_back`].
pub(crate) fn running<T>(task: usize, f: impl FnOnce() -> T) -> T {
    /// Puts the outer task back however `f` ends, an unwinding panic included.
    struct Restore(usize);
    impl Drop for Restore {
        fn drop(&mut self) {
            RUNNING.set(self.0);
        }
    }
    let _outer = Restore(RUNNING.replace(task));
    f()
}

/// Whether a wake of `task` now is one a body's poll gives the task this thread is
/// polling; it is then noted, and [`poll_frame`] decides what becomes of it.
pub(crate) fn held_back(task: usize) -> bool {
    if WINDOW.get() == CLOSED || RUNNING.get() != task {
        return false;
    }
    WINDOW.set(HEARD);
    true
}

/// What a body's poll gives: its next frame, an error, or its end.
type Next<B> = Poll<
    Option<Result<http_body::Frame<<B as http_body::Body>::Data>, <B as http_body::Body>::Error>>,
>;

/// Polls `body` for its next frame; a wake of the running task that the poll gives is
/// dropped when the body has ended, and given as the task's context gives it otherwise.
pub(crate) fn poll_frame<B: http_body::Body + Unpin + ?Sized>(
    body: &mut B,
    cx: &mut Context<'_>,
) -> Next<B> {
    /// Closes the window however the poll ends, an unwinding panic included.
    struct Close(u8);
    impl Drop for Close {
        fn drop(&mut self) {
            WINDOW.set(self.0);
        }
    }
    let close = Close(WINDOW.replace(OPEN));
    let frame = Pin::new(&mut *body).poll_frame(cx);
    let heard = WINDOW.get() == HEARD;
    drop(close);
    if heard && !body.is_end_stream() {
        cx.waker().wake_by_ref();
    }
    frame
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::task::{Wake, Waker};

    /// A task's waker that holds back what a body's poll gives it while the task runs.
    struct Task(AtomicUsize);

    impl Wake for Task {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            if !held_back(Arc::as_ptr(self) as usize) {
                self.0.fetch_add(1, SeqCst);
            }
        }
    }

    /// One frame, or none left, that wakes `task` as it is read.
    struct Waking {
        task: Waker,
        frames: usize,
    }

    impl http_body::Body for Waking {
        type Data = Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
            self.task.wake_by_ref();
            if self.frames == 0 {
                return Poll::Ready(None);
            }
            self.frames -= 1;
            Poll::Ready(Some(Ok(http_body::Frame::data(Bytes::from_static(b"x")))))
        }
        fn is_end_stream(&self) -> bool {
            self.frames == 0
        }
    }

    fn read(frames: usize, as_running: bool) -> usize {
        let task = Arc::new(Task(AtomicUsize::new(0)));
        let waker = Waker::from(task.clone());
        let mut body = Waking {
            task: waker.clone(),
            frames,
        };
        let mut cx = Context::from_waker(&waker);
        let id = if as_running {
            Arc::as_ptr(&task) as usize
        } else {
            1
        };
        running(id, || {
            let _ = poll_frame(&mut body, &mut cx);
        });
        task.0.load(SeqCst)
    }

    #[test]
    fn a_wake_from_reading_the_last_frame_is_dropped() {
        assert_eq!(read(1, true), 0);
    }

    #[test]
    fn a_wake_while_frames_remain_is_given() {
        assert_eq!(read(2, true), 1);
    }

    #[test]
    fn another_tasks_wake_is_never_held_back() {
        assert_eq!(read(1, false), 1);
    }

    #[test]
    fn a_wake_outside_a_bodys_poll_is_given() {
        let task = Arc::new(Task(AtomicUsize::new(0)));
        let id = Arc::as_ptr(&task) as usize;
        running(id, || Waker::from(task.clone()).wake_by_ref());
        assert_eq!(task.0.load(SeqCst), 1);
    }
}
