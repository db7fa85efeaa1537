//! Graceful shutdown of the HTTP connections, without a lock shared by every poll.
//!
//! hyper-util's `GracefulShutdown` polls a `watch` receiver on every poll of every
//! connection, and a tokio `Notify` that is waited on takes its mutex on each such poll: one
//! lock that all connections took, from both worker threads, several times per request.
//! Here a connection registers its waker once, when first polled, and then reads one flag
//! per poll that nobody writes until shutdown; shutdown sets the flag and wakes every
//! registered connection, which then starts its own graceful close.

use crate::locks::MutexExt;
use hyper_util::server::graceful::GracefulConnection;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use tokio::sync::Notify;

#[derive(Default)]
struct Shared {
    closing: AtomicBool,
    /// Each live connection's waker, by connection number, once it has been polled.
    wakers: Mutex<HashMap<u64, Waker>>,
    next: AtomicU64,
    live: AtomicUsize,
    /// Told when the last connection ends.
    ended: Notify,
}

#[derive(Clone, Default)]
pub struct Drain {
    shared: Arc<Shared>,
}

impl Drain {
    pub fn new() -> Drain {
        Drain::default()
    }

    /// Wraps a connection so that [`Drain::shutdown`] closes it gracefully.
    pub fn watch<C: GracefulConnection>(&self, conn: C) -> Watched<C> {
        self.shared.live.fetch_add(1, Ordering::AcqRel);
        Watched {
            conn: Box::pin(conn),
            id: self.shared.next.fetch_add(1, Ordering::Relaxed),
            shared: self.shared.clone(),
            registered: None,
            told: false,
        }
    }

    /// Asks every connection to finish what it is doing and close, and waits until all have.
    pub async fn shutdown(&self) {
        self.shared.closing.store(true, Ordering::Release);
        let wakers: Vec<Waker> = self.shared.wakers.locked().values().cloned().collect();
        for w in wakers {
            w.wake();
        }
        loop {
            // Made before the count is read, so an end in between is not missed.
            let ended = self.shared.ended.notified();
            if self.shared.live.load(Ordering::Acquire) == 0 {
                return;
            }
            ended.await;
        }
    }
}

pub struct Watched<C> {
    conn: Pin<Box<C>>,
    id: u64,
    shared: Arc<Shared>,
    /// The waker shutdown will wake; registered again only if the task's changes.
    registered: Option<Waker>,
    told: bool,
}

impl<C: GracefulConnection> Future for Watched<C> {
    type Output = C::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<C::Output> {
        let this = self.get_mut();
        if !this
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            // Registered before the flag is read: a shutdown that sets the flag after this
            // read finds the waker; one that set it before is seen by the read.
            let waker = cx.waker().clone();
            this.shared.wakers.locked().insert(this.id, waker.clone());
            this.registered = Some(waker);
        }
        if !this.told && this.shared.closing.load(Ordering::Acquire) {
            this.told = true;
            this.conn.as_mut().graceful_shutdown();
        }
        this.conn.as_mut().poll(cx)
    }
}

impl<C> Drop for Watched<C> {
    fn drop(&mut self) {
        if self.registered.is_some() {
            self.shared.wakers.locked().remove(&self.id);
        }
        if self.shared.live.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.ended.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn shutdown_without_connections_returns_at_once() {
        tokio::time::timeout(Duration::from_secs(1), Drain::new().shutdown())
            .await
            .expect("nothing to wait for");
    }

    #[tokio::test]
    async fn a_request_in_flight_is_answered_and_then_the_connection_closes() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let drain = Drain::new();
        let d = drain.clone();
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let service = hyper::service::service_fn(|_req| async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Full::new(
                    bytes::Bytes::from_static(b"done"),
                )))
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            let _ = d.watch(conn).await;
        });
        let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
        client
            .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let started = std::time::Instant::now();
        tokio::time::timeout(Duration::from_secs(5), drain.shutdown())
            .await
            .expect("the connection ends");
        assert!(
            started.elapsed() >= Duration::from_millis(100),
            "waited for the answer"
        );
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).await.unwrap();
        let answer = String::from_utf8(answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        assert!(answer.ends_with("done"), "{answer}");
        assert!(
            answer.to_ascii_lowercase().contains("connection: close"),
            "{answer}"
        );
    }
}
