//! Group commit for the deliverer's store calls: every push claims its
//! delivery and records its outcome on its own, and a [`Batcher`] gathers
//! the calls made meanwhile into one store call (one transaction in
//! SQLite, one bulk write in MongoDB). One batch is in the store at a
//! time; the calls that arrive while it runs make the next one, so a busy
//! notifier writes in large batches and an idle one waits for nobody.

use std::future::Future;

use common::store::{StoreError, StoreResult};
use tokio::sync::{mpsc, oneshot};

type Reply<V> = oneshot::Sender<StoreResult<V>>;

/// Hands items to a background task that runs them in batches of at most
/// `max` through one store call. Cheap to share; the task ends when the
/// batcher is dropped.
pub struct Batcher<K, V> {
    tx: mpsc::UnboundedSender<(K, Reply<V>)>,
}

impl<K: Send + 'static, V: Send + 'static> Batcher<K, V> {
    /// Starts the task. `run` answers a batch with one value per item, in
    /// order.
    pub fn spawn<F, Fut>(max: usize, run: F) -> Self
    where
        F: Fn(Vec<K>) -> Fut + Send + 'static,
        Fut: Future<Output = StoreResult<Vec<V>>> + Send,
    {
        let (tx, mut rx) = mpsc::unbounded_channel::<(K, Reply<V>)>();
        tokio::spawn(async move {
            let mut items = Vec::new();
            let mut replies = Vec::new();
            while let Some((item, reply)) = rx.recv().await {
                items.push(item);
                replies.push(reply);
                while items.len() < max.max(1) {
                    let Ok((item, reply)) = rx.try_recv() else {
                        break;
                    };
                    items.push(item);
                    replies.push(reply);
                }
                let answered = run(std::mem::take(&mut items)).await;
                answer(std::mem::take(&mut replies), answered);
            }
        });
        Self { tx }
    }

    /// Runs `item` in the next batch and returns its answer.
    pub async fn call(&self, item: K) -> StoreResult<V> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send((item, reply))
            .map_err(|_| StoreError::unavailable("the notifier is stopping"))?;
        answer
            .await
            .map_err(|_| StoreError::unavailable("the notifier is stopping"))?
    }
}

/// Gives each caller its answer, or a copy of the batch's error.
fn answer<V>(replies: Vec<Reply<V>>, answered: StoreResult<Vec<V>>) {
    match answered {
        Ok(values) if values.len() == replies.len() => {
            for (reply, value) in replies.into_iter().zip(values) {
                let _ = reply.send(Ok(value));
            }
        }
        Ok(values) => {
            let error = anyhow::anyhow!(
                "the store answered {} of a batch of {}",
                values.len(),
                replies.len()
            );
            for reply in replies {
                let _ = reply.send(Err(StoreError::Backend(anyhow::anyhow!("{error}"))));
            }
        }
        Err(error) => {
            for reply in replies {
                let _ = reply.send(Err(copy(&error)));
            }
        }
    }
}

/// The same kind of error (an outage stays an outage), with its message
/// and causes.
fn copy(error: &StoreError) -> StoreError {
    match error {
        StoreError::Unavailable(cause) => StoreError::Unavailable(anyhow::anyhow!("{cause:#}")),
        StoreError::Backend(cause) => StoreError::Backend(anyhow::anyhow!("{cause:#}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[tokio::test]
    async fn calls_made_together_share_a_batch_and_each_gets_its_answer() {
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&sizes);
        let batcher = Arc::new(Batcher::spawn(3, move |items: Vec<u32>| {
            seen.lock().expect("lock").push(items.len());
            async move { Ok(items.into_iter().map(|i| i * 10).collect()) }
        }));
        let calls: Vec<_> = (0..7)
            .map(|i| {
                let batcher = Arc::clone(&batcher);
                async move { batcher.call(i).await.expect("answered") }
            })
            .collect();
        let answers = futures::future::join_all(calls).await;
        assert_eq!(answers, vec![0, 10, 20, 30, 40, 50, 60]);
        let sizes = sizes.lock().expect("lock").clone();
        assert_eq!(sizes.iter().sum::<usize>(), 7);
        assert!(sizes.iter().all(|&n| n <= 3), "{sizes:?}");
        assert!(sizes.len() < 7, "no batch of more than one: {sizes:?}");
    }

    #[tokio::test]
    async fn a_failed_batch_fails_every_call_of_it_with_the_same_kind_of_error() {
        let batcher = Batcher::spawn(8, |_: Vec<u32>| async {
            Err::<Vec<u32>, _>(StoreError::unavailable("store away"))
        });
        let (a, b) = tokio::join!(batcher.call(1), batcher.call(2));
        for result in [a, b] {
            let error = result.expect_err("failed");
            assert!(matches!(error, StoreError::Unavailable(_)), "{error}");
            assert!(error.to_string().contains("store away"), "{error}");
        }
    }
}
