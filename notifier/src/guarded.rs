//! HTTP to URLs others chose (Web Push endpoints, destinations' webhooks),
//! guarded against server-side request forgery: a URL is checked by
//! [`common::endpoint`] before every send, and a name is resolved by
//! [`Reachable`], which refuses the whole answer when any address may not
//! be contacted and otherwise hands the client exactly the addresses it
//! checked — the client connects to those, with no second resolution in
//! between. Targets the operator allow-listed go through a plain client.
//! Neither follows redirects (a redirect could point anywhere) or uses a
//! proxy from the environment (a proxy would resolve the name itself).

use std::{net::SocketAddr, sync::Arc, time::Duration};

use common::endpoint::{Checked, EndpointPolicy, Refusal};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Resolves names and lets only addresses the policy allows through:
/// public ones, and those in the operator's allowed blocks.
struct Reachable(EndpointPolicy);

impl Resolve for Reachable {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.0.clone();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            policy.only_reachable(&addrs)?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// The two clients, and the policy that picks between them.
pub struct GuardedClient {
    policy: EndpointPolicy,
    guarded: reqwest::Client,
    trusted: reqwest::Client,
}

/// Why a request was not answered.
#[derive(Debug)]
pub enum SendError {
    /// The endpoint may not be contacted (checked before connecting).
    Refused(Refusal),
    /// No answer: connection, TLS or timeout.
    Transport(reqwest::Error),
}

impl GuardedClient {
    pub fn new(policy: EndpointPolicy, timeout: Duration) -> anyhow::Result<Self> {
        let builder = || {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .connect_timeout(timeout.min(Duration::from_secs(5)))
                .timeout(timeout)
        };
        Ok(Self {
            guarded: builder()
                .dns_resolver(Arc::new(Reachable(policy.clone())))
                .build()?,
            policy,
            trusted: builder().build()?,
        })
    }

    /// Checks `endpoint` and posts to it with `headers` and `body`.
    pub async fn post(
        &self,
        endpoint: &str,
        headers: reqwest::header::HeaderMap,
        body: Vec<u8>,
    ) -> Result<reqwest::Response, SendError> {
        let (client, url) = match self
            .policy
            .check_url(endpoint)
            .map_err(SendError::Refused)?
        {
            Checked::Allowed(url) => (&self.trusted, url),
            Checked::Public(url) => (&self.guarded, url),
        };
        client
            .post(url)
            .headers(headers)
            .body(body)
            .send()
            .await
            .map_err(|e| match refusal_in(&e) {
                Some(refusal) => SendError::Refused(refusal),
                None => SendError::Transport(e),
            })
    }
}

/// The policy's refusal, when that is what failed the connection.
fn refusal_in(error: &reqwest::Error) -> Option<Refusal> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(refusal) = e.downcast_ref::<Refusal>() {
            return Some(refusal.clone());
        }
        source = e.source();
    }
    None
}
