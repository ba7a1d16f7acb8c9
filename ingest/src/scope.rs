//! The scope check: a key may do only what its scopes name. The scope each
//! operation needs is in the route table ([`routes::required_scope`]); this
//! layer, inside the rate limit, refuses a key without it (403), so the
//! refusal counts against the key's quota like any request, never as a
//! failed authentication of the address.

use std::sync::Arc;

use poem::{Endpoint, Request, Response};

use crate::{
    auth::AuthContext,
    error::{ApiError, call_rendered},
    request_id::RequestId,
    routes,
};

/// The layer: `EndpointExt::around`. Only API keys have scopes; an admin
/// token reaches every admin route.
pub async fn scope<E: Endpoint>(ep: Arc<E>, req: Request) -> poem::Result<Response> {
    let request_id = RequestId::of(&req);
    let missing = req.extensions().get::<AuthContext>().and_then(|auth| {
        routes::required_scope(req.method(), req.uri().path())
            .filter(|needed| !auth.allows(*needed))
    });
    Ok(match missing {
        Some(needed) => ApiError::MissingScope(needed).render(request_id),
        None => call_rendered(&*ep, req, request_id).await,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use common::store::{KeyScope, Scope};
    use poem::http::{Method, StatusCode};

    use super::*;

    /// The layer alone, around an endpoint that counts its calls.
    async fn call(
        method: Method,
        path: &str,
        scopes: Option<Vec<KeyScope>>,
    ) -> (StatusCode, usize) {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&calls);
        let inner = poem::endpoint::make(move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
            async { "done" }
        });
        let mut req = Request::builder().method(method).uri_str(path).finish();
        if let Some(scopes) = scopes {
            req.extensions_mut().insert(AuthContext {
                key_id: uuid::Uuid::now_v7(),
                scope: Scope::new("acme", "shop"),
                rate_limit: None,
                scopes,
            });
        }
        let response = scope(Arc::new(inner), req).await.expect("a response");
        (response.status(), calls.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn a_key_without_the_routes_scope_is_refused_before_the_handler() {
        let reader = Some(vec![KeyScope::EventsRead]);
        assert_eq!(
            call(Method::POST, "/v1/events", reader.clone()).await,
            (StatusCode::FORBIDDEN, 0)
        );
        assert_eq!(
            call(Method::GET, "/v1/events", reader).await,
            (StatusCode::OK, 1)
        );
    }

    #[tokio::test]
    async fn a_request_without_a_key_is_not_this_layers_to_refuse() {
        // An admin token or an anonymous route: authentication decided.
        assert_eq!(
            call(Method::POST, "/admin/v1/organizations", None).await,
            (StatusCode::OK, 1)
        );
    }
}
