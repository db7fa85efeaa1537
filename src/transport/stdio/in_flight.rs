//! What is in flight between the stdio client and its server: a task per message, the
//! requests among them owed an answer by id (`client::Owed`: for the client's cancellations,
//! and to refuse a second request under an id still owed), and one stop that answers whatever
//! is left when the run ends.

use super::client::ToClient;
use crate::error::UpstreamError;
use crate::pipeline::Pending;
use bytes::Bytes;
use std::future::Future;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// A forwarded message's exchange, and what its client is owed if it cannot finish.
pub(super) struct Exchange<F> {
    pub(super) future: F,
    /// The request the exchange answers, answered with the stop's error if it is stopped.
    pub(super) owed: Pending,
}

/// What is in flight: each message's task, and the word that ends them all with an error
/// (the server went away, or the client did and the grace period is over).
pub(super) struct InFlight {
    tasks: JoinSet<()>,
    stop: watch::Sender<Option<Arc<UpstreamError>>>,
}

impl InFlight {
    pub(super) fn new() -> InFlight {
        InFlight {
            tasks: JoinSet::new(),
            stop: watch::channel(None).0,
        }
    }

    /// Runs `task`, owing its client the answer to request `id`.
    fn start<T>(&mut self, to: &ToClient, id: Option<String>, task: T)
    where
        T: Future<Output = ()> + Send + 'static,
    {
        while self.tasks.try_join_next().is_some() {}
        to.owed.start(id, || self.tasks.spawn(task));
    }

    /// Runs `decide` (deciding and sending the client's `line`) and then its exchange on a
    /// task; if the stop comes first, the line is refused with it.
    pub(super) fn spawn<D, F>(&mut self, to: &ToClient, line: Bytes, id: Option<String>, decide: D)
    where
        D: Future<Output = Option<Exchange<F>>> + Send + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        let (t, stop) = (to.clone(), self.stop.subscribe());
        let task = async move {
            let exchange = tokio::select! {
                ex = decide => ex,
                why = stopped(stop.clone()) => return t.refuse(&line, &why),
            };
            if let Some(ex) = exchange {
                until_stopped(ex, t, stop).await;
            }
        };
        self.start(to, id, task);
    }

    /// Waits for an exchange already sent on a task, or answers it with the stop's error.
    pub(super) fn wait<F: Future<Output = ()> + Send + 'static>(
        &mut self,
        exchange: Exchange<F>,
        to: &ToClient,
        id: Option<String>,
    ) {
        let task = until_stopped(exchange, to.clone(), self.stop.subscribe());
        self.start(to, id, task);
    }

    /// Waits until fewer than `max` messages are in flight.
    pub(super) async fn room(&mut self, max: usize) {
        while self.tasks.len() >= max && self.tasks.join_next().await.is_some() {}
    }

    pub(super) async fn settled(&mut self) {
        while self.tasks.join_next().await.is_some() {}
    }

    /// Ends what is left with `why`, and waits until it has been answered.
    pub(super) async fn stop(&mut self, why: Arc<UpstreamError>) {
        let _ = self.stop.send(Some(why));
        self.settled().await;
    }
}

async fn stopped(mut stop: watch::Receiver<Option<Arc<UpstreamError>>>) -> Arc<UpstreamError> {
    let why = stop.wait_for(Option::is_some).await.map(|w| w.clone());
    match why {
        Ok(Some(why)) => why,
        _ => std::future::pending().await,
    }
}

/// The exchange, unless the stop comes first: then it is dropped, and its request answered
/// with the stop's error. An exchange ends as soon as it has written its answer, so a
/// request is never answered twice. The exchange is polled first: when the server's output
/// ends, its waits are let go before the stop is sent, so an exchange that can end on its
/// own does (its answer, and its hop's span, say why), whichever task wakes first.
async fn until_stopped<F: Future<Output = ()>>(
    exchange: Exchange<F>,
    to: ToClient,
    stop: watch::Receiver<Option<Arc<UpstreamError>>>,
) {
    let Exchange { future, owed } = exchange;
    tokio::select! {
        biased;
        () = future => {}
        why = stopped(stop) => to.failed(&owed, &why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::Gateway;
    use crate::mcp::Era;
    use crate::pipeline::Kind;
    use crate::transport::stdio::client::Out;
    use std::time::Duration;
    use tokio::sync::mpsc;

    fn client() -> (ToClient, mpsc::UnboundedReceiver<Out>) {
        let gw = Gateway::new(crate::config::Config {
            upstream: Some("http://127.0.0.1:9/mcp".into()),
            ..crate::config::Config::default()
        })
        .unwrap();
        let (out, rx) = mpsc::unbounded_channel();
        (
            ToClient {
                gw,
                out,
                unread: Default::default(),
                owed: Default::default(),
                traces: Default::default(),
            },
            rx,
        )
    }

    fn owed(to: &ToClient, id: &str) -> Pending {
        let target = to.gw.targets[0].clone();
        Pending {
            id: Some(serde_json::value::RawValue::from_string(id.into()).unwrap()),
            kind: Kind::Other,
            era: Era::Legacy,
            key: to.gw.scope(&target, None, []),
            target,
            client: None,
            bridged: None,
        }
    }

    fn lines(rx: &mut mpsc::UnboundedReceiver<Out>) -> Vec<serde_json::Value> {
        std::iter::from_fn(|| rx.try_recv().ok())
            .map(|o| match o {
                Out::Line(l) => serde_json::from_slice(&l).unwrap(),
                Out::Exit(_) => panic!("no exit here"),
            })
            .collect()
    }

    /// An exchange that writes its answer after `after`.
    fn answering(
        to: &ToClient,
        id: u32,
        after: Duration,
    ) -> Exchange<impl Future<Output = ()> + Send + 'static + use<>> {
        let t = to.clone();
        Exchange {
            future: async move {
                tokio::time::sleep(after).await;
                t.write(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#));
            },
            owed: owed(to, &id.to_string()),
        }
    }

    #[tokio::test]
    async fn a_withdrawn_request_is_not_answered_and_the_rest_are() {
        let (to, mut rx) = client();
        let mut in_flight = InFlight::new();
        in_flight.wait(
            answering(&to, 1, Duration::from_millis(50)),
            &to,
            Some("1".into()),
        );
        in_flight.wait(
            answering(&to, 2, Duration::from_millis(50)),
            &to,
            Some("2".into()),
        );
        to.owed.withdraw("1");
        in_flight.settled().await;
        let ids: Vec<_> = lines(&mut rx).iter().map(|l| l["id"].clone()).collect();
        assert_eq!(ids, [2]);
    }

    /// The client may send its next request under an id as soon as it has read the answer,
    /// which can be before the task that wrote the answer has ended.
    #[tokio::test]
    async fn an_id_is_free_once_its_answer_is_written_while_its_task_still_runs() {
        let (to, mut rx) = client();
        let mut in_flight = InFlight::new();
        let (t, (go, answer)) = (to.clone(), tokio::sync::oneshot::channel::<()>());
        let exchange = Exchange {
            future: async move {
                let _ = answer.await;
                t.write_answer(
                    &owed(&t, "1"),
                    &br#"{"jsonrpc":"2.0","id":1,"result":{}}"#[..],
                    "forwarded",
                );
                std::future::pending::<()>().await;
            },
            owed: owed(&to, "1"),
        };
        in_flight.wait(exchange, &to, Some("1".into()));
        assert!(to.owed.holds("1"), "owed until it is answered");
        go.send(()).unwrap();
        while rx.recv().await.is_none() {}
        assert!(!to.owed.holds("1"), "free once the answer is written");
        assert_eq!(in_flight.tasks.len(), 1, "its task has not ended");
    }

    #[tokio::test]
    async fn the_stop_answers_what_is_left_once_and_by_its_id() {
        let (to, mut rx) = client();
        let mut in_flight = InFlight::new();
        in_flight.wait(answering(&to, 1, Duration::ZERO), &to, Some("1".into()));
        in_flight.settled().await;
        in_flight.wait(
            answering(&to, 2, Duration::from_secs(3600)),
            &to,
            Some("2".into()),
        );
        // A line still being decided when the stop comes is refused by its own id.
        let line = bytes::Bytes::from_static(br#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#);
        let deciding = std::future::pending::<Option<Exchange<std::future::Ready<()>>>>();
        in_flight.spawn(&to, line, Some("3".into()), deciding);
        in_flight
            .stop(Arc::new(UpstreamError::Unreachable(
                "the tool server went away".into(),
            )))
            .await;
        let got = lines(&mut rx);
        let mut ids: Vec<_> = got.iter().map(|l| l["id"].as_u64().unwrap()).collect();
        ids.sort_unstable();
        assert_eq!(ids, [1, 2, 3], "{got:?}");
        for l in &got[1..] {
            assert!(l.to_string().contains("the tool server went away"), "{l}");
        }
    }

    #[tokio::test]
    async fn room_waits_until_fewer_than_the_most_are_in_flight() {
        let (to, _rx) = client();
        let mut in_flight = InFlight::new();
        in_flight.wait(answering(&to, 1, Duration::from_millis(30)), &to, None);
        in_flight.wait(answering(&to, 2, Duration::from_millis(30)), &to, None);
        in_flight.room(2).await;
        assert!(in_flight.tasks.len() < 2);
        in_flight.room(1).await;
        assert!(in_flight.tasks.is_empty());
    }
}
