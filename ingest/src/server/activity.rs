//! What one connection is doing, for its timeouts: whether a request is in
//! flight (from its parsed head until its response is sent), when the
//! connection went idle, and when the first byte of a next request came.
//! The socket and the response bodies report to it; the connection's loop
//! in the parent module reads its deadline.

use std::{
    io,
    pin::Pin,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll, ready},
};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::body::{Body, Frame, SizeHint};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
    sync::Notify,
    time::Instant,
};

use super::Settings;
use crate::header_limit::HeaderLimits;

/// What a connection is doing, for its timeouts.
pub(super) struct Activity {
    state: Mutex<State>,
    /// Wakes the connection's watch when the state changes.
    pub(super) changed: Notify,
}

struct State {
    /// Requests handed to the app whose response is not fully sent.
    in_flight: usize,
    /// Whether a request was ever handed to the app.
    served: bool,
    /// When the connection was accepted or its last request finished.
    idle_since: Instant,
    /// When the first byte after `idle_since` arrived, if one has.
    head_started: Option<Instant>,
}

impl Activity {
    pub(super) fn new() -> Self {
        Self {
            state: Mutex::new(State {
                in_flight: 0,
                served: false,
                idle_since: Instant::now(),
                head_started: None,
            }),
            changed: Notify::new(),
        }
    }

    fn update<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut state)
    }

    /// When the connection is to be closed unless something happens first;
    /// `None` while a request is in flight.
    pub(super) fn deadline(&self, settings: &Settings) -> Option<Instant> {
        self.update(|s| {
            if s.in_flight > 0 {
                None
            } else if let Some(started) = s.head_started {
                Some(started + settings.header_read_timeout)
            } else if s.served {
                Some(s.idle_since + settings.idle_timeout)
            } else {
                Some(s.idle_since + settings.header_read_timeout)
            }
        })
    }

    fn bytes_read(&self) {
        let started = self.update(|s| {
            let starts = s.in_flight == 0 && s.head_started.is_none();
            if starts {
                s.head_started = Some(Instant::now());
            }
            starts
        });
        if started {
            self.changed.notify_one();
        }
    }
}

/// A request from the moment its head is parsed until its response is sent.
pub(super) struct InFlight(Arc<Activity>);

impl InFlight {
    pub(super) fn start(activity: Arc<Activity>) -> Self {
        activity.update(|s| {
            s.in_flight += 1;
            s.served = true;
            s.head_started = None;
        });
        activity.changed.notify_one();
        Self(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.update(|s| {
            s.in_flight = s.in_flight.saturating_sub(1);
            if s.in_flight == 0 {
                s.idle_since = Instant::now();
                s.head_started = None;
            }
        });
        self.0.changed.notify_one();
    }
}

/// A response body that keeps its request in flight until it is sent (or
/// dropped), so a client reading slowly is not cut as idle.
pub(super) struct Tracked {
    pub(super) body: BoxBody<Bytes, io::Error>,
    pub(super) _in_flight: InFlight,
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The socket, reporting reads to the connection's [`Activity`], and
/// sending the envelope in place of hyper's own bare answers
/// ([`super::unparsed`]).
pub(super) struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
    limits: HeaderLimits,
    /// The envelope being sent in place of a write of hyper's, and how much
    /// of it is sent.
    replacing: Option<(Vec<u8>, usize)>,
}

impl Watched {
    pub(super) fn new(inner: TcpStream, activity: Arc<Activity>, limits: HeaderLimits) -> Self {
        Self {
            inner,
            activity,
            limits,
            replacing: None,
        }
    }

    /// Sends the replacement for a write of `claimed` bytes, reporting
    /// those bytes as written once all of it is sent.
    fn poll_replacement(
        &mut self,
        cx: &mut Context<'_>,
        claimed: usize,
    ) -> Poll<io::Result<usize>> {
        while let Some((bytes, sent)) = &mut self.replacing {
            if *sent == bytes.len() {
                self.replacing = None;
                break;
            }
            match ready!(Pin::new(&mut self.inner).poll_write(cx, &bytes[*sent..])) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => *sent += n,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        Poll::Ready(Ok(claimed))
    }

    /// Whether `written` is hyper's own answer, which goes out as the
    /// envelope instead. Only a write while no request is in flight can be:
    /// hyper answers a head it could not parse without calling the service.
    fn replaces(&mut self, written: &[u8]) -> bool {
        if self.replacing.is_none() {
            self.replacing = super::unparsed::envelope_for(written, self.limits)
                .filter(|_| self.activity.update(|s| s.in_flight == 0))
                .map(|b| (b, 0));
        }
        self.replacing.is_some()
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.bytes_read();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.replaces(buf) {
            return self.poll_replacement(cx, buf.len());
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // hyper writes a head as one slice; an answer of its own is a head
        // alone.
        if let [head] = bufs
            && self.replaces(head)
        {
            return self.poll_replacement(cx, head.len());
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
