//! Rate limits with governor: per API key (default or the key's own quota),
//! per client address for failed authentication (one bucket for API keys,
//! one for admin tokens, so a mistyped dashboard token never locks API
//! clients behind the same address out), and per client address on the
//! routes that need no key. Every decision carries what the
//! `X-RateLimit-*` headers report.
//!
//! The [`rate_limit`] layer applies the limit of the caller the
//! authentication layer found (or of the address, on routes that need no
//! credential) and puts its headers on every answer.
//!
//! governor keeps its state in this process: replicas behind a load balancer
//! each enforce the full quota, so either route by key or divide the
//! configured quota by the number of replicas (docs/operations.md, "Rate
//! limits across replicas").

use std::{
    net::IpAddr,
    num::NonZeroU32,
    sync::Arc,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use dashmap::{DashMap, mapref::entry::Entry};
use governor::{
    DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter,
    clock::{Clock, DefaultClock},
    middleware::StateInformationMiddleware,
    state::{InMemoryState, NotKeyed, keyed::DefaultKeyedStateStore},
};
use poem::{
    Endpoint, Request, Response,
    http::{HeaderName, HeaderValue},
    web::RemoteAddr,
};
use uuid::Uuid;

use crate::{
    admin::AdminContext,
    auth::AuthContext,
    error::{ApiError, call_rendered},
    request_id::RequestId,
    state::AppState,
};

type Direct = RateLimiter<NotKeyed, InMemoryState, DefaultClock, StateInformationMiddleware>;
type Keyed<K> = RateLimiter<K, DefaultKeyedStateStore<K>, DefaultClock, StateInformationMiddleware>;

/// What the `X-RateLimit-*` headers say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitInfo {
    pub limit: u32,
    pub remaining: u32,
    /// Unix time (seconds) by which the full quota is available again.
    pub reset: u64,
}

// Names made once: a `&str` name is parsed and checked on every insert.
const LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

impl RateLimitInfo {
    pub fn apply(&self, response: &mut Response) {
        let headers = response.headers_mut();
        headers.insert(LIMIT, HeaderValue::from(self.limit));
        headers.insert(REMAINING, HeaderValue::from(self.remaining));
        headers.insert(RESET, HeaderValue::from(self.reset));
    }
}

/// The verdict on one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allowed(RateLimitInfo),
    Limited {
        info: RateLimitInfo,
        retry_after_secs: u64,
    },
}

impl Decision {
    pub fn info(&self) -> RateLimitInfo {
        match self {
            Self::Allowed(info) | Self::Limited { info, .. } => *info,
        }
    }
}

/// A limiter for one API key, with the quota it was built for so a changed
/// per-key limit is noticed.
struct KeyLimiter {
    per_minute: u32,
    limiter: Direct,
}

/// Failed authentications of one kind of credential, per address.
pub struct FailureBucket {
    per_address: (u32, Keyed<IpAddr>),
    /// Addresses refused outright until the instant given, after using up
    /// their failed-authentication quota.
    lockouts: DashMap<IpAddr, Instant>,
}

/// Which failed-authentication bucket a request counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    ApiKey,
    AdminToken,
}

/// All of the service's limiters.
pub struct RateLimits {
    default_per_minute: u32,
    keys: DashMap<Uuid, Arc<KeyLimiter>>,
    auth_failures: FailureBucket,
    admin_failures: FailureBucket,
    anonymous: (u32, Keyed<IpAddr>),
    clock: DefaultClock,
}

fn keyed(n: u32) -> (u32, Keyed<IpAddr>) {
    (
        n,
        DefaultKeyedRateLimiter::keyed(quota(n)).with_middleware::<StateInformationMiddleware>(),
    )
}

impl FailureBucket {
    fn new(per_minute: u32) -> Self {
        Self {
            per_address: keyed(per_minute),
            lockouts: DashMap::new(),
        }
    }
}

fn quota(per_minute: u32) -> Quota {
    Quota::per_minute(NonZeroU32::new(per_minute).unwrap_or(NonZeroU32::MIN))
}

fn unix_now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

impl RateLimits {
    pub fn new(
        default_per_minute: u32,
        auth_failures_per_minute: u32,
        anonymous_per_minute: u32,
    ) -> Self {
        Self {
            default_per_minute,
            keys: DashMap::new(),
            auth_failures: FailureBucket::new(auth_failures_per_minute),
            admin_failures: FailureBucket::new(auth_failures_per_minute),
            anonymous: keyed(anonymous_per_minute),
            clock: DefaultClock::default(),
        }
    }

    /// With a quota of its own for failed admin authentications.
    pub fn with_admin_failures(mut self, per_minute: u32) -> Self {
        self.admin_failures = FailureBucket::new(per_minute);
        self
    }

    fn bucket(&self, credential: Credential) -> &FailureBucket {
        match credential {
            Credential::ApiKey => &self.auth_failures,
            Credential::AdminToken => &self.admin_failures,
        }
    }

    /// Counts one request of an API key against its quota.
    pub fn check_key(&self, key: Uuid, own_limit: Option<u32>) -> Decision {
        let per_minute = own_limit.unwrap_or(self.default_per_minute);
        // The common case only reads the map; a miss (first use, or a changed
        // quota) takes the shard's write lock through the entry API, and looks
        // again under it, so concurrent first requests share one limiter
        // instead of each counting against a fresh one.
        let current = self
            .keys
            .get(&key)
            .map(|e| Arc::clone(e.value()))
            .filter(|l| l.per_minute == per_minute);
        let limiter = current.unwrap_or_else(|| {
            let fresh = || {
                Arc::new(KeyLimiter {
                    per_minute,
                    limiter: DefaultDirectRateLimiter::direct(quota(per_minute))
                        .with_middleware::<StateInformationMiddleware>(),
                })
            };
            match self.keys.entry(key) {
                Entry::Occupied(mut e) => {
                    if e.get().per_minute != per_minute {
                        e.insert(fresh());
                    }
                    Arc::clone(e.get())
                }
                Entry::Vacant(e) => Arc::clone(e.insert(fresh()).value()),
            }
        });
        self.decide(per_minute, limiter.limiter.check())
    }

    /// Counts one failed authentication with `credential` from `addr`. Once
    /// the quota is used up, the address is locked out (for that kind of
    /// credential) until it refills a little.
    pub fn check_auth_failure(&self, credential: Credential, addr: IpAddr) -> Decision {
        let bucket = self.bucket(credential);
        let (n, limiter) = &bucket.per_address;
        let decision = self.decide(*n, limiter.check_key(&addr));
        if let Decision::Limited {
            retry_after_secs, ..
        } = decision
        {
            bucket
                .lockouts
                .insert(addr, Instant::now() + Duration::from_secs(retry_after_secs));
        }
        decision
    }

    /// The refusal for an address that is locked out for `credential`, if
    /// it is.
    pub fn locked_out(&self, credential: Credential, addr: IpAddr) -> Option<Decision> {
        let bucket = self.bucket(credential);
        let until = *bucket.lockouts.get(&addr)?;
        let left = until.checked_duration_since(Instant::now());
        let Some(left) = left.filter(|d| !d.is_zero()) else {
            bucket.lockouts.remove(&addr);
            return None;
        };
        let per_minute = bucket.per_address.0;
        let interval = Duration::from_secs(60) / per_minute.max(1);
        let reset = (unix_now() + left + interval * (per_minute - 1))
            .as_secs_f64()
            .ceil() as u64;
        Some(Decision::Limited {
            info: RateLimitInfo {
                limit: per_minute,
                remaining: 0,
                reset,
            },
            retry_after_secs: left.as_secs_f64().ceil().max(1.0) as u64,
        })
    }

    /// Counts one request from `addr` to a route that needs no key.
    pub fn check_anonymous(&self, addr: IpAddr) -> Decision {
        let (n, limiter) = &self.anonymous;
        self.decide(*n, limiter.check_key(&addr))
    }

    /// Forgets per-address state that has fully replenished, so memory stays
    /// bounded by recent clients. Call periodically.
    pub fn forget_idle(&self) {
        for (_, limiter) in [
            &self.auth_failures.per_address,
            &self.admin_failures.per_address,
            &self.anonymous,
        ] {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
        let now = Instant::now();
        for bucket in [&self.auth_failures, &self.admin_failures] {
            bucket.lockouts.retain(|_, until| *until > now);
        }
    }

    fn decide(
        &self,
        per_minute: u32,
        outcome: Result<
            governor::middleware::StateSnapshot,
            governor::NotUntil<<DefaultClock as Clock>::Instant>,
        >,
    ) -> Decision {
        // One unit of quota comes back every `interval`.
        let interval = Duration::from_secs(60) / per_minute.max(1);
        let now = unix_now();
        let reset_at = |until_full: Duration| (now + until_full).as_secs_f64().ceil() as u64;
        match outcome {
            Ok(snapshot) => {
                let remaining = snapshot.remaining_burst_capacity().min(per_minute);
                Decision::Allowed(RateLimitInfo {
                    limit: per_minute,
                    remaining,
                    reset: reset_at(interval * (per_minute - remaining)),
                })
            }
            Err(not_until) => {
                let wait = not_until.wait_time_from(self.clock.now());
                Decision::Limited {
                    info: RateLimitInfo {
                        limit: per_minute,
                        remaining: 0,
                        reset: reset_at(wait + interval * (per_minute - 1)),
                    },
                    retry_after_secs: wait.as_secs_f64().ceil().max(1.0) as u64,
                }
            }
        }
    }
}

/// The client's address: the socket peer, or the first `X-Forwarded-For`
/// entry when the operator said a trusted proxy sets it.
pub fn client_addr(req: &Request, trust_forwarded_for: bool) -> IpAddr {
    let forwarded = trust_forwarded_for
        .then(|| req.headers().get("x-forwarded-for"))
        .flatten()
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .and_then(|first| first.trim().parse().ok());
    forwarded.unwrap_or_else(|| match req.remote_addr() {
        RemoteAddr(poem::Addr::SocketAddr(addr)) => addr.ip(),
        _ => IpAddr::from([0, 0, 0, 0]),
    })
}

/// The 429 of a used-up quota, with its headers.
pub fn refused(info: RateLimitInfo, retry_after_secs: u64, request_id: RequestId) -> Response {
    let mut response = ApiError::RateLimited { retry_after_secs }.render(request_id);
    info.apply(&mut response);
    response
}

/// The layer: `EndpointExt::around` with the app state, inside
/// authentication. Counts the request against its caller's quota: the
/// key's (its own or the default), the admin's, or the address's on the
/// routes that need no credential.
pub async fn rate_limit<E: Endpoint>(
    ep: Arc<E>,
    req: Request,
    state: Arc<AppState>,
) -> poem::Result<Response> {
    let request_id = RequestId::of(&req);
    let limits = &state.rate_limits;
    let (decision, quota) = if let Some(auth) = req.extensions().get::<AuthContext>() {
        (limits.check_key(auth.key_id, auth.rate_limit), "key")
    } else if let Some(admin) = req.extensions().get::<AdminContext>() {
        (limits.check_key(admin.admin.id, None), "key")
    } else {
        let addr = client_addr(&req, state.config.trust_forwarded_for);
        (limits.check_anonymous(addr), "anonymous")
    };
    match decision {
        Decision::Limited {
            info,
            retry_after_secs,
        } => {
            state.metrics.rate_limited(quota);
            Ok(refused(info, retry_after_secs, request_id))
        }
        Decision::Allowed(info) => {
            let mut response = call_rendered(&*ep, req, request_id).await;
            info.apply(&mut response);
            Ok(response)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_gets_its_quota_then_is_limited() {
        let limits = RateLimits::new(3, 1, 1);
        let key = Uuid::new_v4();
        let remaining: Vec<u32> = (0..3)
            .map(|_| match limits.check_key(key, None) {
                Decision::Allowed(info) => info.remaining,
                other => panic!("allowed expected, got {other:?}"),
            })
            .collect();
        assert_eq!(remaining, vec![2, 1, 0]);
        match limits.check_key(key, None) {
            Decision::Limited {
                info,
                retry_after_secs,
            } => {
                assert_eq!((info.limit, info.remaining), (3, 0));
                assert!((1..=20).contains(&retry_after_secs), "{retry_after_secs}");
                assert!(info.reset >= unix_now().as_secs());
            }
            other => panic!("limited expected, got {other:?}"),
        }
    }

    #[test]
    fn a_key_with_its_own_limit_uses_it() {
        let limits = RateLimits::new(100, 1, 1);
        let info = limits.check_key(Uuid::new_v4(), Some(7)).info();
        assert_eq!((info.limit, info.remaining), (7, 6));
    }

    #[test]
    fn keys_do_not_share_quota() {
        let limits = RateLimits::new(1, 1, 1);
        assert!(matches!(
            limits.check_key(Uuid::new_v4(), None),
            Decision::Allowed(_)
        ));
        assert!(matches!(
            limits.check_key(Uuid::new_v4(), None),
            Decision::Allowed(_)
        ));
    }

    /// Runs `threads` threads that start together and each call `check`
    /// `per_thread` times; returns how many calls were allowed.
    fn allowed_when_racing(
        limits: &RateLimits,
        key: Uuid,
        own_limit: Option<u32>,
        threads: usize,
        per_thread: usize,
    ) -> usize {
        let barrier = std::sync::Barrier::new(threads);
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        (0..per_thread)
                            .filter(|_| {
                                matches!(limits.check_key(key, own_limit), Decision::Allowed(_))
                            })
                            .count()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("thread")).sum()
        })
    }

    #[test]
    fn concurrent_first_requests_of_a_key_share_one_quota() {
        let limits = RateLimits::new(10, 1, 1);
        // Many fresh keys, so a race that is rare on one key shows on some.
        for round in 0..200 {
            let allowed = allowed_when_racing(&limits, Uuid::new_v4(), None, 8, 3);
            assert_eq!(allowed, 10, "round {round}: exactly the quota passes");
        }
    }

    #[test]
    fn concurrent_requests_after_a_quota_change_share_one_quota() {
        let limits = RateLimits::new(10, 1, 1);
        for round in 0..200 {
            let key = Uuid::new_v4();
            assert!(matches!(limits.check_key(key, None), Decision::Allowed(_)));
            let allowed = allowed_when_racing(&limits, key, Some(5), 8, 2);
            assert_eq!(allowed, 5, "round {round}: exactly the new quota passes");
        }
    }

    /// The layer alone, on an API state whose quotas are `config`'s,
    /// around an endpoint that counts its calls.
    struct Layer {
        state: Arc<AppState>,
        calls: Arc<std::sync::atomic::AtomicUsize>,
        _dir: tempfile::TempDir,
    }

    impl Layer {
        async fn new(config: crate::Config) -> Self {
            let (state, dir) = AppState::for_tests(config).await;
            Self {
                state,
                calls: Arc::default(),
                _dir: dir,
            }
        }

        async fn call(&self, caller: Option<AuthContext>) -> Response {
            let calls = Arc::clone(&self.calls);
            let inner = poem::endpoint::make(move |_| {
                calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                async { "done" }
            });
            let mut req = Request::builder().uri_str("/v1/events").finish();
            if let Some(caller) = caller {
                req.extensions_mut().insert(caller);
            }
            rate_limit(Arc::new(inner), req, Arc::clone(&self.state))
                .await
                .expect("a response")
        }

        fn calls(&self) -> usize {
            self.calls.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    fn header(response: &Response, name: &str) -> Option<String> {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }

    #[tokio::test]
    async fn the_layer_counts_an_anonymous_request_against_its_address() {
        let mut config = crate::Config::defaults();
        config.anonymous_rate_limit_per_minute = NonZeroU32::MIN;
        let layer = Layer::new(config).await;
        let first = layer.call(None).await;
        assert_eq!(first.status(), poem::http::StatusCode::OK);
        assert_eq!(header(&first, "x-ratelimit-limit").as_deref(), Some("1"));
        assert_eq!(
            header(&first, "x-ratelimit-remaining").as_deref(),
            Some("0")
        );
        let second = layer.call(None).await;
        assert_eq!(second.status(), poem::http::StatusCode::TOO_MANY_REQUESTS);
        assert!(header(&second, "retry-after").is_some());
        assert_eq!(
            layer.calls(),
            1,
            "a limited request never reaches the handler"
        );
    }

    #[tokio::test]
    async fn the_layer_counts_a_key_against_its_own_quota() {
        let layer = Layer::new(crate::Config::defaults()).await;
        let key = AuthContext {
            key_id: Uuid::now_v7(),
            scope: common::store::Scope::new("acme", "shop"),
            rate_limit: Some(2),
            scopes: vec![],
        };
        let limits: Vec<_> = [0; 3]
            .iter()
            .map(|_| layer.call(Some(key.clone())))
            .collect();
        let mut statuses = Vec::new();
        for call in limits {
            let response = call.await;
            assert_eq!(header(&response, "x-ratelimit-limit").as_deref(), Some("2"));
            statuses.push(response.status().as_u16());
        }
        assert_eq!(statuses, [200, 200, 429]);
        assert_eq!(layer.calls(), 2);
    }
}
