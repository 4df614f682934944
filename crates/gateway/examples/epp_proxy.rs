//! A small forwarding proxy that does what Envoy does with an endpoint picker, so the picker can
//! be measured end to end against real engines where no Envoy can be installed: for each HTTP
//! request it opens an `ext_proc` stream to the picker (Envoy's generated client), sends the
//! request's headers and whole body, sends the request to the endpoint the picker names (the
//! first of `x-gateway-destination-endpoint`) with the body the picker passed back, and passes
//! the answer's headers and every body chunk through the picker on the way back to the client,
//! as Envoy's `FULL_DUPLEX_STREAMED` mode does. An immediate response is answered as is. Not a
//! proxy for production: HTTP/1 only, no retries, no fallbacks, no timeouts beyond the picker's.
//!
//! `cargo run --release -p xsched-gateway --example epp_proxy -- LISTEN EPP`
//! (e.g. `127.0.0.1:18011 127.0.0.1:9002`; `scripts/llm/gateway-bench.py --targets epp-fcfs,…`
//! starts it).

use bytes::Bytes;
use envoy_types::pb::envoy::service::ext_proc::v3::external_processor_client::ExternalProcessorClient;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    HttpBody, ProcessingRequest, ProcessingResponse, body_mutation::Mutation,
    processing_request::Request, processing_response::Response as Answer,
};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::{Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use xsched_gateway::epp::messages::{DESTINATION, http_headers};

type Body = BoxBody<Bytes, Infallible>;
type Failure = Box<dyn std::error::Error + Send + Sync>;
type Upstream = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    Full<Bytes>,
>;

/// One request's stream to the picker.
struct Picker {
    tx: mpsc::Sender<ProcessingRequest>,
    rx: tonic::Streaming<ProcessingResponse>,
}

impl Picker {
    async fn send(&self, request: Request) -> Result<(), Failure> {
        let message = ProcessingRequest {
            request: Some(request),
            ..ProcessingRequest::default()
        };
        Ok(self.tx.send(message).await?)
    }

    async fn next(&mut self) -> Result<Answer, Failure> {
        let r = self
            .rx
            .message()
            .await?
            .ok_or("the picker ended the stream")?;
        r.response.ok_or_else(|| "an empty answer".into())
    }

    /// One body chunk passed back, and whether it ends the body.
    async fn chunk(&mut self) -> Result<(Vec<u8>, bool), Failure> {
        let (Answer::RequestBody(b) | Answer::ResponseBody(b)) = self.next().await? else {
            return Err("a body chunk expected".into());
        };
        let m = b.response.and_then(|c| c.body_mutation);
        match m.and_then(|m| m.mutation) {
            Some(Mutation::StreamedResponse(s)) => Ok((s.body, s.end_of_stream)),
            _ => Err("a streamed body expected".into()),
        }
    }

    /// The request's body passed back, to its end.
    async fn body(&mut self) -> Result<Vec<u8>, Failure> {
        let mut body = Vec::new();
        loop {
            let (chunk, end) = self.chunk().await?;
            body.extend_from_slice(&chunk);
            if end {
                return Ok(body);
            }
        }
    }
}

fn full(status: StatusCode, body: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(body)).boxed());
    *r.status_mut() = status;
    r
}

/// Handle one client request as Envoy would.
async fn handle(
    req: hyper::Request<Incoming>,
    mut epp: ExternalProcessorClient<Channel>,
    upstream: Upstream,
) -> Result<Response<Body>, Failure> {
    let (parts, body) = req.into_parts();
    let body = body.collect().await?.to_bytes();
    let (tx, out) = mpsc::channel(16);
    let rx = epp.process(ReceiverStream::new(out)).await?.into_inner();
    let mut picker = Picker { tx, rx };
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let mut pairs = vec![(":method", parts.method.as_str()), (":path", path.as_str())];
    pairs.extend(
        parts
            .headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?))),
    );
    picker
        .send(Request::RequestHeaders(http_headers(&pairs, false)))
        .await?;
    let last = HttpBody {
        body: body.to_vec(),
        end_of_stream: true,
        ..HttpBody::default()
    };
    picker.send(Request::RequestBody(last)).await?;
    let endpoint = match picker.next().await? {
        Answer::RequestHeaders(h) => (h.response.and_then(|c| c.header_mutation))
            .and_then(|m| m.set_headers.into_iter().find_map(|o| o.header))
            .filter(|h| h.key == DESTINATION)
            .and_then(|h| String::from_utf8(h.raw_value).ok())
            .ok_or("no endpoint in the picker's answer")?,
        Answer::ImmediateResponse(i) => {
            let status = i.status.map_or(500, |s| s.code);
            let status = StatusCode::from_u16(u16::try_from(status)?)?;
            return Ok(full(status, i.body));
        }
        _ => return Err("the picker answered out of order".into()),
    };
    let endpoint = endpoint.split(',').next().unwrap_or_default().to_string();
    let body = picker.body().await?;
    let body = Bytes::from(body);
    let forwarded = || {
        let mut r = hyper::Request::builder()
            .method(parts.method.clone())
            .uri(format!("http://{endpoint}{path}"));
        for (k, v) in &parts.headers {
            r = r.header(k, v);
        }
        r.body(Full::new(body.clone()))
    };
    // Once more, on a fresh connection, when the engine closed a pooled one under the request
    // (the gateway's upstream client does the same).
    let answer = match upstream.request(forwarded()?).await {
        Ok(answer) => answer,
        Err(_) => upstream.request(forwarded()?).await?,
    };
    respond(picker, answer).await
}

/// Pass the answer back through the picker: its status first, then each chunk as it comes.
async fn respond(
    mut picker: Picker,
    answer: Response<Incoming>,
) -> Result<Response<Body>, Failure> {
    let status = answer.status();
    let pairs = [(":status", status.as_str())];
    picker
        .send(Request::ResponseHeaders(http_headers(&pairs, false)))
        .await?;
    let Answer::ResponseHeaders(_) = picker.next().await? else {
        return Err("response headers expected back".into());
    };
    let headers = answer.headers().clone();
    let (frames, client) = mpsc::channel::<Result<Frame<Bytes>, Infallible>>(16);
    let mut incoming = answer.into_body();
    tokio::spawn(async move {
        loop {
            let chunk = match incoming.frame().await {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => Some(data),
                    Err(_) => continue, // trailers: not passed on here
                },
                Some(Err(_)) | None => None,
            };
            let end = chunk.is_none();
            let data = chunk.unwrap_or_default().to_vec();
            let len = data.len();
            let sent = HttpBody {
                body: data,
                end_of_stream: end,
                ..HttpBody::default()
            };
            if picker.send(Request::ResponseBody(sent)).await.is_err() {
                return;
            }
            let Ok(back) = picker.passed_back(len, end).await else {
                return;
            };
            if !back.is_empty()
                && frames
                    .send(Ok(Frame::data(Bytes::from(back))))
                    .await
                    .is_err()
            {
                return;
            }
            if end {
                return;
            }
        }
    });
    let mut r = Response::new(BodyExt::boxed(StreamBody::new(ReceiverStream::new(client))));
    *r.status_mut() = status;
    *r.headers_mut() = headers;
    r.headers_mut().remove(hyper::header::CONTENT_LENGTH);
    Ok(r)
}

impl Picker {
    /// A response chunk of `len` bytes passed back (the picker may cut it in several), with
    /// the body's end when `end`.
    async fn passed_back(&mut self, len: usize, end: bool) -> Result<Vec<u8>, Failure> {
        let mut back = Vec::new();
        loop {
            let (chunk, ended) = self.chunk().await?;
            back.extend_from_slice(&chunk);
            if back.len() >= len && (!end || ended) {
                return Ok(back);
            }
        }
    }
}

fn main() -> Result<(), Failure> {
    let mut args = std::env::args().skip(1);
    let listen: std::net::SocketAddr = args.next().ok_or("LISTEN EPP")?.parse()?;
    let epp = format!("http://{}", args.next().ok_or("LISTEN EPP")?);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let client = ExternalProcessorClient::connect(epp).await?;
        let upstream: Upstream =
            hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build_http();
        let listener = tokio::net::TcpListener::bind(listen).await?;
        loop {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            let (client, upstream) = (client.clone(), upstream.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let (client, upstream) = (client.clone(), upstream.clone());
                    async move {
                        Ok::<_, Infallible>(handle(req, client, upstream).await.unwrap_or_else(
                            |e| full(StatusCode::BAD_GATEWAY, e.to_string().into_bytes()),
                        ))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}
