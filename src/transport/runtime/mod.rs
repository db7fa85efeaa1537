//! What wraps a client connection rather than a request: its accept, the HTTP version it is
//! served in, its timers, polling a connection again in place, and draining at shutdown.

pub(crate) mod conn_timers;
pub(crate) mod drain;
pub(crate) mod repoll;
pub(crate) mod slots;
pub(crate) mod version;

/// The next connection on `listener`, its writes sent as they are made (no Nagle delay). An
/// accept that fails (out of descriptors, or the like) is tried again after a pause rather
/// than at once, which would spin, and said at a rate: one failing every pause would write
/// twenty lines a second.
pub(crate) async fn accept(
    listener: &tokio::net::TcpListener,
) -> (tokio::net::TcpStream, std::net::SocketAddr) {
    loop {
        match listener.accept().await {
            Ok((stream, addr)) => {
                let _ = stream.set_nodelay(true);
                return (stream, addr);
            }
            Err(e) => {
                static SAID: crate::lograte::LogRate = crate::lograte::LogRate::new();
                crate::lograte::warn_at_rate!(SAID, "accept", { error = %e, }, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}
